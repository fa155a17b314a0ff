"""The trip store: every carded trip once, ordered by customer and time, with offsets.

A sample never copies its history: the history of a week-W basket of customer c is the slice
``trips[start(c) : end(c, W))`` of trips strictly before week W (``end`` is a binary search in
the customer's run). The same store serves training, validation (incremental history) and test.
Within a customer, trips are in time order: date, hour, then basket id (LGSR's basket ids are
not chronological; ordering by them put ~17% of consecutive trips out of time order on the
public sample, and the encoder, "last trip", recency and sequence baselines all read this order).
On disk it is Arrow IPC (uncompressed) in parts, which Polars memory-maps: opening it costs no
copy, and the trips' pages are the kernel's page cache, not process memory (``write_sorted``
builds it there a range of customers at a time, so memory holds one range, whatever the number
of trips).

Glossary: T trips, I items (basket lines) over all trips, C customers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.storage.io import atomic_write

TIME_ORDER = ("customer_id", "shop_date", "shop_hour", "basket_id")
GATHER_ROWS = 500_000  # trips a sorting gather reads at once
PART_TRIPS = 1_000_000  # trips of one part of an on-disk store: the range ``write_sorted`` sorts
TRIPS_SCHEMA = pl.Schema(
    {
        "customer_id": pl.String,
        "week": pl.Int16,
        "basket_id": pl.Int64,
        "shop_date": pl.Date,
        "shop_hour": pl.Int8,
        "store_id": pl.String,
        "store_format": pl.String,
        "store_region": pl.String,
        "basket_type": pl.String,
        "basket_dominant_mission": pl.String,
        "basket_price_sensitivity": pl.String,
        "basket_size": pl.String,
        "cust_price_sensitivity": pl.String,
        "cust_lifestage": pl.String,
        "n_products": pl.Int32,
        "spend": pl.Float64,
        "products": pl.List(pl.String),
    }
)


# The raw_transactions columns a trip is built from: the basket's key, its products and spend,
# and the attributes every line of a basket shares (a trip keeps its first line's).
_PER_LINE = ("basket_id", "product_id", "spend")
RAW_TRIP_COLUMNS = (
    "week",
    "basket_id",
    "customer_id",
    "store_id",
    "store_format",
    "store_region",
    "shop_date",
    "shop_hour",
    "product_id",
    "spend",
    "basket_type",
    "basket_dominant_mission",
    "basket_price_sensitivity",
    "basket_size",
    "cust_price_sensitivity",
    "cust_lifestage",
)


def trips_of(raw: pl.LazyFrame) -> pl.LazyFrame:
    """One row per carded basket with its distinct products (sorted), from raw_transactions rows."""
    return (
        raw.filter(pl.col("customer_id").is_not_null())
        .group_by("basket_id")
        .agg(
            pl.col([c for c in RAW_TRIP_COLUMNS if c not in _PER_LINE]).first(),
            pl.col("spend").sum(),
            pl.col("product_id").unique().sort().alias("products"),
        )
        .with_columns(n_products=pl.col("products").list.len().cast(pl.Int32))
        .select(TRIPS_SCHEMA.names())
        .cast(dict(TRIPS_SCHEMA))
        .sort(*TIME_ORDER)
    )


@dataclass(frozen=True)
class TripStore:
    trips: pl.DataFrame  # TRIPS_SCHEMA, sorted by TIME_ORDER
    customers: pl.DataFrame  # customer_id, start, end: each customer's run of trips

    @classmethod
    def build(cls, trips: pl.DataFrame) -> TripStore:
        return cls._sorted([trips])

    @classmethod
    def from_scan(cls, scan: pl.LazyFrame) -> TripStore:
        """``build`` of the scan's rows, which only the sort holds: it frees each unsorted column
        once sorted (a frame passed to ``build`` stays alive in its caller, beside the sorted
        one)."""
        return cls._sorted([scan.collect()])

    @classmethod
    def _sorted(cls, owned: list[pl.DataFrame]) -> TripStore:
        # ``trips.sort`` would hold two whole copies (the product lists are most of the bytes);
        # a column at a time holds the frame and one column, gathered a slice of rows at a time
        # (one gather of every product list was a 1.2 GB transient at ``large``), then joined
        # into one chunk: Polars rechunks a many-chunk frame whole in some joins and group-bys.
        # Basket ids are unique: a total order.
        trips = owned.pop()
        order = trips.select(pl.arg_sort_by(*TIME_ORDER)).to_series()
        columns = []
        for name in trips.columns:
            column = trips[name]
            trips = trips.drop(name)
            parts = [
                column.gather(order.slice(lo, GATHER_ROWS))
                for lo in range(0, len(order), GATHER_ROWS)
            ] or [column.clear()]
            del column  # its sorted parts are all that is left of it
            columns.append(pl.concat(parts, rechunk=True))
            del parts
        trips = pl.DataFrame(columns)
        runs = (
            trips.with_row_index("row")
            .group_by("customer_id", maintain_order=True)
            .agg(pl.col("row").min().alias("start"), (pl.col("row").max() + 1).alias("end"))
        )
        return cls(trips=trips, customers=runs.with_columns(pl.col("start", "end").cast(pl.Int64)))

    @classmethod
    def write_sorted(
        cls, weeks: Iterable[pl.LazyFrame], folder: Path, part_trips: int = PART_TRIPS
    ) -> TripStore:
        """The store of the trips of ``weeks`` (a scan each; ``build``'s rows and order) written
        to ``folder`` one range of customers at a time and opened memory-mapped. Each week is
        read once and cut into the ranges' pieces; each range's pieces are then sorted alone
        and written as one part: memory holds one week or one range (about ``part_trips``
        trips; a customer is never split), never every trip (a filter of every week per range
        decoded whole weeks, 1.9 GB retained at ``xlarge``). The ranges are contiguous in
        customer order, so their parts in order are the store's order."""
        weeks = list(weeks)  # read twice: the customers' counts fix the ranges, then the cut
        counts = pl.concat(
            [w.group_by("customer_id").agg(pl.len()).collect() for w in weeks]
            or [pl.DataFrame(schema={"customer_id": pl.String, "len": pl.UInt32})]
        )
        counts = counts.group_by("customer_id").agg(pl.col("len").sum()).sort("customer_id")
        if counts["customer_id"].null_count():
            raise ValueError("trips without a customer_id: the store holds carded trips only")
        end = counts["len"].cast(pl.Int64).cum_sum()
        customers = counts.select("customer_id", start=end - counts["len"], end=end)
        part = (customers["start"] // part_trips).rle()  # (run length, part) in customer order
        last = customers["customer_id"].gather(part.struct.field("len").cum_sum() - 1)
        pieces = folder / "pieces"
        pieces.mkdir(parents=True, exist_ok=True)
        for i, week in enumerate(weeks):
            rows = week.collect()
            rows = rows.with_columns(part=last.search_sorted(rows["customer_id"], side="left"))
            for (j,), piece in rows.partition_by("part", as_dict=True).items():
                _write(pieces / f"{j:05d}-{i:05d}.arrow", piece.drop("part"))
        for j in range(len(last)):
            files = sorted(pieces.glob(f"{j:05d}-*.arrow"))
            rows = pl.concat([pl.read_ipc(f, memory_map=False) for f in files])
            _write(folder / f"trips-{j:05d}.arrow", cls._sorted([rows]).trips)
            for f in files:
                f.unlink()
        pieces.rmdir()
        _write(folder / "customers.arrow", customers)
        return cls.open(folder)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        _write(folder / "trips-00000.arrow", self.trips)
        _write(folder / "customers.arrow", self.customers)

    @classmethod
    def open(cls, folder: Path) -> TripStore:
        """Memory-mapped: the trips are not read into memory until used, and then as page cache.
        The parts stay separate chunks (``rechunk`` would copy them into memory)."""
        parts = [pl.read_ipc(p, memory_map=True) for p in sorted(folder.glob("trips-*.arrow"))]
        customers = pl.read_ipc(folder / "customers.arrow", memory_map=True)
        trips = pl.concat(parts, rechunk=False) if parts else pl.DataFrame(schema=TRIPS_SCHEMA)
        if trips.height != (int(customers["end"].max()) if customers.height else 0):
            raise ValueError(
                f"{folder}: {trips.height:,} trips in its parts, but its customers' runs end at "
                "another count: a part is missing or from another store"
            )
        return cls(trips=trips, customers=customers)

    def history_bounds(self, customer_id: pl.Series, week: pl.Series) -> pl.DataFrame:
        """(start, end) rows of each (customer, week): the customer's trips in weeks < week.
        Unknown customers get an empty slice."""
        q = pl.DataFrame({"customer_id": customer_id, "week": week.cast(pl.Int16)}).with_row_index(
            "q"
        )
        known = q.join(self.customers, on="customer_id", how="left", maintain_order="left")
        qc = known.join(self._ranks, on="customer_id", how="left", maintain_order="left")
        qkey = (
            qc["c"].fill_null(-1).cast(pl.Int64).to_numpy() * 1024
            + qc["week"].cast(pl.Int64).to_numpy()
        )
        end = np.searchsorted(self._keys, qkey, side="left")
        start = qc["start"].to_numpy()
        has = qc["c"].is_not_null().to_numpy()
        return pl.DataFrame({"start": np.where(has, start, 0), "end": np.where(has, end, 0)}).cast(
            pl.Int64
        )

    @cached_property
    def _ranks(self) -> pl.DataFrame:
        """customer_id, c: each customer's rank in the store's order."""
        return self.customers.with_row_index("c").select("customer_id", "c")

    @cached_property
    def _keys(self) -> np.ndarray:
        """(T,) int64 (customer rank, week) of every trip: sorted, as the trips are. Built once
        per store (a loader asks for bounds a chunk of samples at a time), the ranks repeated
        over the customers' runs rather than joined to every trip's customer_id."""
        runs = self.customers["end"].to_numpy() - self.customers["start"].to_numpy()
        rank = np.repeat(np.arange(len(runs), dtype=np.int64), runs)
        return rank * 1024 + self.trips["week"].cast(pl.Int64).to_numpy()


def _write(path: Path, frame: pl.DataFrame) -> None:
    atomic_write(path, lambda tmp: frame.write_ipc(tmp, compression="uncompressed"))

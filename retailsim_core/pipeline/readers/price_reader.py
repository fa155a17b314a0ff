"""The one way to read shelf prices (D96): dense weeks of ``derived_prices`` and their price
features, materialised from the stored observations when they are read.

``derived_prices`` partitions hold observed cells only (``prices.carried``). Every reader of a
week's whole shelf — features, the model's shelf, serving, evaluation, simulation, the pricing
panel — goes through :func:`price_weeks`, which replays the week fold over the stored rows from
week 1 and yields each asked-for week's dense table and, if asked, its price features. Readers
of observed cells only (brands, category prices, the product graph) scan the stored rows.

Cost: one pass over the stored rows of weeks 1..max(weeks) plus the fold (a few vectorised
passes over the cells to date per week), and a table only for the asked-for weeks. Memory: one
week's dense table at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

from retailsim_core.derived_prices import DERIVED_PRICES_SCHEMA, PriceConfig
from retailsim_core.derived_prices.carried import replay
from retailsim_core.features.feature_tables import PRICE_FEATURES_SCHEMA, PriceFeatureCarry
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PRICES_TABLE, RAW_TABLE


@dataclass(frozen=True)
class PriceWeek:
    week: int
    prices: pl.DataFrame  # DERIVED_PRICES_SCHEMA, every cell of the assortment to date
    features: pl.DataFrame | None  # PRICE_FEATURES_SCHEMA of the same cells, if asked for


class PriceSums:
    """Each product's sum and count of ``actual_price`` over the price-features rows of the
    weeks a replay computed (every store), gathered as it goes: a reader that replays the
    features anyway gives the evaluation its mean prices without a second replay (D128). Sums
    run in row order (a stable sort, then ``np.bincount``), so the same rows give the same bits
    (a hash group-by adds a group's floats in an order that changes from run to run)."""

    def __init__(self) -> None:
        self.weeks: list[int] = []
        self._parts: list[pl.DataFrame] = []

    def add(self, week: int, features: pl.DataFrame) -> None:
        self.weeks.append(week)
        frame = features.select("product_id", total="actual_price", n=pl.lit(1, pl.Int64))
        self._parts.append(_summed(frame))

    def means(self) -> pl.DataFrame:
        """product_id, actual_price: the mean over every row added."""
        sums = _summed(pl.concat(self._parts))
        return sums.select("product_id", actual_price=pl.col("total") / pl.col("n"))


def _summed(frame: pl.DataFrame) -> pl.DataFrame:
    """product_id, total, n summed per product in the frame's row order."""
    frame = frame.sort("product_id", maintain_order=True)
    if frame.height == 0:
        return frame.select("product_id", "total", pl.col("n").cast(pl.Int64))
    run = frame["product_id"].rle_id().to_numpy()
    firsts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    return pl.DataFrame(
        {
            "product_id": frame["product_id"].gather(firsts),
            "total": np.bincount(run, weights=frame["total"].to_numpy()),
            "n": np.bincount(run, weights=frame["n"].to_numpy()).astype(np.int64),
        }
    )


def stored_prices(warehouse: Warehouse, weeks: Iterable[int] | None = None) -> pl.LazyFrame:
    """The stored rows of ``weeks`` (default all): the observed cells, every derived column."""
    return warehouse.scan(PRICES_TABLE, weeks, schema=DERIVED_PRICES_SCHEMA)


def store_regions(warehouse: Warehouse, weeks: Iterable[int]) -> pl.DataFrame:
    """store_id, store_region pairs of the stored rows of ``weeks``, sorted; read a week at a
    time, so memory holds one week's rows, not two strings of every observed cell (a transient
    that grew with the warehouse, beside the training's trip store)."""
    frames = [
        stored_prices(warehouse, [week]).select("store_id", "store_region").unique().collect()
        for week in weeks
    ]
    pairs = pl.concat(frames) if frames else DERIVED_PRICES_SCHEMA.to_frame()
    return pairs.select("store_id", "store_region").unique().sort("store_id", "store_region")


def price_weeks(
    warehouse: Warehouse,
    weeks: Iterable[int],
    *,
    features: bool = False,
    stores: Iterable[str] | None = None,
    cfg: PriceConfig = PriceConfig(),
    sums: PriceSums | None = None,
) -> Iterator[PriceWeek]:
    """Dense ``derived_prices`` weeks (ascending), with their price features if ``features``;
    only the cells of ``stores`` when given (the features are computed over every store first:
    a relative price compares the store's own cells only, but the state is carried for all).
    ``sums``: given the features, every replayed week's (asked or not) is added into it."""
    wanted = sorted(set(weeks))
    if not wanted:
        return
    # The replay reads every week up to the last asked for: a gap fails here, naming the week.
    warehouse.require_weeks(PRICES_TABLE, range(1, wanted[-1] + 1))
    keep = None if stores is None else pl.Series(sorted(set(stores)), dtype=pl.String)
    carry = PriceFeatureCarry(product_categories(warehouse, wanted[-1])) if features else None
    replayed = range(1, wanted[-1] + 1) if features else wanted

    def read(week: int) -> pl.DataFrame:
        return stored_prices(warehouse, [week]).collect()

    asked = set(wanted)
    for week, table in replay(read, replayed, cfg):
        feats = carry.week(table) if carry is not None else None
        if sums is not None and feats is not None:
            sums.add(week, feats)
        if week not in asked:
            continue
        if keep is not None:
            mask = table["store_id"].is_in(keep.implode())
            table = table.filter(mask)
            feats = feats.filter(mask) if feats is not None else None
        yield PriceWeek(week, table, feats)


def read_prices(
    warehouse: Warehouse, weeks: Iterable[int], *, stores: Iterable[str] | None = None
) -> pl.DataFrame:
    """Dense ``derived_prices`` rows of ``weeks`` in one frame."""
    frames = [w.prices for w in price_weeks(warehouse, weeks, stores=stores)]
    return pl.concat(frames) if frames else DERIVED_PRICES_SCHEMA.to_frame()


def read_price_features(
    warehouse: Warehouse,
    weeks: Iterable[int],
    *,
    stores: Iterable[str] | None = None,
    columns: Iterable[str] | None = None,
    pairs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Price features of ``weeks`` in one frame (``columns`` of PRICE_FEATURES_SCHEMA);
    ``pairs`` (store_id, week): only those store-weeks, kept a week at a time (every store of
    every week read was 0.8 GB on the real LGSR sample for 512 simulated contexts)."""
    names = list(columns) if columns is not None else PRICE_FEATURES_SCHEMA.names()
    keys = ["store_id", "week"]
    if pairs is not None:
        pairs = pairs.select(keys).unique().cast({"week": PRICE_FEATURES_SCHEMA["week"]})
    frames = [
        w.features.select(names)
        if pairs is None
        else w.features.join(pairs, on=keys, how="semi", maintain_order="left").select(names)
        for w in price_weeks(warehouse, weeks, features=True, stores=stores)
    ]
    return pl.concat(frames) if frames else PRICE_FEATURES_SCHEMA.to_frame().select(names)


def product_categories(warehouse: Warehouse, through: int) -> pl.DataFrame:
    """product_id -> prod_code_10 of the products sold in weeks <= ``through`` (each product's
    first row in week order, as the features have always read it). A week at a time: memory
    holds one week's rows and the products so far, not every raw row's two strings (a
    transient that grew with the warehouse, beside the training's trip store)."""
    weeks = [w for w in warehouse.weeks(RAW_TABLE) if w <= through]
    parts = [pl.DataFrame(schema={"product_id": pl.String, "prod_code_10": pl.String})]
    seen = parts[0]["product_id"]
    for week in weeks:
        new = (
            warehouse.scan(RAW_TABLE, [week], schema=RAW_TRANSACTIONS_SCHEMA)
            .select("product_id", "prod_code_10")
            .unique("product_id", keep="first", maintain_order=True)
            .filter(~pl.col("product_id").is_in(seen.implode()))
            .collect()
        )
        parts.append(new)
        seen = seen.append(new["product_id"])
    return pl.concat(parts)

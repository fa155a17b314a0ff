"""Model inputs for trips that have not happened: a customer (or a new one) walking into a store
on a date at an hour. Everything is built once from what the pipeline loaded
(``ServingData.build``; ``pipeline/readers/serving_inputs.py`` reads the warehouse);
``ServingData.batch`` then builds a batch for any number of contexts with vectorised lookups only.

The inputs are the honest protocol of the evaluation (decision D52): the customer's trips
before the context's week, the week's customer snapshot, the store, date and hour, and the
shelf known before the trip; no label of the basket (T6 is all unknown). The pieces are the
ones ``TrainingSet`` uses (``batch_inputs``), so a context equal to an evaluated basket's gets
the evaluated basket's inputs, score for score (tested).

Glossary: B contexts, C customers, T trips, V vocabulary, S shelf features.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl
import torch

from retailsim_core.calendar import LGSR, SourceCalendar
from retailsim_core.datasets.batch import Batch, to_batch
from retailsim_core.datasets.batch_inputs import (
    TripIndex,
    calendar_inputs,
    codes,
    customer_inputs,
    days_since_last_trip,
    history_alpha,
    history_inputs,
    store_inputs,
)
from retailsim_core.datasets.history_features import BasketContext
from retailsim_core.datasets.model_inputs import ModelInputs
from retailsim_core.datasets.shelf import ShelfPrices
from retailsim_core.datasets.tensors import PRICE_COLUMNS, TensorConfig
from retailsim_core.datasets.tokens import ProductVocab
from retailsim_core.ingest.lgsr import LIFESTAGE_CODES, PRICE_SENSITIVITY_CODES
from retailsim_core.settings import load_settings
from retailsim_core.tables import (
    SAMPLES_TABLE,
)

CONTEXT_SCHEMA = pl.Schema(
    {
        "customer_id": pl.String,  # null: a new customer (cold start)
        "store_id": pl.String,
        "date": pl.Date,
        "hour": pl.Int64,
    }
)
WEEK_KEY = 1024  # customer rank * WEEK_KEY + week orders trips by (customer, week)


@dataclass(frozen=True)
class ResolvedContexts:
    """``ServingData.resolve``: (B,) int64 arrays; -1 where a lookup found nothing."""

    day: np.ndarray  # days since 1970-01-01
    week: np.ndarray  # the source's week of the day
    hour: np.ndarray
    rank: np.ndarray  # the customer's rank in the trip store (-1: new or unknown)
    start: np.ndarray  # the customer's first trip row (-1: new or unknown)
    snapshot_row: np.ndarray  # the customer's T1 snapshot of the week (-1: none)
    code: np.ndarray  # the store's code
    store_row: np.ndarray  # the store's T5 row of the week
    shelf_row: np.ndarray  # the store's shelf row of the week


def served_weeks(sample_weeks: list[int], checkpoint_config: dict) -> list[int]:
    """The weeks a checkpoint serves: the warehouse's sample weeks (``sample_weeks``) after its
    validation weeks (weeks it neither trained nor stopped on)."""
    split = checkpoint_config.get("split") or load_settings().split.__dict__
    weeks = [w for w in sample_weeks if w > split["valid_end"]]
    if not weeks:
        raise FileNotFoundError(
            f"no {SAMPLES_TABLE} week after week {split['valid_end']} (the checkpoint's last "
            "validation week) in the warehouse: nothing to serve"
        )
    return weeks


@dataclass(frozen=True)
class ServingData:
    """What the model reads for any context of the served weeks, loaded once."""

    vocab: ProductVocab
    weeks: tuple[int, ...]  # the weeks contexts may fall in
    tensor_cfg: TensorConfig
    index: TripIndex
    customers: pl.DataFrame  # customer_id, rank, start, end (their run of trips)
    customer_codes: np.ndarray  # (T, 2) price-sensitivity and lifestage codes of each trip
    trip_keys: np.ndarray  # (T,) rank * WEEK_KEY + week of every trip, sorted
    stores: pl.DataFrame  # store_id, store_format, store_region, code
    snapshot_keys: pl.DataFrame  # customer_id, week, snapshot_row
    snapshots: np.ndarray  # (R + 1, F) T1 numeric of each snapshot row; the last row zeros
    store_weeks: pl.DataFrame  # store_id, week, store_row, shelf_row: every store x served week
    store_context: tuple[
        np.ndarray, np.ndarray, np.ndarray
    ]  # T5 numeric, codes, is_new by store_row
    shelf: ShelfPrices
    price_features: pl.DataFrame  # product_id, store_id, week, PRICE_COLUMNS of served weeks
    calendar: SourceCalendar = LGSR  # the source's weeks: dates <-> weeks

    @classmethod
    def build(
        cls,
        inputs: ModelInputs,
        prices: pl.DataFrame,
        weeks: list[int],
        tensor_cfg: TensorConfig,
        calendar: SourceCalendar = LGSR,
    ) -> ServingData:
        """From the served weeks' model inputs and price features (product_id, store_id, week,
        PRICE_COLUMNS of every cell of those weeks)."""
        trips = inputs.store.trips
        index = TripIndex.build(trips, inputs.vocab)
        customers = inputs.store.customers.with_row_index("rank").select(
            "customer_id", pl.col("rank").cast(pl.Int64), "start", "end"
        )
        rank = trips.select("customer_id").join(
            customers.select("customer_id", "rank"), on="customer_id", how="left"
        )["rank"]
        stores = (
            trips.select("store_id", "store_format", "store_region")
            .with_columns(code=pl.Series(index.arrays.store))
            .unique("store_id", keep="last")
            .sort("store_id")
        )
        keys = (
            pl.concat([t.select("customer_id", "week") for t in (inputs.affinity, inputs.missions)])
            .unique()
            .sort("customer_id", "week")
        )
        values, _, _ = customer_inputs(keys, inputs.affinity, inputs.missions)
        store_weeks = stores.join(
            pl.DataFrame({"week": sorted(weeks)}, schema={"week": pl.Int16}), how="cross"
        ).with_row_index("store_row")
        store_context = store_inputs(store_weeks, inputs.store_features)
        store_weeks = store_weeks.select(
            "store_id",
            pl.col("week").cast(pl.Int64),
            pl.col("store_row").cast(pl.Int64),
            shelf_row=inputs.shelf.rows_of(store_weeks["store_id"], store_weeks["week"]),
        )
        return cls(
            vocab=inputs.vocab,
            weeks=tuple(sorted(weeks)),
            tensor_cfg=tensor_cfg,
            index=index,
            customers=customers,
            customer_codes=trips.select(
                codes("cust_price_sensitivity", PRICE_SENSITIVITY_CODES),
                codes("cust_lifestage", LIFESTAGE_CODES),
            )
            .to_numpy()
            .astype(np.int64),
            trip_keys=rank.to_numpy() * WEEK_KEY + trips["week"].cast(pl.Int64).to_numpy(),
            stores=stores,
            snapshot_keys=keys.with_columns(
                pl.col("week").cast(pl.Int64), snapshot_row=pl.int_range(pl.len(), dtype=pl.Int64)
            ),
            snapshots=np.vstack([values, np.zeros((1, values.shape[1]), values.dtype)]),
            store_weeks=store_weeks,
            store_context=store_context,
            shelf=inputs.shelf,
            price_features=prices,
            calendar=calendar,
        )

    @property
    def dates(self) -> tuple[dt.date, dt.date]:
        """First and last date of the served weeks."""
        monday = self.calendar.first_monday
        first = monday + dt.timedelta(weeks=self.weeks[0] - 1)
        return first, monday + dt.timedelta(weeks=self.weeks[-1], days=-1)

    @cached_property
    def lookups(self) -> dict[str, dict]:
        """Id -> row dictionaries. A request holds a handful of contexts: hash lookups cost
        microseconds where a join of a few rows costs milliseconds of fixed overhead."""
        c, sw, sk = self.customers, self.store_weeks, self.snapshot_keys
        return {
            "customer": dict(
                zip(c["customer_id"], zip(c["rank"], c["start"], strict=True), strict=True)
            ),
            "store": dict(zip(self.stores["store_id"], self.stores["code"], strict=True)),
            "store_week": dict(
                zip(
                    zip(sw["store_id"], sw["week"], strict=True),
                    zip(sw["store_row"], sw["shelf_row"], strict=True),
                    strict=True,
                )
            ),
            "snapshot": dict(
                zip(
                    zip(sk["customer_id"], sk["week"], strict=True), sk["snapshot_row"], strict=True
                )
            ),
        }

    def resolve(self, contexts: pl.DataFrame) -> ResolvedContexts:
        """``contexts`` (CONTEXT_SCHEMA) as arrays: their day and week, the customer's rank and
        first trip row (-1 for a new or unknown customer), its snapshot row, the store's code
        and its T5 and shelf rows of the week (-1 where unknown). Dictionary lookups on plain
        lists: a served request is one row, where a dataframe's per-call cost would dominate."""
        look, none = self.lookups, (-1, -1)
        day = contexts["date"].cast(pl.Int32).to_numpy().astype(np.int64)
        week = (day - self._first_day) // 7 + 1
        customers = [look["customer"].get(k, none) for k in contexts["customer_id"].to_list()]
        stores = contexts["store_id"].to_list()
        weeks = week.tolist()
        keys = list(zip(stores, weeks, strict=True))
        store_weeks = [look["store_week"].get(k, none) for k in keys]
        snapshot = look["snapshot"]
        ids = contexts["customer_id"].to_list()

        def column(values) -> np.ndarray:
            return np.asarray(values, dtype=np.int64).reshape(len(day))

        unknown = [k for k, row in zip(keys, store_weeks, strict=True) if row == none]
        if unknown:
            raise ValueError(f"no store row for (store, week) {unknown[0]}: check the contexts")
        return ResolvedContexts(
            day=day,
            week=week,
            hour=contexts["hour"].to_numpy().astype(np.int64),
            rank=column([r if r is not None else -1 for r, _ in customers]),
            start=column([s if s is not None else -1 for _, s in customers]),
            snapshot_row=column([snapshot.get(k, -1) for k in zip(ids, weeks, strict=True)]),
            code=column([look["store"].get(k, -1) for k in stores]),
            store_row=column([r for r, _ in store_weeks]),
            shelf_row=column([r for _, r in store_weeks]),
        )

    @cached_property
    def _first_day(self) -> int:
        return int(np.datetime64(self.calendar.first_monday.isoformat(), "D").astype(np.int64))

    def history_bounds(self, c: ResolvedContexts) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) trip rows of each resolved context's history: weeks before its week."""
        known = c.rank >= 0
        end = np.where(
            known, np.searchsorted(self.trip_keys, c.rank * WEEK_KEY + c.week, side="left"), 0
        )
        return np.where(known, c.start, 0), end

    def history_trips(self, contexts: pl.DataFrame) -> np.ndarray:
        """(B,) trips before each context's week (orders big batches by their padding)."""
        start, end = self.history_bounds(self.resolve(contexts))
        return end - start

    def batch(self, contexts: pl.DataFrame, history_width: int | None = None) -> Batch:
        """The model batch of ``contexts`` (known stores, served weeks: see ``resolve``), with
        ``cold_start`` (B,) True where the customer has no trip before the week. Encoder trips
        are padded to ``history_width`` when given (a fixed width for the ONNX graph)."""
        c = self.resolve(contexts)
        start, end = self.history_bounds(c)
        encoder_start = np.maximum(start, end - self.tensor_cfg.max_history_trips)
        ctx = BasketContext(
            start=start,
            end=end,
            day=c.day.astype(np.int32),
            store=c.code,
            hour=c.hour,
            weekend=(c.day + 3) % 7 >= 5,  # Saturday or Sunday (1970-01-01 was a Thursday)
        )
        history = history_inputs(self.index, encoder_start, ctx, width=history_width)
        missing = len(self.snapshots) - 1
        customer_numeric = self.snapshots[np.where(c.snapshot_row >= 0, c.snapshot_row, missing)]
        since = days_since_last_trip(self.index, ctx, encoder_start)
        store_numeric, store_codes, store_is_new = (
            part[c.store_row] for part in self.store_context
        )
        b = len(c.day)
        tensors = {
            **history,
            # The customer's segment codes as of the latest trip before the week; none if new.
            "customer_codes": np.where(
                (end > start)[:, None], self.customer_codes[np.maximum(end - 1, 0)], 0
            ),
            "customer_numeric": customer_numeric,
            "history_alpha": history_alpha(end - start),
            "calendar": calendar_inputs(c.day, c.hour, c.week, since, self.calendar),
            "store_codes": store_codes,
            "store_numeric": store_numeric,
            "store_is_new": store_is_new,
            "basket_labels": np.zeros((b, 4), dtype=np.int64),  # nothing of the basket is known
            "item_prices": np.zeros((b, 1, len(PRICE_COLUMNS)), dtype=np.float32),
            "shelf": self.shelf.dense(c.shelf_row),
        }
        return to_batch(tensors | {"cold_start": end == start})

    def sample_contexts(self, n: int, seed: int, new_share: float = 0.1) -> pl.DataFrame:
        """``n`` seeded random contexts of the served weeks (known customers, a ``new_share``
        of new ones, known stores, hours 8-20): requests for tests and load benchmarks."""
        rng = np.random.default_rng(seed)
        first, last = self.dates
        customers = self.customers["customer_id"].to_numpy()[
            rng.integers(0, self.customers.height, n)
        ]
        new = pl.Series(rng.random(n) < new_share)
        return pl.DataFrame(
            {
                "customer_id": pl.Series(customers, dtype=pl.String).set(new, None),
                "store_id": self.stores["store_id"].to_numpy()[
                    rng.integers(0, self.stores.height, n)
                ],
                "date": pl.date_range(first, last, eager=True).sample(
                    n, with_replacement=True, seed=seed
                ),
                "hour": rng.integers(8, 21, n),
            },
            schema=CONTEXT_SCHEMA,
        )

    def price_book(self, store_ids: list[str], weeks: list[int]) -> torch.Tensor:
        """(B, V, P) T4 inputs of every product at each context's store and week."""
        from retailsim_core.counterfactual.simulate import price_book

        return price_book(self.price_features, store_ids, weeks, self.vocab)

"""``temporal_metadata``, ``customer_trips`` and ``bucketed_samples``: one pass over the weeks.

Week W's metadata and samples come from the state of weeks < W; its trips (the week's carded
baskets with their products) are appended to the trip store as partition W. The history of a
sample is never copied: it is the slice of the trip store before its week (``TripStore``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl

from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import METADATA_TABLE, RAW_TABLE, SAMPLES_TABLE, TRIPS_TABLE
from retailsim_core.datasets.sample_buckets import (
    METADATA_SCHEMA,
    SAMPLES_SCHEMA,
    HistoryState,
    advance_history,
    samples_from_metadata,
    week_metadata,
)
from retailsim_core.datasets.trips import RAW_TRIP_COLUMNS, TRIPS_SCHEMA, TripStore, trips_of


def _raw(warehouse: Warehouse, weeks: Iterable[int]) -> pl.DataFrame:
    weeks = list(weeks)
    warehouse.require_weeks(RAW_TABLE, weeks)
    return (
        warehouse.scan(RAW_TABLE, weeks, schema=RAW_TRANSACTIONS_SCHEMA)
        .select(RAW_TRIP_COLUMNS)
        .collect()
    )


def training_data_weeks(
    warehouse: Warehouse,
    weeks: Iterable[int],
    split: TemporalSplit,
    log: Callable[[str], None] = lambda _: None,
) -> pl.DataFrame:
    weeks = sorted(weeks)
    state = HistoryState.empty()
    if weeks[0] > 1:
        for (week,), part in sorted(
            _raw(warehouse, range(1, weeks[0])).partition_by("week", as_dict=True).items()
        ):
            state = advance_history(state, part, week)
    rows = []
    for i, week in enumerate(weeks, 1):
        raw = _raw(warehouse, [week])
        metadata = week_metadata(raw, state, week, split)
        samples = samples_from_metadata(metadata)
        warehouse.write_set(
            week,
            {
                METADATA_TABLE: (metadata, METADATA_SCHEMA),
                SAMPLES_TABLE: (samples, SAMPLES_SCHEMA),
                TRIPS_TABLE: (trips_of(raw.lazy()).collect(), TRIPS_SCHEMA),
            },
        )
        state = advance_history(state, raw, week)
        rows.append(
            {
                "week": week,
                "baskets": metadata.height,
                "samples": samples.height,
                "cold_start": int(samples["is_cold_start"].sum()),
                "novel_products": int(samples["is_novel_products"].sum()),
            }
        )
        log(f"[{i}/{len(weeks)}] training data week {week}: {samples.height:,} samples")
    return pl.DataFrame(rows)


def build_trip_store(
    warehouse: Warehouse, max_week: int | None = None, folder: Path | None = None
) -> TripStore:
    """All trips of weeks <= ``max_week`` (default: every materialized week) as one store; given
    ``folder``, written there and memory-mapped (``TripStore.write_sorted``)."""
    weeks = [w for w in warehouse.weeks(TRIPS_TABLE) if max_week is None or w <= max_week]
    if folder is None:
        return TripStore.from_scan(warehouse.scan(TRIPS_TABLE, weeks, schema=TRIPS_SCHEMA))
    scans = (warehouse.scan(TRIPS_TABLE, [w], schema=TRIPS_SCHEMA) for w in weeks)
    return TripStore.write_sorted(scans, folder)

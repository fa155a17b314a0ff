"""``customer_store_affinity`` and ``mission_patterns``: weekly as-of snapshots in one pass.

A run over weeks A..B folds the visits of weeks 1..A-1 into running counts (a scan of five
raw columns), then for each W in A..B writes the snapshots from the counts of weeks < W and
only then folds in week W. A backfill of all weeks is therefore a single pass over the data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import polars as pl

from retailsim_core.customers.customer_features import (
    AFFINITY_SCHEMA,
    MISSION_SCHEMA,
    affinity_snapshot,
    mission_snapshot,
)
from retailsim_core.customers.customer_state import CustomerState, advance, visits
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import AFFINITY_TABLE, MISSIONS_TABLE, RAW_TABLE


def _week_visits(warehouse: Warehouse, weeks: Iterable[int]) -> pl.DataFrame:
    weeks = list(weeks)
    warehouse.require_weeks(RAW_TABLE, weeks)
    return visits(warehouse.scan(RAW_TABLE, weeks, schema=RAW_TRANSACTIONS_SCHEMA)).collect()


def snapshot_weeks(
    warehouse: Warehouse, weeks: Iterable[int], log: Callable[[str], None] = lambda _: None
) -> pl.DataFrame:
    """Write both snapshot tables for ``weeks`` (ascending); returns a per-week summary."""
    weeks = sorted(weeks)
    state = CustomerState.empty()
    if weeks[0] > 1:
        history = _week_visits(warehouse, range(1, weeks[0]))
        for week, part in sorted(history.partition_by("week", as_dict=True).items()):
            state = advance(state, part, week[0])
        log(f"snapshots: folded {history.height:,} visits of weeks 1..{weeks[0] - 1}")
    rows = []
    for i, week in enumerate(weeks, 1):
        affinity, missions = affinity_snapshot(state, week), mission_snapshot(state, week)
        warehouse.write_set(
            week,
            {
                AFFINITY_TABLE: (affinity, AFFINITY_SCHEMA),
                MISSIONS_TABLE: (missions, MISSION_SCHEMA),
            },
        )
        rows.append(
            {
                "week": week,
                "customers": affinity.height,
                "mean_loyalty": affinity["loyalty_score"].mean(),
                "mean_switching_rate": affinity["switching_rate"].mean(),
                "mean_consistency": missions["mission_consistency"].mean(),
            }
        )
        state = advance(state, _week_visits(warehouse, [week]), week)
        log(f"[{i}/{len(weeks)}] snapshots week {week}: {affinity.height:,} customers")
    return pl.DataFrame(
        rows,
        schema={
            "week": pl.Int16,
            "customers": pl.Int64,
            "mean_loyalty": pl.Float64,
            "mean_switching_rate": pl.Float64,
            "mean_consistency": pl.Float64,
        },
    )

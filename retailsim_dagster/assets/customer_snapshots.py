"""``customer_store_affinity`` and ``mission_patterns`` (design §2.4, §2.5), one step, with
their range checks."""

import dagster as dg
import polars as pl

from retailsim_core.customers.customer_features import AFFINITY_SCHEMA, MISSION_SCHEMA
from retailsim_core.pipeline.data.snapshot_weeks import snapshot_weeks
from retailsim_core.tables import AFFINITY_TABLE, MISSIONS_TABLE, RAW_TABLE
from retailsim_dagster.metadata import markdown_table, table_schema
from retailsim_dagster.partitions import previous_weeks, weekly_partitions, weeks_of
from retailsim_dagster.resources import WarehouseResource


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            AFFINITY_TABLE,
            group_name="pipeline",
            kinds={"polars", "parquet"},
            deps=[dg.AssetDep(RAW_TABLE, partition_mapping=previous_weeks(1))],
            description="Store affinity of each carded customer as of week W, from weeks < W "
            "(design §2.4).",
            metadata={"dagster/column_schema": table_schema(AFFINITY_SCHEMA)},
        ),
        dg.AssetSpec(
            MISSIONS_TABLE,
            group_name="pipeline",
            kinds={"polars", "parquet"},
            deps=[dg.AssetDep(RAW_TABLE, partition_mapping=previous_weeks(1))],
            description="Mission patterns of each carded customer as of week W, from weeks < W "
            "(design §2.5).",
            metadata={"dagster/column_schema": table_schema(MISSION_SCHEMA)},
        ),
    ],
    partitions_def=weekly_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    can_subset=True,
)
def customer_snapshots(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    summary = snapshot_weeks(warehouse.warehouse, weeks_of(context), log=context.log.info)
    meta = {
        "customers_last_week": int(summary["customers"][-1]),
        "per_week": dg.MetadataValue.md(markdown_table(summary)),
    }
    for key in context.selected_asset_keys:
        yield dg.MaterializeResult(
            asset_key=key, metadata={**meta, "dagster/row_count": int(summary["customers"].sum())}
        )


@dg.asset_check(
    asset=AFFINITY_TABLE,
    description="HHI in [1/stores, 1], shares in [0, 1], one row per customer-week",
)
def affinity_ranges(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    lf = warehouse.warehouse.scan(AFFINITY_TABLE)
    bad = (
        lf.select(
            (
                (pl.col("loyalty_score") > 1 + 1e-9)
                | (pl.col("loyalty_score") < 1 / pl.col("total_stores_visited") - 1e-9)
            )
            .sum()
            .alias("hhi"),
            ((pl.col("switching_rate") < 0) | (pl.col("switching_rate") > 1))
            .sum()
            .alias("switching"),
            ((pl.col("visit_concentration") < 0) | (pl.col("visit_concentration") > 1 + 1e-9))
            .sum()
            .alias("concentration"),
            (pl.len() - pl.struct("customer_id", "week").n_unique()).alias("duplicates"),
        )
        .collect()
        .row(0, named=True)
    )
    return dg.AssetCheckResult(
        passed=not any(bad.values()), metadata={f"violations_{k}": int(v) for k, v in bad.items()}
    )


@dg.asset_check(
    asset=MISSIONS_TABLE, description="mission distributions sum to 1; entropies within bounds"
)
def mission_distributions(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    lf = warehouse.warehouse.scan(MISSIONS_TABLE)

    # A customer whose trips were all labelled XX has no distribution (null fields), not a broken
    # one.
    def total(col):
        return pl.sum_horizontal(pl.col(col).struct.unnest())

    def defined(col):
        return pl.any_horizontal(pl.col(col).struct.unnest().is_not_null())

    bad = (
        lf.select(
            (defined("mission_type_dist") & ((total("mission_type_dist") - 1).abs() > 1e-9))
            .sum()
            .alias("type_dist"),
            (defined("mission_focus_dist") & ((total("mission_focus_dist") - 1).abs() > 1e-9))
            .sum()
            .alias("focus_dist"),
            ((pl.col("mission_consistency") < -1e-9) | (pl.col("mission_consistency") > 1 + 1e-9))
            .sum()
            .alias("consistency"),
        )
        .collect()
        .row(0, named=True)
    )
    return dg.AssetCheckResult(
        passed=not any(bad.values()), metadata={f"violations_{k}": int(v) for k, v in bad.items()}
    )

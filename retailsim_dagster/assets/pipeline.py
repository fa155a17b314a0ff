"""Data pipeline (design §2): derived_prices, product_graph, customer_store_affinity,
mission_patterns.
"""

import dagster as dg

from retailsim_core.customers import AFFINITY_SCHEMA
from retailsim_core.pipeline.customers import (
    AFFINITY_TABLE,
    MISSION_SCHEMA,
    MISSIONS_TABLE,
    snapshot_weeks,
)
from retailsim_core.pipeline.graph import build_product_graph, write_graph
from retailsim_core.pipeline.ingest import RAW_TABLE
from retailsim_core.pipeline.prices import DERIVED_PRICES_SCHEMA, PRICES_TABLE, derive_price_weeks
from retailsim_core.prices import PriceConfig
from retailsim_dagster.metadata import markdown_table, table_schema
from retailsim_dagster.partitions import CPU_POOL, previous_weeks, weekly_partitions, weeks_of
from retailsim_dagster.resources import PipelineConfigResource, WarehouseResource

PRICE_HISTORY_WEEKS = PriceConfig().history_weeks


@dg.asset(
    name=PRICES_TABLE,
    group_name="pipeline",
    partitions_def=weekly_partitions,
    kinds={"polars", "parquet"},
    pool=CPU_POOL,
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[
        dg.AssetDep(RAW_TABLE),
        # Week W reads the state left by its previous partitions (cumulative statistics and
        # the observed prices of the reference lookback), never the whole history.
        dg.AssetDep(PRICES_TABLE, partition_mapping=previous_weeks(PRICE_HISTORY_WEEKS)),
    ],
    metadata={"dagster/column_schema": table_schema(DERIVED_PRICES_SCHEMA)},
    description="Actual, base and reference prices, promotions, imputation and validation flags "
    "per "
    "product x store (the store's assortment to date) x week (design §2.2).",
)
def derived_prices(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    summary = derive_price_weeks(warehouse.warehouse, weeks_of(context), log=context.log.info)
    totals = summary.drop("week").sum().row(0, named=True)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": int(totals["cells"]),
            "observed_cells": int(totals["observed"]),
            "promo_cells": int(totals["promo_cells"]),
            "promo_share_of_observed": totals["promo_cells"] / max(totals["observed"], 1),
            "per_week": dg.MetadataValue.md(
                markdown_table(
                    summary.select(
                        "week",
                        "cells",
                        "observed",
                        "promo_cells",
                        "max_depth",
                        "flag_base_price_decrease",
                    )
                )
            ),
        }
    )


@dg.asset(
    group_name="pipeline",
    kinds={"scipy", "parquet"},
    deps=[RAW_TABLE, PRICES_TABLE],
    pool=CPU_POOL,
    backfill_policy=dg.BackfillPolicy.single_run(),  # lets `--partition-range` runs include it
    description="Heterogeneous product graph from the training weeks: co-purchase, substitution "
    "and "
    "hierarchy edges as Parquet node and edge tables (design §2.3).",
)
def product_graph(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
) -> dg.MaterializeResult:
    graph = build_product_graph(
        warehouse.warehouse, pipeline_config.split, pipeline_config.graph, log=context.log.info
    )
    write_graph(warehouse.warehouse, graph)
    degrees = graph.edges.group_by("edge_type").len("edges").sort("edge_type")
    return dg.MaterializeResult(
        metadata={
            **graph.summary(),
            "training_weeks": pipeline_config.train_end,
            "edges_by_type": dg.MetadataValue.md(markdown_table(degrees)),
            "degree_distribution": dg.MetadataValue.md(markdown_table(graph.degree_histogram())),
        }
    )


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
    pool=CPU_POOL,
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

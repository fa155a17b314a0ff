"""Training data (design §4.7): temporal_metadata, customer_trips (the trip store),
bucketed_samples.
"""

import dagster as dg

from retailsim_core.datasets.sample_buckets import METADATA_SCHEMA, SAMPLES_SCHEMA
from retailsim_core.datasets.trips import TRIPS_SCHEMA
from retailsim_core.pipeline.data.training_data_weeks import training_data_weeks
from retailsim_core.tables import METADATA_TABLE, RAW_TABLE, SAMPLES_TABLE, TRIPS_TABLE
from retailsim_dagster.metadata import markdown_table, table_schema
from retailsim_dagster.partitions import weekly_partitions, weeks_of
from retailsim_dagster.resources import PipelineConfigResource, WarehouseResource

_SPECS = [
    (
        METADATA_TABLE,
        METADATA_SCHEMA,
        "Per basket of week W, from weeks < W: split, history trips/weeks, "
        "bucket, cold start, novel products (design §4.7.2 stage 1).",
    ),
    (
        TRIPS_TABLE,
        TRIPS_SCHEMA,
        "The trip store, one partition per week: every carded basket with its "
        "products. A sample's history is the slice of trips before its week.",
    ),
    (
        SAMPLES_TABLE,
        SAMPLES_SCHEMA,
        "Training samples of week W: carded baskets, bucketed by prior trips "
        "(histories are slices of customer_trips, never copies).",
    ),
]


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            name,
            group_name="training_data",
            kinds={"polars", "parquet"},
            description=desc,
            deps=[dg.AssetDep(RAW_TABLE)],
            metadata={"dagster/column_schema": table_schema(schema)},
        )
        for name, schema, desc in _SPECS
    ],
    partitions_def=weekly_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    can_subset=True,
)
def training_data(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
):
    summary = training_data_weeks(
        warehouse.warehouse, weeks_of(context), pipeline_config.split, log=context.log.info
    )
    meta = {
        "samples": int(summary["samples"].sum()),
        "cold_start_samples": int(summary["cold_start"].sum()),
        "per_week": dg.MetadataValue.md(markdown_table(summary)),
    }
    for key in context.selected_asset_keys:
        yield dg.MaterializeResult(asset_key=key, metadata=meta)

"""``model_refresh`` (issue #60, D111): the world model refreshed as each week lands, warm-started
from the week before's (the trained checkpoint first), so the service and the evaluation predict
week W + 1 with a model that has read week W, as every counting baseline has."""

import dagster as dg
import polars as pl

from retailsim_core.pipeline.model_refresh import refresh_weeks, seconds_of
from retailsim_core.tables import CHECKPOINT_TABLE, REFRESH_TABLE
from retailsim_dagster.assets.model import INPUTS
from retailsim_dagster.metadata import markdown_table
from retailsim_dagster.partitions import (
    CPU_HEAVY,
    CPU_POOL,
    previous_weeks,
    weekly_partitions,
    weeks_of,
)
from retailsim_dagster.resources import PipelineConfigResource, WarehouseResource


@dg.asset(
    name=REFRESH_TABLE,
    group_name="model",
    kinds={"pytorch", "safetensors"},
    partitions_def=weekly_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    pool=CPU_POOL,
    op_tags=CPU_HEAVY,
    deps=[
        CHECKPOINT_TABLE,
        *INPUTS,  # the weekly ones: the partition's own week
        dg.AssetDep(REFRESH_TABLE, partition_mapping=previous_weeks(1)),
    ],
    description="Week W's refresh of the world model: the week before's refresh (the trained "
    "checkpoint first) fine-tuned on the weeks it has not read, through W, with a replay of "
    "older weeks, on a wall-clock budget; the model that predicts week W + 1 (D111).",
)
def model_refresh(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
) -> dg.MaterializeResult:
    _, train_cfg = pipeline_config.world_model
    with warehouse.model_step(context):
        summaries = refresh_weeks(
            warehouse.warehouse,
            pipeline_config.split,
            weeks_of(context),
            train_cfg,
            pipeline_config.refresh,
            log=context.log.info,
        )
    rows = [{k: s.get(k) for k in ("week", "model", "new_samples", "seconds")} for s in summaries]
    return dg.MaterializeResult(
        metadata={
            "weeks": len(summaries),
            "refreshed": sum(s["model"] == REFRESH_TABLE for s in summaries),
            "training_seconds": round(seconds_of(summaries), 1),
            "per_week": dg.MetadataValue.md(markdown_table(pl.DataFrame(rows))),
        }
    )

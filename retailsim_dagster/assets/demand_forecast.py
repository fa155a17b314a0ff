"""``demand_forecast``: the units every cell sells in each test week, forecast before the week
by each method, and the scores a retailer plans with (issue #61)."""

import dagster as dg

from retailsim_core.pipeline.demand_run import run_demand_check
from retailsim_core.tables import DEMAND_TABLE, PROMOTIONS_TABLE, RAW_TABLE
from retailsim_dagster.resources import PipelineConfigResource, WarehouseResource


@dg.asset(
    name=DEMAND_TABLE,
    group_name="model",
    kinds={"polars", "parquet"},
    deps=[RAW_TABLE, PROMOTIONS_TABLE],
    backfill_policy=dg.BackfillPolicy.single_run(),  # `--partition-range` runs need it
    description="Units of every product x store that sold before the test weeks, in each test "
    "week, forecast from the weeks before it (seasonal naive, moving averages); WAPE, bias and "
    "MASE with product-resample intervals, all and promoted cell-weeks (issue #61).",
)
def demand_forecast(
    warehouse: WarehouseResource, pipeline_config: PipelineConfigResource
) -> dg.MaterializeResult:
    wh = warehouse.warehouse
    folder = wh.table_dir(DEMAND_TABLE)
    scores = run_demand_check(wh, pipeline_config.split, folder, seed=pipeline_config.model_seed)
    best = min(scores["all"], key=lambda m: scores["all"][m]["wape"])
    return dg.MaterializeResult(
        metadata={
            "cell_weeks": scores["cell_weeks"],
            "promoted_cell_weeks": scores["promoted_cell_weeks"],
            **{f"{m}_WAPE": v["wape"] for m, v in scores["all"].items()},
            "best_WAPE": best,
            "seconds": scores["seconds"],
            "forecasts": dg.MetadataValue.path(str(folder / "demand_forecast.parquet")),
        }
    )

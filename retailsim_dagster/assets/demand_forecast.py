"""``demand_forecast``: the units every cell sells in each test week, forecast before the week
by each method, and the scores a retailer plans with; ``trip_forecast``: who comes to the store
in each test week and to which store; ``world_model_demand``: the world model's units of the same
cell-weeks, summed over the shoppers the trips forecast (issue #61)."""

import dagster as dg

from retailsim_core.demand.trips.trip_check import STORE_METHODS, VISIT_METHODS
from retailsim_core.pipeline.demand_run import run_demand_check
from retailsim_core.pipeline.readers.truth import bound_world
from retailsim_core.pipeline.trips_run import run_trip_check
from retailsim_core.pipeline.world_demand_run import WORLD, run_world_demand
from retailsim_core.tables import (
    CHECKPOINT_TABLE,
    DEMAND_TABLE,
    PROMOTIONS_TABLE,
    RAW_TABLE,
    REFRESH_TABLE,
    TRIP_FORECAST_TABLE,
    TRIPS_TABLE,
    WORLD_DEMAND_TABLE,
)
from retailsim_dagster.assets.model import EAGER, JUDGES_CHECKPOINT, REFRESHES
from retailsim_dagster.partitions import CPU_HEAVY, CPU_POOL
from retailsim_dagster.resources import (
    PipelineConfigResource,
    RawSourceResource,
    WarehouseResource,
)

# The libraries' fits and forecasts use every core: in the model pool, so that they never run
# beside a wall-clock-budgeted training (SASRec's and BERT4Rec's budgets bind on real data).
FORECAST_STEP = dict(group_name="model", pool=CPU_POOL, op_tags=CPU_HEAVY)


def _recovery(scores: dict, part: str) -> dict:
    """The planted response's recovery on synthetic data (D132); nothing on real data."""
    got = scores.get(part)
    if got is None:
        return {}
    lifts = f"{got['forecast_mean_lift']:.3f} (planted {got['planted_mean_lift']:.3f})"
    return {f"{part}_correlation": got["correlation"], f"{part}_mean_lift": lifts}


@dg.asset(
    name=DEMAND_TABLE,
    **FORECAST_STEP,
    kinds={"polars", "parquet"},
    deps=[RAW_TABLE, PROMOTIONS_TABLE],
    backfill_policy=dg.BackfillPolicy.single_run(),  # `--partition-range` runs need it
    description="Units of every product x store that sold before the test weeks, in each test "
    "week, forecast from the weeks before it (seasonal naive, moving averages, LightGBM through "
    "mlforecast, pyfixest's Poisson fixed effects); WAPE, bias, MASE, RMSE and chain WAPE with "
    "product-resample intervals, all and promoted cell-weeks; units per line against the "
    "product's mean (issue #61).",
)
def demand_forecast(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    raw_source: RawSourceResource,
    pipeline_config: PipelineConfigResource,
) -> dg.MaterializeResult:
    wh = warehouse.warehouse
    folder = wh.table_dir(DEMAND_TABLE)
    with warehouse.model_step(context):
        scores = run_demand_check(
            wh, pipeline_config.split, folder, seed=pipeline_config.model_seed,
            world=bound_world(raw_source.truth, wh),
        )  # fmt: skip
    best = min(scores["all"], key=lambda m: scores["all"][m]["wape"])
    return dg.MaterializeResult(
        metadata={
            "cell_weeks": scores["cell_weeks"],
            "promoted_cell_weeks": scores["promoted_cell_weeks"],
            **{f"{m}_WAPE": v["wape"] for m, v in scores["all"].items()},
            "best_WAPE": best,
            **{
                f"quantity_{m}_MAE": v["mae"]
                for m, v in scores["quantity"]["all"].items()
                if isinstance(v, dict)
            },
            **_recovery(scores, "planted_quantity"),
            "seconds": scores["seconds"],
            "forecasts": dg.MetadataValue.path(str(folder / "demand_forecast.parquet")),
        }
    )


@dg.asset(
    name=TRIP_FORECAST_TABLE,
    **FORECAST_STEP,
    kinds={"polars", "lightgbm", "parquet"},
    deps=[TRIPS_TABLE, PROMOTIONS_TABLE],
    backfill_policy=dg.BackfillPolicy.single_run(),
    description="Each test week: which known customers visit (LightGBM on their visit history, "
    "the calendar and the mailer, against their recent weekly rates) and at which store (decayed "
    "store counts against the last store); log-loss and accuracy with customer-resample "
    "intervals (issue #61).",
)
def trip_forecast(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    raw_source: RawSourceResource,
    pipeline_config: PipelineConfigResource,
) -> dg.MaterializeResult:
    wh = warehouse.warehouse
    folder = wh.table_dir(TRIP_FORECAST_TABLE)
    with warehouse.model_step(context):
        scores = run_trip_check(
            wh, pipeline_config.split, folder, seed=pipeline_config.model_seed,
            world=bound_world(raw_source.truth, wh),
        )  # fmt: skip
    visits, stores = scores["visits"], scores["stores"]
    return dg.MaterializeResult(
        metadata={
            "customer_weeks": visits["customer_weeks"],
            **{f"{m}_log_loss": visits[m]["log_loss"] for m in VISIT_METHODS},
            "trips": stores["trips"],
            **{f"{m}_store_accuracy": stores[m]["accuracy"] for m in STORE_METHODS},
            "store_half_life": stores["half_life"],
            **_recovery(scores, "planted_traffic"),
            "seconds": scores["seconds"],
        }
    )


@dg.asset(
    name=WORLD_DEMAND_TABLE,
    # Read where every test week has its refresh (D111), else the trained checkpoint: a
    # missing refresh must not hold back the forecast of a new checkpoint.
    **(JUDGES_CHECKPOINT | {"automation_condition": EAGER.ignore(REFRESHES)}),
    kinds={"pytorch", "parquet"},
    deps=[DEMAND_TABLE, TRIP_FORECAST_TABLE, CHECKPOINT_TABLE, REFRESH_TABLE],
    description="The world model's units of every demand_forecast cell-week: the trips each "
    "known customer is expected to make, split between their stores, times the model's chance "
    "that the basket holds the product (a context made before the week, the week's shelf) "
    "times the units per line, calibrated on the week before the test weeks; mean and median "
    "forecasts scored beside the baselines with paired intervals; the forecast contexts, units "
    "per line and calibration that /v1/forecast plans a test week with (issue #61).",
)
def world_model_demand(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
) -> dg.MaterializeResult:
    wh = warehouse.warehouse
    folder = wh.table_dir(WORLD_DEMAND_TABLE)
    with warehouse.model_step(context):
        scores = run_world_demand(
            wh, pipeline_config.split, folder, demand=wh.table_dir(DEMAND_TABLE),
            trips=wh.table_dir(TRIP_FORECAST_TABLE), seed=pipeline_config.model_seed,
        )  # fmt: skip
    figures = {p: scores[p] for p in ("all", "promoted") if p in scores}
    return dg.MaterializeResult(
        metadata={
            "cell_weeks": scores["cell_weeks"],
            "contexts": scores["contexts"],
            "calibration_factor": scores["calibration"]["factor"],
            **{
                f"{p}_{m}_{k}": v[m][k]
                for p, v in figures.items()
                for m in WORLD
                for k in ("wape", "rmse", "chain_wape")
            },  # fmt: skip
            **{
                f"lift_spearman_{m}": v["spearman"]
                for m, v in scores["promotion_lift"]["methods"].items()
            },  # fmt: skip
            "lift_ceiling": scores["promotion_lift"]["ceiling"]["ceiling"],
            "seconds": scores["seconds"],
            "forecasts": dg.MetadataValue.path(str(folder / "world_model_demand.parquet")),
        }
    )

"""Pricing policies on the simulator (design §7.3, §7.4 layer 4; D89): ``holdout_checkpoint``,
the held-out simulator, and ``pricing_policy``, every policy found on the world model and judged
on both."""

import dagster as dg

from retailsim_core.pipeline.pricing_run import RESULTS_FILE, run_pricing, train_holdout
from retailsim_core.tables import CHECKPOINT_TABLE, DEMAND_TABLE, HOLDOUT_TABLE, PRICING_TABLE
from retailsim_dagster.assets.model import (
    FITTED_ON_INPUTS,
    JUDGES_CHECKPOINT,
    trained_checkpoint,
)
from retailsim_dagster.resources import (
    PipelineConfigResource,
    RawSourceResource,
    WarehouseResource,
)


@dg.asset(
    **FITTED_ON_INPUTS,
    description="The held-out simulator: the world model's config and schedule trained with "
    "the next seed on a seeded half of the training customers; pricing policies never see it "
    "while they are found (D89).",
)
def holdout_checkpoint(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
) -> dg.MaterializeResult:
    wh = warehouse.warehouse
    model_cfg, train_cfg = pipeline_config.world_model
    folder = wh.table_dir(HOLDOUT_TABLE)
    with warehouse.model_step(context):
        summary = train_holdout(
            wh, pipeline_config.split, model_cfg, train_cfg, folder, context.log.info
        )
    return dg.MaterializeResult(
        metadata={
            "epochs": summary.epochs,
            "train_samples": summary.train_samples,
            "valid_NDCG@10": summary.best["valid_NDCG@10"],
            "checkpoint": dg.MetadataValue.path(str(folder / "model.safetensors")),
        }
    )


@dg.asset(
    **JUDGES_CHECKPOINT,
    kinds={"pytorch", "safetensors"},
    deps=[trained_checkpoint, holdout_checkpoint, DEMAND_TABLE],
    description="Historical, best static, myopic (Jacobian) and PPO prices for the top "
    "categories by revenue, constrained (observed range, 10% weekly cap), judged on the world "
    "model and on the held-out simulator, units per line from the demand forecast's stock-up "
    "model: results.json, price paths, PPO weights, report.md.",
)
def pricing_policy(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
    raw_source: RawSourceResource,
) -> dg.MaterializeResult:
    wh = warehouse.warehouse
    folder = wh.table_dir(PRICING_TABLE)
    with warehouse.model_step(context):
        results = run_pricing(
            wh,
            pipeline_config.split,
            wh.table_dir(CHECKPOINT_TABLE),
            wh.table_dir(HOLDOUT_TABLE),
            folder,
            pipeline_config.pricing,
            context.log.info,
            truth_dir=raw_source.truth,
        )
    return dg.MaterializeResult(
        metadata={
            "held_out_simulator": results["held_out_simulator"],
            "categories": len(results["categories"]),
            "seconds": results["seconds"],
            "report": dg.MetadataValue.md((folder / "report.md").read_text()),
            "results": dg.MetadataValue.path(str(folder / RESULTS_FILE)),
        }
    )


@dg.asset_check(
    asset=pricing_policy, description="no policy's price path breaks the range or the weekly cap"
)
def pricing_constraints_hold(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    from retailsim_core.training.checkpoints.checkpoint import read_json

    results = read_json(warehouse.warehouse.table_dir(PRICING_TABLE) / RESULTS_FILE)
    hits = sum(
        entry["training"]["violations"]
        for category in results["categories"].values()
        for name, entry in category["policies"].items()
        if "violations" in entry.get("training", {})
    )
    return dg.AssetCheckResult(passed=hits == 0, metadata={"violations": hits})

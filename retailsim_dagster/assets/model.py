"""The world model (design §5–6): ``trained_checkpoint``, the baselines it is judged against
(``tuned_baselines``), ``evaluation_report`` and ``onnx_scoring_graph``."""

import dagster as dg
import polars as pl

from retailsim_core.pipeline.baseline_fitting import fit_baselines
from retailsim_core.pipeline.evaluation_run import evaluate
from retailsim_core.pipeline.scoring_graph import export_checkpoint_graph
from retailsim_core.pipeline.world_model_training import train_world_model
from retailsim_core.report.html import markdown_summary
from retailsim_core.report.svg_charts import loss_curve_svg
from retailsim_core.serving.onnx_scoring import PARITY_TOLERANCE
from retailsim_core.storage.io import atomic_write_text
from retailsim_core.tables import (
    AFFINITY_TABLE,
    BASELINES_TABLE,
    CHECKPOINT_TABLE,
    EMBEDDINGS_TABLE,
    MISSIONS_TABLE,
    ONNX_TABLE,
    PRICES_TABLE,
    PROMOTIONS_TABLE,
    REFRESH_TABLE,
    REPORT_TABLE,
    SAMPLES_TABLE,
    STORE_FEATURES_TABLE,
    TRIPS_TABLE,
)
from retailsim_core.training.checkpoints.checkpoint import read_json
from retailsim_dagster.metadata import markdown_table
from retailsim_dagster.partitions import CPU_HEAVY, CPU_POOL
from retailsim_dagster.resources import PipelineConfigResource, RawSourceResource, WarehouseResource

INPUTS = [
    SAMPLES_TABLE,
    TRIPS_TABLE,
    PRICES_TABLE,  # the shelf and its price features, materialised on read (D96)
    STORE_FEATURES_TABLE,
    AFFINITY_TABLE,
    MISSIONS_TABLE,
    EMBEDDINGS_TABLE,
    PROMOTIONS_TABLE,  # the shelf's display and mailer flags (D87)
]


# Retraining policy (docs/operations.md): retrain after each Monday's weekly refresh has updated
# the inputs; re-evaluate whenever a new checkpoint lands. Evaluated by model_retraining_sensor.
RETRAIN_CRON = "0 6 * * 1"


# What trained_checkpoint and tuned_baselines share: fitted on the model inputs, refitted weekly.
FITTED_ON_INPUTS = dict(
    group_name="model",
    kinds={"pytorch", "safetensors"},
    pool=CPU_POOL,
    op_tags=CPU_HEAVY,
    deps=INPUTS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    automation_condition=dg.AutomationCondition.on_cron(
        RETRAIN_CRON, cron_timezone="Europe/London"
    ),
)


@dg.asset(
    **FITTED_ON_INPUTS,
    description="Mamba + Transformer world model trained on the training weeks, early-stopped on "
    "the "
    "validation weeks (design §5.6); safetensors weights + JSON config, metrics and history.",
)
def trained_checkpoint(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
) -> dg.MaterializeResult:
    wh = warehouse.warehouse
    model_cfg, train_cfg = pipeline_config.world_model
    with warehouse.model_step(context):
        summary = train_world_model(
            wh, pipeline_config.split, model_cfg, train_cfg, log=context.log.info
        )
    history = pl.DataFrame(summary.history).select(pl.exclude("note"))
    folder = wh.table_dir(CHECKPOINT_TABLE)
    atomic_write_text(loss_curve_svg(history["train_total"].to_list()), folder / "loss_curve.svg")
    best = summary.best
    return dg.MaterializeResult(
        metadata={
            "preset": pipeline_config.model_preset,
            "parameters": summary.parameters,
            "epochs": summary.epochs,
            "best_epoch": summary.best_epoch,
            "training_seconds": summary.training_seconds,
            "train_samples": summary.train_samples,
            "valid_NDCG@10": best["valid_NDCG@10"],
            "valid_Hit@10": best["valid_Hit@10"],
            "valid_popularity_Hit@10": best["valid_popularity_Hit@10"],
            "history": dg.MetadataValue.md(markdown_table(history)),
            "loss_curve": dg.MetadataValue.path(str(folder / "loss_curve.svg")),
            "checkpoint": dg.MetadataValue.path(str(folder / "model.safetensors")),
        }
    )


@dg.asset_check(
    asset=trained_checkpoint,
    description="validation masked-item Hit@10 beats popularity on the same positions",
)
def checkpoint_beats_popularity(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    best = read_json(warehouse.warehouse.table_dir(CHECKPOINT_TABLE) / "config.json")["summary"][
        "best"
    ]
    model, pop = best["valid_Hit@10"], best["valid_popularity_Hit@10"]
    return dg.AssetCheckResult(
        passed=model > pop,
        metadata={"model_Hit@10": model, "popularity_Hit@10": pop, "ratio": model / max(pop, 1e-9)},
    )


@dg.asset(
    name=BASELINES_TABLE,
    # Before trained_checkpoint when both wait on the pool: the one-core ONNX export that follows
    # the checkpoint then overlaps the evaluation, not the baselines' time-budgeted training.
    **(FITTED_ON_INPUTS | {"op_tags": CPU_HEAVY | {"dagster/priority": "1"}}),
    description="The baselines tuned on the validation weeks, independent of the world model: "
    "TIFU-KNN and UP-CF@r grids, SASRec and BERT4Rec trained with early stopping, the "
    "masked-item co-purchase weight; safetensors + JSON (D68).",
)
def tuned_baselines(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
) -> dg.MaterializeResult:
    with warehouse.model_step(context):
        record = fit_baselines(
            warehouse.warehouse, pipeline_config.split, pipeline_config.evaluation, context.log.info
        )
    info = record.info
    return dg.MaterializeResult(
        metadata={
            "fit_key": record.fit_key,
            "validation_samples": record.validation_samples,
            **{f"{m}_valid_R@20": info[m]["valid_R@20"] for m in ("TIFU-KNN", "UP-CF@r")},
            **{f"{m}_epochs": info[m]["epochs"] for m in ("SASRec", "BERT4Rec")},
            **{f"{m}_stopped_by": info[m]["stopped_by"] for m in ("SASRec", "BERT4Rec")},
            "seconds": record.seconds,
            "choices": dg.MetadataValue.json(record.to_dict()),
        }
    )


EAGER = dg.AutomationCondition.eager()
REFRESHES = dg.AssetSelection.assets(REFRESH_TABLE)

# What the assets that judge a checkpoint share: rerun whenever a new one lands.
JUDGES_CHECKPOINT = dict(
    group_name="model",
    pool=CPU_POOL,
    op_tags=CPU_HEAVY,
    backfill_policy=dg.BackfillPolicy.single_run(),
    automation_condition=EAGER,
)


@dg.asset(
    # The refreshes are read where every test week has one (D111); a missing week of them
    # must not hold back the report of a new checkpoint.
    **(JUDGES_CHECKPOINT | {"automation_condition": EAGER.ignore(REFRESHES)}),
    kinds={"pytorch", "html"},
    deps=[trained_checkpoint, tuned_baselines, REFRESH_TABLE],
    description="The honest world model (no label of the predicted basket) vs popularity, "
    "personal, "
    "store-aware and mission top-frequency, TIFU-KNN, UP-CF@r, SASRec, BERT4Rec and, on "
    "synthetic data, the generator's oracles, on the test weeks (design §4.7.4): metrics.json "
    "with 95% customer-bootstrap intervals, Parquet, HTML report.",
)
def evaluation_report(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
    raw_source: RawSourceResource,
) -> dg.MaterializeResult:
    wh = warehouse.warehouse
    truth = raw_source.truth
    with warehouse.model_step(context):
        result = evaluate(
            wh, pipeline_config.split, truth, pipeline_config.evaluation, log=context.log.info
        )
    folder = wh.table_dir(REPORT_TABLE)
    nb = result.metrics["next_basket"]["all"]
    return dg.MaterializeResult(
        metadata={
            "summary": dg.MetadataValue.md(
                markdown_summary(result.metrics, result.tuning.get("source"))
            ),
            "report": dg.MetadataValue.path(str(folder / "report.html")),
            "metrics_json": dg.MetadataValue.path(str(folder / "metrics.json")),
            "world_model_R@20": nb["world_model"]["R@20"],
            "P-TopFreq_R@20": nb["P-TopFreq"]["R@20"],
            "TIFU-KNN_R@20": nb["TIFU-KNN"]["R@20"],
            "world_model_NDCG@10": nb["world_model"]["NDCG@10"],
            "simulated_size_ratio": result.tuning["simulation"]["mean_size_ratio"],
            "test_samples": result.tuning["test_samples"],
            "oracle_available": "oracle" in nb,
            "seconds": result.tuning["seconds"],
        }
    )


@dg.asset(
    group_name="model",
    kinds={"onnx"},  # not in the CPU pool: tracing and export run on one core
    deps=[trained_checkpoint],
    backfill_policy=dg.BackfillPolicy.single_run(),
    automation_condition=dg.AutomationCondition.eager(),
    description="The checkpoint's next-basket scoring graph (encoder, decoder, heads) in ONNX "
    "for onnxruntime serving (RETAILSIM_SERVE_ONNX=1), with the checkpoint id it belongs to "
    "and its largest difference from PyTorch on a real serving batch.",
)
def onnx_scoring_graph(warehouse: WarehouseResource) -> dg.MaterializeResult:
    manifest = export_checkpoint_graph(warehouse.warehouse)
    return dg.MaterializeResult(
        metadata={
            "checkpoint_id": manifest["exported_from"],
            "graph_id": manifest["checkpoint_id"],
            "max_abs_difference": manifest["max_abs_difference"],
            "example_contexts": manifest["example_contexts"],
            "bytes": manifest["bytes"]["scoring.onnx"],
        }
    )


@dg.asset_check(
    asset=onnx_scoring_graph,
    description="the exported graph scores a real serving batch within 1e-4 of PyTorch",
)
def onnx_matches_pytorch(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    folder = warehouse.warehouse.table_dir(ONNX_TABLE)
    difference = read_json(folder / "manifest.json")["max_abs_difference"]
    return dg.AssetCheckResult(
        passed=difference <= PARITY_TOLERANCE,
        metadata={"max_abs_difference": difference, "tolerance": PARITY_TOLERANCE},
    )


model_retraining_sensor = dg.AutomationConditionSensorDefinition(
    "model_retraining_sensor",
    target=dg.AssetSelection.groups("model"),
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Evaluates the retraining policy of trained_checkpoint and tuned_baselines "
    "(weekly, after the refresh) and evaluation_report (after every new checkpoint or tuning). "
    "Turn on under Automation.",
)

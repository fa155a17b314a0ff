"""Materialize the pipeline domain in process over a range of weeks, with its checks."""

from pathlib import Path

import dagster as dg
import polars as pl

from retailsim_core.graph.graph_frames import to_dgl, to_networkx
from retailsim_core.pipeline.data.graph_tables import load_graph
from retailsim_core.storage.warehouse import Warehouse
from retailsim_dagster.assets import (
    customer_snapshots,
    derived_prices,
    features,
    model,
    pricing,
    product_graph,
    raw_transactions,
    training_data,
)
from retailsim_dagster.resources import PipelineConfigResource, RawSourceResource, WarehouseResource

RANGE = {
    "dagster/asset_partition_range_start": "2006-04-10",
    "dagster/asset_partition_range_end": "2006-07-10",
}


def test_materialize_pipeline_range_with_checks(tiny_dataset, tmp_path):
    resources = {
        "raw_source": RawSourceResource(
            raw_dir=str(tiny_dataset["raw"]), truth_dir=str(tiny_dataset["truth"])
        ),
        "warehouse": WarehouseResource(root=str(tmp_path / "wh")),
        "pipeline_config": PipelineConfigResource(
            train_end=10,
            valid_end=12,
            min_count=2,
            min_jaccard=0.3,
            model_preset="tiny",
            eval_test_samples=200,
            pricing_categories=1,
            pricing_contexts=4,
            pricing_timesteps=64,
        ),
    }
    weekly = dg.materialize(
        [
            raw_transactions.raw_transactions,
            derived_prices.derived_prices,
            customer_snapshots.customer_snapshots,
            derived_prices.derived_prices_business_rules,
            customer_snapshots.affinity_ranges,
            customer_snapshots.mission_distributions,
        ],
        resources=resources,
        tags=RANGE,
    )
    assert weekly.success
    evaluations = {e.check_name: e for e in weekly.get_asset_check_evaluations()}
    assert evaluations["rule_price_nonpositive"].passed
    assert "threshold_share" in evaluations["rule_depth_over_max"].metadata
    assert evaluations["affinity_ranges"].passed and evaluations["mission_distributions"].passed
    graph_run = dg.materialize(
        [
            product_graph.product_graph,
            product_graph.product_graph_integrity,
            product_graph.substitution_holdout,
            features.pseudo_brands,
            features.pseudo_brand_tiers,
            features.graphsage_embeddings,
        ],
        resources=resources,
    )
    graph_checks = {e.check_name: e for e in graph_run.get_asset_check_evaluations()}
    holdout = graph_checks.pop("substitution_holdout")  # a WARN check: reported, never blocking
    assert graph_run.success and all(e.passed for e in graph_checks.values())
    assert holdout.metadata["held_out_weeks"].value == [11, 14]
    assert "planted_recall" in holdout.metadata  # the truth matches the ingested files
    emb = graph_run.asset_materializations_for_node("graphsage_embeddings")[0].metadata
    assert emb["dimensions"].value == 256 and "loss_curve" in emb and "nearest_neighbours" in emb
    feature_run = dg.materialize(
        [
            features.store_features,
            features.store_feature_ranges,
            training_data.training_data,
        ],
        resources=resources,
        tags=RANGE,
    )
    assert feature_run.success and all(e.passed for e in feature_run.get_asset_check_evaluations())
    samples = feature_run.asset_materializations_for_node("training_data")
    assert {m.asset_key.to_user_string() for m in samples} == {
        "temporal_metadata",
        "customer_trips",
        "bucketed_samples",
    }
    model_run = dg.materialize(
        [
            model.trained_checkpoint,
            model.checkpoint_beats_popularity,
            model.tuned_baselines,
            model.evaluation_report,
            model.onnx_scoring_graph,
            model.onnx_matches_pytorch,
        ],
        resources=resources,
    )
    assert model_run.success
    onnx_check = {e.check_name: e for e in model_run.get_asset_check_evaluations()}
    assert onnx_check["onnx_matches_pytorch"].passed
    graph = model_run.asset_materializations_for_node("onnx_scoring_graph")[0].metadata
    assert graph["max_abs_difference"].value <= 1e-4 and graph["bytes"].value > 0
    ckpt = model_run.asset_materializations_for_node("trained_checkpoint")[0].metadata
    assert ckpt["parameters"].value > 0 and "history" in ckpt and "loss_curve" in ckpt
    tuned = model_run.asset_materializations_for_node("tuned_baselines")[0].metadata
    assert tuned["SASRec_epochs"].value >= 1 and len(tuned["fit_key"].value) == 16
    report = model_run.asset_materializations_for_node("evaluation_report")[0].metadata
    assert "| world_model |" in report["summary"].value and report["oracle_available"].value
    assert Path(report["report"].value).exists()
    pricing_run = dg.materialize(
        [pricing.holdout_checkpoint, pricing.pricing_policy, pricing.pricing_constraints_hold],
        resources=resources,
    )
    assert pricing_run.success
    assert all(e.passed for e in pricing_run.get_asset_check_evaluations())
    priced = pricing_run.asset_materializations_for_node("pricing_policy")[0].metadata
    assert priced["held_out_simulator"].value and priced["categories"].value == 1
    assert "Pricing policies" in priced["report"].value
    assert "planted truth" in priced["report"].value  # the tiny world's truth is bound
    mats = graph_run.asset_materializations_for_node("product_graph")
    assert mats[0].metadata["edges_hierarchy"].value > 0
    wh = Warehouse(tmp_path / "wh")
    assert wh.weeks("derived_prices") == list(range(1, 15))
    assert wh.scan("customer_store_affinity", [13]).collect().height > 0


def test_graph_loaders(default_pipeline_graph):
    graph = default_pipeline_graph
    nx_graph = to_networkx(graph)
    product = graph.nodes.filter(pl.col("node_type") == "product")["node_id"][0]
    assert (
        nx_graph.nodes[product]["node_type"] == "product"
        and nx_graph.nodes[product]["hierarchy_level"] == 0
    )
    undirected = graph.edges.filter(~pl.col("directed")).height
    assert nx_graph.number_of_edges() == graph.edges.height + undirected
    g = to_dgl(graph)
    assert g.num_nodes() == graph.nodes.height
    assert (
        g.num_edges("copurchase")
        == 2 * graph.edges.filter(pl.col("edge_type") == "copurchase").height
    )
    assert g.num_edges("hierarchy") == g.num_edges("hierarchy_rev")
    assert g.edges["hierarchy"].data["weight"].max().item() == 1.0


import pytest  # noqa: E402

pytestmark = pytest.mark.slow  # materializes the pipeline


@pytest.fixture()
def default_pipeline_graph(tiny_dataset, tmp_path):
    """A small real graph: the tiny dataset's first 14 weeks through ingest, prices and graph."""
    from retailsim_core.graph.graph_edges import GraphConfig
    from retailsim_core.pipeline.data.graph_tables import build_product_graph, write_graph
    from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
    from retailsim_core.pipeline.data.price_weeks import derive_price_weeks
    from retailsim_core.split import TemporalSplit

    wh = Warehouse(tmp_path / "g")
    ingest_weeks(tiny_dataset["raw"], wh, range(1, 15))
    derive_price_weeks(wh, range(1, 15))
    write_graph(
        wh,
        build_product_graph(wh, TemporalSplit(10, 12), GraphConfig(min_count=2, min_jaccard=0.3)),
    )
    return load_graph(wh)

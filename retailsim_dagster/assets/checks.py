"""Asset checks over the pipeline tables; each reports what it measured and its threshold."""

import dagster as dg
import polars as pl

from retailsim_core.pipeline.customers import AFFINITY_TABLE, MISSIONS_TABLE
from retailsim_core.pipeline.graph import GRAPH_TABLE, load_graph
from retailsim_core.pipeline.graph import substitution_holdout as substitution_holdout_test
from retailsim_core.pipeline.prices import PRICES_TABLE, price_rule_report
from retailsim_core.pipeline.truth import bind_truth
from retailsim_core.prices import VALIDATION_FLAGS
from retailsim_core.substitution import planted_recovery
from retailsim_dagster.resources import PipelineConfigResource, RawSourceResource, WarehouseResource

_SEVERITY = {"price_nonpositive": dg.AssetCheckSeverity.ERROR}


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            f"rule_{rule}", asset=PRICES_TABLE, description=f"share of cells flagged {rule}"
        )
        for rule in VALIDATION_FLAGS
    ],
)
def derived_prices_business_rules(warehouse: WarehouseResource):
    for result in price_rule_report(warehouse.warehouse):
        yield dg.AssetCheckResult(
            check_name=f"rule_{result.rule}",
            asset_key=PRICES_TABLE,
            passed=result.passed,
            severity=_SEVERITY.get(result.rule, dg.AssetCheckSeverity.WARN),
            metadata={
                "observed_share": result.observed,
                "threshold_share": result.threshold,
                "cells_checked": result.cells,
            },
        )


@dg.asset_check(
    asset=GRAPH_TABLE,
    description="edges join nodes; substitutes share a sub-commodity; "
    "co-purchase edges meet the lift threshold",
)
def product_graph_integrity(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    graph = load_graph(warehouse.warehouse)
    nodes = graph.nodes.select(
        "node_id", pl.col("category_path").str.split("/").list.last().alias("cl")
    )
    dangling = (
        graph.edges.join(nodes, left_on="src", right_on="node_id", how="anti").height
        + graph.edges.join(nodes, left_on="dst", right_on="node_id", how="anti").height
    )
    subs = (
        graph.edges.filter(pl.col("edge_type") == "substitution")
        .join(nodes, left_on="src", right_on="node_id")
        .join(nodes, left_on="dst", right_on="node_id", suffix="_b")
    )
    cross_category = int((subs["cl"] != subs["cl_b"]).sum())
    weak = int(
        graph.edges.filter((pl.col("edge_type") == "copurchase") & (pl.col("lift") <= 1.5)).height
    )
    return dg.AssetCheckResult(
        passed=dangling == 0 and cross_category == 0 and weak == 0,
        metadata={
            "dangling_edges": dangling,
            "cross_category_substitutes": cross_category,
            "copurchase_edges_below_lift": weak,
        },
    )


@dg.asset_check(
    asset=GRAPH_TABLE,
    description="held-out promotion test of the substitution edges: in weeks after training, "
    "B's units fall when its substitute A is on promotion, more than for random "
    "same-sub-commodity pairs (95% interval); planted-pair recovery when the "
    "generator's truth matches the ingested files",
)
def substitution_holdout(
    warehouse: WarehouseResource,
    pipeline_config: PipelineConfigResource,
    raw_source: RawSourceResource,
) -> dg.AssetCheckResult:
    wh = warehouse.warehouse
    graph = load_graph(wh)
    result = substitution_holdout_test(
        wh, pipeline_config.split, graph, seed=pipeline_config.model_seed
    )
    binding = bind_truth(raw_source.truth, wh)
    if binding.truth_dir is not None:
        planted = pl.read_parquet(binding.truth_dir / "substitute_pairs.parquet")
        result |= planted_recovery(graph.edges, planted)
    elif binding.note:
        result["planted_note"] = binding.note
    return dg.AssetCheckResult(
        passed=bool(result.get("confirmed")), severity=dg.AssetCheckSeverity.WARN, metadata=result
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

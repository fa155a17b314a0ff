"""``product_graph``: build node and edge tables from the training weeks; load them as graphs."""

from __future__ import annotations

import time
from collections.abc import Callable

import polars as pl

from retailsim_core.graph.graph_edges import (
    EDGES_SCHEMA,
    HIERARCHY_LEVELS,
    NODES_SCHEMA,
    GraphConfig,
    copurchase_edges,
    copurchase_stats,
    hierarchy_edges,
    incidence,
    node_table,
    substitution_edges,
)
from retailsim_core.graph.graph_frames import ProductGraph
from retailsim_core.graph.substitution import holdout_pairs, promotion_holdout, switching_edges
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.data.price_weeks import DERIVED_PRICES_SCHEMA, promotion_cells
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import GRAPH_EDGES_TABLE, GRAPH_NODES_TABLE, PRICES_TABLE, RAW_TABLE


def build_product_graph(
    warehouse: Warehouse,
    split: TemporalSplit,
    cfg: GraphConfig = GraphConfig(),
    log: Callable[[str], None] = lambda _: None,
) -> ProductGraph:
    start = time.perf_counter()
    weeks = split.train_weeks
    raw = warehouse.scan(RAW_TABLE, weeks, schema=RAW_TRANSACTIONS_SCHEMA)
    hierarchy = (
        raw.select(HIERARCHY_LEVELS)
        .unique(subset="product_id", keep="first")
        .sort("product_id")
        .collect()
    )
    prices = (
        warehouse.scan(PRICES_TABLE, weeks, schema=DERIVED_PRICES_SCHEMA)
        .filter(pl.col("imputation_method") == "observed")
        .group_by("product_id")
        .agg(pl.col("actual_price").mean().alias("mean_price"))
    )
    products = (
        hierarchy.lazy()
        .select("product_id", "prod_code_10")
        .join(prices, on="product_id", how="left")
        .sort("product_id")
        .collect()
    )
    index = products.select("product_id", pl.int_range(pl.len(), dtype=pl.Int32).alias("p"))
    lines = (
        raw.select("basket_id", "customer_id", "product_id")
        .join(index.lazy(), on="product_id")
        .with_columns(b=pl.col("basket_id").rank("dense").cast(pl.Int64) - 1)
        .collect()
    )
    n_p = products.height
    log(
        f"product_graph: {lines.height:,} training lines, {n_p:,} products "
        f"({time.perf_counter() - start:.1f}s)"
    )
    baskets = incidence(lines["b"], lines["p"], int(lines["b"].max() or -1) + 1, n_p)
    counts, support, n_baskets = copurchase_stats(baskets)
    cop = copurchase_edges(products["product_id"], counts, support, n_baskets, cfg)
    log(
        f"product_graph: co-purchase from {n_baskets:,} baskets -> {cop.height:,} edges "
        f"({time.perf_counter() - start:.1f}s)"
    )
    carded = (
        lines.lazy()
        .filter(pl.col("customer_id").is_not_null())
        .with_columns(c=pl.col("customer_id").rank("dense").cast(pl.Int64) - 1)
        .select("b", "c", "p")
        .collect()
    )
    if cfg.substitution_rule == "spec":
        customers = incidence(
            carded["c"], carded["p"], int(carded["c"].max() or -1) + 1, n_p
        ).tocsc()
        sub = substitution_edges(products, customers, counts, support, n_baskets, cfg)
    else:
        sub = switching_edges(products, carded, cfg.substitution_fdr)
    log(f"product_graph: substitution -> {sub.height:,} edges ({time.perf_counter() - start:.1f}s)")
    edges = pl.concat([cop, sub, hierarchy_edges(hierarchy)])
    nodes = node_table(products, hierarchy, support, cfg)
    return ProductGraph(nodes=nodes, edges=edges)


def substitution_holdout(
    warehouse: Warehouse, split: TemporalSplit, graph: ProductGraph, seed: int = 0
) -> dict:
    """The held-out promotion test of the graph's substitution edges over the weeks after
    training (never used to build it), from ``derived_prices`` (promotions and units)."""
    weeks = [w for w in warehouse.weeks(PRICES_TABLE) if w > split.train_end]
    if not weeks:
        return {
            "substitution_edges": int((graph.edges["edge_type"] == "substitution").sum()),
            "note": "no held-out week of derived_prices is materialized",
        }
    products = graph.nodes.filter(pl.col("node_type") == "product").select(
        pl.col("node_id").alias("product_id"),
        pl.col("category_path").str.split("/").list.last().alias("prod_code_10"),
    )
    # Only the compared pairs' products are read: the same pairs, a small share of the cells.
    paired = pl.concat(holdout_pairs(graph.edges, products, seed=seed))
    cells = promotion_cells(warehouse, weeks, products=pl.concat([paired["a"], paired["b"]]))
    return {
        "held_out_weeks": [weeks[0], weeks[-1]],
        **promotion_holdout(cells, graph.edges, products, seed=seed),
    }


def write_graph(warehouse: Warehouse, graph: ProductGraph) -> None:
    warehouse.write_table(GRAPH_NODES_TABLE, graph.nodes)
    warehouse.write_table(GRAPH_EDGES_TABLE, graph.edges)


def load_graph(warehouse: Warehouse) -> ProductGraph:
    return ProductGraph(
        nodes=warehouse.read_table(GRAPH_NODES_TABLE).cast(dict(NODES_SCHEMA)),
        edges=warehouse.read_table(GRAPH_EDGES_TABLE).cast(dict(EDGES_SCHEMA)),
    )

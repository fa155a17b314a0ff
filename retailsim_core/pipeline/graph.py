"""``product_graph``: build node and edge tables from the training weeks; load them as graphs."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from retailsim_core.graph import (
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
from retailsim_core.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.ingest import RAW_TABLE
from retailsim_core.pipeline.prices import DERIVED_PRICES_SCHEMA, PRICES_TABLE, promotion_cells
from retailsim_core.split import TemporalSplit
from retailsim_core.substitution import promotion_holdout, switching_edges
from retailsim_core.warehouse import Warehouse

GRAPH_TABLE = "product_graph"  # the asset; its two tables below
GRAPH_NODES_TABLE = f"{GRAPH_TABLE}/nodes"
GRAPH_EDGES_TABLE = f"{GRAPH_TABLE}/edges"


@dataclass(frozen=True)
class ProductGraph:
    nodes: pl.DataFrame  # NODES_SCHEMA
    edges: pl.DataFrame  # EDGES_SCHEMA

    def summary(self) -> dict:
        n = self.nodes.height
        by_type = dict(self.edges.group_by("edge_type").len().iter_rows())
        degree = pl.concat([self.edges["src"], self.edges["dst"]]).value_counts()["count"]
        return {
            "nodes": n,
            "product_nodes": int((self.nodes["node_type"] == "product").sum()),
            "edges": self.edges.height,
            **{f"edges_{k}": int(v) for k, v in sorted(by_type.items())},
            "density": self.edges.height / max(n * (n - 1) / 2, 1),
            "degree_mean": float(degree.mean() or 0),
            "degree_max": int(degree.max() or 0),
            "degree_median": float(degree.median() or 0),
        }

    def degree_histogram(self) -> pl.DataFrame:
        """Number of nodes by degree bucket (all edge types)."""
        degree = pl.concat([self.edges["src"], self.edges["dst"]]).value_counts(name="degree")
        bucket = (
            pl.when(pl.col("degree") <= 1)
            .then(pl.lit("1"))
            .when(pl.col("degree") <= 5)
            .then(pl.lit("2-5"))
            .when(pl.col("degree") <= 20)
            .then(pl.lit("6-20"))
            .when(pl.col("degree") <= 100)
            .then(pl.lit("21-100"))
            .otherwise(pl.lit(">100"))
        )
        order = {"1": 0, "2-5": 1, "6-20": 2, "21-100": 3, ">100": 4}
        return (
            degree.group_by(bucket.alias("degree"))
            .len("nodes")
            .sort(pl.col("degree").replace_strict(order, return_dtype=pl.Int8))
        )


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
    cells = promotion_cells(warehouse, weeks)
    products = graph.nodes.filter(pl.col("node_type") == "product").select(
        pl.col("node_id").alias("product_id"),
        pl.col("category_path").str.split("/").list.last().alias("prod_code_10"),
    )
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


def to_networkx(graph: ProductGraph):
    """A ``networkx.MultiDiGraph`` with the spec's node and edge attributes. Undirected edge types
    (co-purchase, substitution) appear in both directions; hierarchy edges point child → parent."""
    import networkx as nx

    g = nx.MultiDiGraph()
    g.add_nodes_from((row["node_id"], row) for row in graph.nodes.iter_rows(named=True))
    edges = graph.edges
    for direction in (
        edges,
        edges.filter(~pl.col("directed")).rename({"src": "dst", "dst": "src"}),
    ):
        g.add_edges_from(
            (r["src"], r["dst"], r["edge_type"], r) for r in direction.iter_rows(named=True)
        )
    return g


def to_dgl(graph: ProductGraph):
    """A DGL heterograph over one node type (products then categories, in ``graph.nodes`` order)
    with relations ``copurchase`` and ``substitution`` (both directions), ``hierarchy`` (child →
    parent) and ``hierarchy_rev``; edge weights in ``edata['weight']``."""
    import os

    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl
    import torch

    index = graph.nodes.select("node_id", pl.int_range(pl.len(), dtype=pl.Int64).alias("i"))
    indexed = graph.edges.join(
        index.rename({"node_id": "src", "i": "s"}), on="src", how="left", maintain_order="left"
    ).join(index.rename({"node_id": "dst", "i": "d"}), on="dst", how="left", maintain_order="left")
    data, weights = {}, {}
    for etype in ("copurchase", "substitution", "hierarchy"):
        e = indexed.filter(pl.col("edge_type") == etype)
        src, dst = e["s"].to_numpy(), e["d"].to_numpy()
        w = e["weight"].to_numpy().astype(np.float32)
        if etype == "hierarchy":
            pairs = {"hierarchy": (src, dst, w), "hierarchy_rev": (dst, src, w)}
        else:
            pairs = {
                etype: (
                    np.concatenate([src, dst]),
                    np.concatenate([dst, src]),
                    np.concatenate([w, w]),
                )
            }
        for name, (s, d, ww) in pairs.items():
            data[("node", name, "node")] = (
                torch.tensor(s, dtype=torch.int64),
                torch.tensor(d, dtype=torch.int64),
            )
            weights[name] = torch.tensor(ww)
    g = dgl.heterograph(data, num_nodes_dict={"node": graph.nodes.height})
    for name, w in weights.items():
        g.edges[name].data["weight"] = w
    return g

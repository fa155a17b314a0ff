"""The product graph as two frames (nodes, edges) and its views as networkx and DGL graphs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl


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

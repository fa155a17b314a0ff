"""GraphSAGE product embeddings from the product graph (design §3.4): the model's inputs in the
graph's node order, training, one row per product of the catalogue, nearest neighbours.

Products the graph does not hold (first sold after the training weeks) get the mean embedding of
their sub-commodity's graph products (design §4.7.5 case 3), else the mean of all products.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from retailsim_core.features.brands import TIERS
from retailsim_core.graph.graph_frames import ProductGraph
from retailsim_core.models.gnn.graphsage import (
    RELATIONS,
    GraphSAGEConfig,
    NodeIds,
    model_graph,
    train,
)

ID_MAP_SCHEMA = pl.Schema(
    {"row": pl.Int32, "product_id": pl.String, "prod_code_10": pl.String, "source": pl.String}
)


@dataclass(frozen=True)
class Embeddings:
    vectors: torch.Tensor  # (num_products, H)
    id_map: pl.DataFrame  # ID_MAP_SCHEMA, row i describes vectors[i]
    losses: list[float]
    seconds: float


def graph_inputs(graph: ProductGraph, brands: pl.DataFrame):
    """Layer-0 ids, per-relation edge tensors and vocabulary sizes, in ``graph.nodes`` order."""
    nodes = graph.nodes.with_row_index("i").with_columns(
        code=pl.when(pl.col("node_type") == "product")
        .then(pl.col("category_path").str.split("/").list.last())
        .otherwise(pl.col("node_id"))
    )
    nodes = nodes.join(
        brands.select("product_id", "pseudo_brand_id", "price_tier"),
        left_on="node_id",
        right_on="product_id",
        how="left",
    ).sort("i")
    is_product = nodes["node_type"] == "product"
    vocab = nodes["code"].unique().sort()
    tier_index = {t: i for i, t in enumerate(TIERS)}
    ids = NodeIds(
        sku=torch.tensor(
            np.where(is_product, np.cumsum(is_product.to_numpy()), 0), dtype=torch.long
        ),
        brand=torch.tensor(
            (nodes["pseudo_brand_id"].fill_null(-1) + 1).to_numpy(), dtype=torch.long
        ),
        category=torch.tensor(
            nodes["code"].replace_strict(vocab, range(len(vocab)), return_dtype=pl.Int64).to_numpy()
        ),
        tier=torch.tensor(
            np.where(
                is_product,
                nodes["price_tier"]
                .fill_null("mid")
                .replace_strict(tier_index, return_dtype=pl.Int64)
                .to_numpy(),
                3,
            ),
            dtype=torch.long,
        ),
    )
    index = nodes.select("node_id", "i")
    edges = {}
    for rel in RELATIONS:
        e = (
            graph.edges.filter(pl.col("edge_type") == rel)
            .join(index.rename({"node_id": "src", "i": "s"}), on="src")
            .join(index.rename({"node_id": "dst", "i": "d"}), on="dst")
            .sort("s", "d")
        )
        w = e["weight"].to_numpy().astype(np.float32)
        w = (
            w / w.mean() if len(w) else w
        )  # lift (co-purchase) spans 1.5..50: keep relative strength only
        edges[rel] = (
            torch.tensor(e["s"].to_numpy(), dtype=torch.long),
            torch.tensor(e["d"].to_numpy(), dtype=torch.long),
            torch.tensor(w),
        )
    sizes = (int(is_product.sum()), int(brands["pseudo_brand_id"].max() or 0) + 1, len(vocab))
    return nodes, ids, edges, sizes


def train_embeddings(
    graph: ProductGraph,
    brands: pl.DataFrame,
    all_products: pl.DataFrame,
    cfg: GraphSAGEConfig = GraphSAGEConfig(),
    log: Callable[[str], None] = lambda _: None,
) -> Embeddings:
    """``all_products``: product_id, prod_code_10 of every product sold in any week."""
    start = time.perf_counter()
    nodes, ids, edges, sizes = graph_inputs(graph, brands)
    g = model_graph(edges, nodes.height)

    def report(epoch, loss):
        return (
            log(f"graphsage epoch {epoch + 1}/{cfg.epochs}: loss {loss:.4f}")
            if (epoch + 1) % 10 == 0 or epoch == 0
            else None
        )

    model, losses = train(g, ids, edges, sizes, cfg, progress=report)
    model.train(False)  # inference mode
    with torch.no_grad():
        z = model(g, ids)
    products = nodes.filter(pl.col("node_type") == "product").select(
        "i", "node_id", pl.col("code").alias("prod_code_10")
    )
    graph_vectors = z[torch.tensor(products["i"].to_numpy(), dtype=torch.long)]
    return Embeddings(
        *_with_novel_products(products, graph_vectors, all_products),
        losses,
        time.perf_counter() - start,
    )


def _with_novel_products(products: pl.DataFrame, vectors: torch.Tensor, all_products: pl.DataFrame):
    """Rows for every product: its own vector, else its sub-commodity's mean, else the global mean
    (one gather from the stacked table [graph vectors; sub-commodity means; global mean])."""
    n = vectors.shape[0]
    known = products.select(pl.col("node_id").alias("product_id"), "prod_code_10").with_row_index(
        "k"
    )
    cls = known["prod_code_10"].unique().sort()
    cl_of_known = torch.tensor(
        known["prod_code_10"].replace_strict(cls, range(len(cls)), return_dtype=pl.Int64).to_numpy()
    )
    sums = torch.zeros(len(cls), vectors.shape[1]).index_add_(0, cl_of_known, vectors)
    counts = torch.bincount(cl_of_known, minlength=len(cls)).clamp(min=1).unsqueeze(1)
    table = torch.cat([vectors, sums / counts, vectors.mean(0, keepdim=True)])  # (n + C + 1, H)
    rows = (
        all_products.sort("product_id")
        .join(known.select("product_id", "k"), on="product_id", how="left")
        .with_columns(
            c=pl.col("prod_code_10").replace_strict(
                cls, range(len(cls)), default=None, return_dtype=pl.Int64
            )
        )
    )
    pick = rows.select(
        pl.coalesce(pl.col("k").cast(pl.Int64), n + pl.col("c"), pl.lit(n + len(cls)))
    ).to_series()
    source = (
        pl.when(pl.col("k").is_not_null())
        .then(pl.lit("graph"))
        .when(pl.col("c").is_not_null())
        .then(pl.lit("sub_commodity_mean"))
        .otherwise(pl.lit("global_mean"))
    )
    id_map = rows.select(
        pl.int_range(pl.len(), dtype=pl.Int32).alias("row"),
        "product_id",
        "prod_code_10",
        source.alias("source"),
    )
    return table[torch.tensor(pick.to_numpy(), dtype=torch.long)].contiguous(), id_map.cast(
        dict(ID_MAP_SCHEMA)
    )


def nearest_neighbours(
    vectors: torch.Tensor, id_map: pl.DataFrame, products: list[str], k: int = 5
) -> pl.DataFrame:
    unit = torch.nn.functional.normalize(vectors, dim=1)
    rows = id_map.filter(pl.col("product_id").is_in(products))
    sims = unit[torch.tensor(rows["row"].to_numpy(), dtype=torch.long)] @ unit.T  # (q, P)
    top = sims.topk(k + 1, dim=1)
    names = id_map["product_id"].to_numpy()
    return pl.DataFrame(
        [
            {
                "product_id": p,
                "neighbours": ", ".join(
                    f"{names[j]} ({s:.2f})" for s, j in zip(ss[1:], ii[1:], strict=True)
                ),
            }
            for p, ss, ii in zip(
                rows["product_id"], top.values.tolist(), top.indices.tolist(), strict=True
            )
        ]
    )

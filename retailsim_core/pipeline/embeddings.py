"""``graphsage_embeddings``: train on the product graph, write safetensors + a Parquet id map.

The id map is the model's vocabulary: every product sold before the test weeks (weeks <=
``valid_end``), i.e. what a model deployed at the start of the test period could know exists.
A product first sold in a test week is in no method's vocabulary; evaluation counts it in the
basket as a product nobody can recommend. Products the graph does not hold (first sold after
the training weeks) get the mean embedding of their sub-commodity's graph products (design §4.7.5
case 3), else the mean of all products.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from retailsim_core.brands import TIERS
from retailsim_core.io import atomic_write_bytes, atomic_write_text
from retailsim_core.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.models.graphsage import RELATIONS, GraphSAGEConfig, NodeIds, model_graph, train
from retailsim_core.pipeline.graph import ProductGraph
from retailsim_core.pipeline.ingest import RAW_TABLE
from retailsim_core.tokens import ProductVocab
from retailsim_core.warehouse import CorruptPartitionError, Warehouse

EMBEDDINGS_TABLE = "graphsage_embeddings"
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


def all_products(warehouse: Warehouse, max_week: int | None = None) -> pl.DataFrame:
    """product_id, prod_code_10 of every product sold in weeks <= ``max_week`` (default: all)."""
    weeks = [w for w in warehouse.weeks(RAW_TABLE) if max_week is None or w <= max_week]
    return (
        warehouse.scan(RAW_TABLE, weeks, schema=RAW_TRANSACTIONS_SCHEMA)
        .select("product_id", "prod_code_10")
        .unique("product_id", keep="first")
        .sort("product_id")
        .collect()
    )


def write_embeddings(warehouse: Warehouse, emb: Embeddings, cfg: GraphSAGEConfig) -> None:
    """Vectors (safetensors) beside the id map; the id map's manifest holds the vectors' checksum,
    so the pair is published by the manifest's one rename."""
    folder = warehouse.table_dir(EMBEDDINGS_TABLE)
    vectors = st_save({"embeddings": emb.vectors}, metadata={"rows": str(emb.vectors.shape[0])})
    digest = hashlib.sha256(vectors).hexdigest()
    atomic_write_bytes(vectors, folder / f"embeddings-{digest[:16]}.safetensors")
    atomic_write_text(
        json.dumps({"config": asdict(cfg), "losses": emb.losses, "seconds": emb.seconds}, indent=2),
        folder / "training.json",
    )
    atomic_write_text(loss_curve_svg(emb.losses), folder / "loss_curve.svg")
    warehouse.write_table(
        EMBEDDINGS_TABLE,
        emb.id_map,
        {"vectors_file": f"embeddings-{digest[:16]}.safetensors", "vectors_sha256": digest},
    )
    for old in folder.glob("embeddings*.safetensors"):  # superseded vector files
        if old.name != f"embeddings-{digest[:16]}.safetensors":
            old.unlink(missing_ok=True)


def load_embeddings(warehouse: Warehouse) -> tuple[torch.Tensor, pl.DataFrame]:
    id_map = warehouse.read_table(EMBEDDINGS_TABLE)
    manifest = warehouse.manifest(EMBEDDINGS_TABLE)
    path = warehouse.table_dir(EMBEDDINGS_TABLE) / manifest["vectors_file"]
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != manifest["vectors_sha256"]:
        raise CorruptPartitionError(
            f"{path} (table {EMBEDDINGS_TABLE}): checksum differs from "
            f"its manifest (the file is damaged); re-materialize {EMBEDDINGS_TABLE}"
        )
    return st_load(data)["embeddings"], id_map


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
                "neighbours": ", ".join(f"{names[j]} ({s:.2f})" for s, j in zip(ss[1:], ii[1:])),
            }
            for p, ss, ii in zip(rows["product_id"], top.values.tolist(), top.indices.tolist())
        ]
    )


def loss_curve_svg(losses: list[float], width: int = 480, height: int = 200) -> str:
    """A minimal SVG line chart of the training loss (no plotting dependency)."""
    lo, hi = min(losses), max(losses)
    span = (hi - lo) or 1.0
    pts = " ".join(
        f"{40 + i * (width - 50) / max(len(losses) - 1, 1):.1f},"
        f"{10 + (hi - v) * (height - 40) / span:.1f}"
        for i, v in enumerate(losses)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f'<polyline fill="none" stroke="#4f43dd" stroke-width="2" points="{pts}"/>'
        f'<text x="40" y="{height - 8}" font-size="11">epoch 1..{len(losses)}; loss {hi:.3f} → '
        f"{losses[-1]:.3f}</text>"
        f"</svg>"
    )


def product_categories(warehouse: Warehouse, vocab: ProductVocab) -> np.ndarray:
    """(V,) category code (1-based, from PROD_CODE_10) of every token; 0 for special tokens."""
    _, id_map = load_embeddings(warehouse)
    codes = vocab.frame().join(
        id_map.select("product_id", "prod_code_10"), on="product_id", how="left"
    )
    out = np.zeros(vocab.size, dtype=np.int64)
    out[codes["token"].to_numpy()] = (
        codes["prod_code_10"].cast(pl.Categorical).to_physical().to_numpy() + 1
    )
    return out

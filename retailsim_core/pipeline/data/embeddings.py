"""``graphsage_embeddings``: the catalogue's products from the warehouse, embeddings trained on
the product graph (``product_embeddings``), written as safetensors + a Parquet id map.

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
from dataclasses import asdict

import polars as pl
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from retailsim_core.report.svg_charts import loss_curve_svg
from retailsim_core.graph.product_embeddings import Embeddings
from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.models.gnn.graphsage import GraphSAGEConfig
from retailsim_core.storage.io import atomic_write_bytes, atomic_write_text
from retailsim_core.storage.warehouse import CorruptPartitionError, Warehouse
from retailsim_core.tables import EMBEDDINGS_TABLE, RAW_TABLE


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

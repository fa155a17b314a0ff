"""Shared fixtures: one tiny synthetic dataset per test session (seconds to generate)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("DGLBACKEND", "pytorch")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # One worker per core (pyproject's ``-n``): a thread each, not every core each, or the
    # workers' kernels fight over the cores. Read when torch is first imported.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from retailsim_core.pipeline.data.graph_tables import build_product_graph, write_graph
from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
from retailsim_core.pipeline.data.price_weeks import derive_price_weeks
from retailsim_core.pipeline.data.snapshot_weeks import snapshot_weeks
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.synth import preset
from retailsim_core.synth.writer import generate
from tests.shared_builds import built_once

TINY_WEEKS = range(1, 15)


@pytest.fixture(scope="session")
def tiny_cfg():
    return preset("tiny")


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory, tiny_cfg) -> dict[str, Path]:
    """The tiny preset's first 14 weeks, full header, plain CSV; week 4 left out."""

    def build(root: Path) -> None:
        generate(tiny_cfg, root / "raw", root / "truth", missing_weeks=[4], weeks=TINY_WEEKS)

    root = built_once(tmp_path_factory, "tiny", build)
    return {"raw": root / "raw", "truth": root / "truth", "root": root}


@pytest.fixture(scope="session")
def tiny_warehouse(tiny_dataset, tmp_path_factory):
    """The tiny world through every table the world model reads (weeks 1-14, split 8 / 11).
    Product embeddings are seeded random vectors: the model tests need a table, not a trained
    GNN."""
    import polars as pl
    import torch

    from retailsim_core.graph.product_embeddings import Embeddings
    from retailsim_core.models.gnn.graphsage import GraphSAGEConfig
    from retailsim_core.pipeline.data.embeddings import all_products, write_embeddings
    from retailsim_core.pipeline.data.feature_weeks import store_feature_weeks
    from retailsim_core.pipeline.data.training_data_weeks import training_data_weeks

    split = TemporalSplit(8, 11)

    def build(root: Path) -> None:
        wh = Warehouse(root / "wh")
        weeks = range(1, 15)
        ingest_weeks(tiny_dataset["raw"], wh, weeks)
        derive_price_weeks(wh, weeks)
        snapshot_weeks(wh, weeks)
        store_feature_weeks(wh, weeks)
        write_graph(wh, build_product_graph(wh, split))  # the model's substitution edges
        training_data_weeks(wh, weeks, split)
        products = all_products(wh).sort("product_id")
        id_map = products.select(
            pl.int_range(pl.len(), dtype=pl.Int32).alias("row"),
            "product_id",
            "prod_code_10",
            pl.lit("graph").alias("source"),
        )
        vectors = torch.randn(products.height, 256, generator=torch.Generator().manual_seed(0))
        write_embeddings(wh, Embeddings(vectors, id_map, [1.0], 0.0), GraphSAGEConfig())

    wh = Warehouse(built_once(tmp_path_factory, "tiny_wh", build) / "wh")
    return {"warehouse": wh, "split": split, "truth": tiny_dataset["truth"]}


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_warehouse, tmp_path_factory):
    """A tiny-preset world model trained on the tiny warehouse (seconds)."""
    from retailsim_core.models.world_model import WorldModelConfig
    from retailsim_core.pipeline.world_model_training import train_world_model
    from retailsim_core.tables import CHECKPOINT_TABLE
    from retailsim_core.training.run.train_config import TrainConfig

    wh = tiny_warehouse["warehouse"]

    def build(root: Path) -> None:
        """Trained on a copy of this worker's tiny warehouse; kept: the tables it wrote."""
        shutil.copytree(wh.root, root / "wh")
        copy, split = Warehouse(root / "wh"), tiny_warehouse["split"]
        inputs = {p for p in copy.root.iterdir() if p.is_dir() and p.name != CHECKPOINT_TABLE}
        train_world_model(copy, split, WorldModelConfig.preset("tiny"), TrainConfig.preset("tiny"))
        for table in inputs:
            shutil.rmtree(table)

    if not (wh.table_dir(CHECKPOINT_TABLE) / "model.safetensors").exists():
        trained = built_once(tmp_path_factory, "tiny_checkpoint", build) / "wh"
        shutil.copytree(trained, wh.root, dirs_exist_ok=True)  # what the training wrote
    return wh.table_dir(CHECKPOINT_TABLE)


def pytest_collection_modifyitems(items):
    """A test on the default preset's pipeline (``default_pipeline``: 117 weeks generated and
    ingested) is an end-to-end run: it belongs to the slow tests."""
    for item in items:
        if "default_pipeline" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_world_demand(tiny_warehouse, tiny_checkpoint, tmp_path_factory):
    """The demand forecast, trip forecast and world model demand of the tiny warehouse's test
    weeks (folders ``demand``, ``trips``, ``out`` under ``root``), built once per session."""
    import json

    from retailsim_core.pipeline.demand_run import run_demand_check
    from retailsim_core.pipeline.trips_run import run_trip_check
    from retailsim_core.pipeline.world_demand_run import run_world_demand

    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]

    def build(root: Path) -> None:
        run_demand_check(wh, split, root / "demand", n_boot=20)
        run_trip_check(wh, split, root / "trips", n_boot=20)
        run_world_demand(wh, split, root / "out", demand=root / "demand",
                         trips=root / "trips", n_boot=20)  # fmt: skip

    root = built_once(tmp_path_factory, "tiny_world_demand", build)
    scores = json.loads((root / "out" / "scores.json").read_text())
    return {"root": root, "scores": scores, "split": split}


@pytest.fixture(scope="session")
def tiny_service(tiny_warehouse, tiny_checkpoint):
    """A service over the tiny warehouse and checkpoint (test weeks 12-14)."""
    from retailsim_core.pipeline.readers.serving_inputs import load_service

    return load_service(tiny_warehouse["warehouse"], tiny_checkpoint)

"""The table registry: every warehouse table with its schema, partitioning and the asset that
writes it — one place to look a table up (``docs/architecture.md`` points here). Tables the
world model writes as files (checkpoint, report, ONNX graph) have no Parquet schema.

A test materializes the tiny world and checks each Parquet table against its entry here.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from retailsim_core.brands import PSEUDO_BRANDS_SCHEMA
from retailsim_core.customer_features import AFFINITY_SCHEMA
from retailsim_core.evaluation.report import REPORT_TABLE
from retailsim_core.feature_tables import PRICE_FEATURES_SCHEMA, STORE_FEATURES_SCHEMA
from retailsim_core.graph_edges import EDGES_SCHEMA, NODES_SCHEMA
from retailsim_core.lgsr import QUARANTINE_SCHEMA, RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.baseline_fitting import BASELINES_TABLE
from retailsim_core.pipeline.embeddings import EMBEDDINGS_TABLE
from retailsim_core.pipeline.feature_weeks import (
    BRANDS_TABLE,
    PRICE_FEATURES_TABLE,
    STORE_FEATURES_TABLE,
)
from retailsim_core.pipeline.graph_tables import GRAPH_EDGES_TABLE, GRAPH_NODES_TABLE, GRAPH_TABLE
from retailsim_core.pipeline.ingest_weeks import QUARANTINE_TABLE, RAW_TABLE
from retailsim_core.pipeline.price_weeks import PRICES_TABLE
from retailsim_core.pipeline.snapshot_weeks import AFFINITY_TABLE, MISSION_SCHEMA, MISSIONS_TABLE
from retailsim_core.pipeline.training_data_weeks import METADATA_TABLE, SAMPLES_TABLE, TRIPS_TABLE
from retailsim_core.pipeline.world_model_training import CHECKPOINT_TABLE
from retailsim_core.prices import DERIVED_PRICES_SCHEMA
from retailsim_core.product_embeddings import ID_MAP_SCHEMA
from retailsim_core.sample_buckets import METADATA_SCHEMA, SAMPLES_SCHEMA
from retailsim_core.serving.onnx_scoring import GRAPH_TABLE as ONNX_TABLE
from retailsim_core.trips import TRIPS_SCHEMA


@dataclass(frozen=True)
class Table:
    name: str  # folder under the warehouse root
    asset: str  # the asset that writes it
    weekly: bool  # one partition per shop week
    schema: pl.Schema | None  # Parquet schema; None for tables of files
    content: str  # what a row (or the folder) holds


def _tables(*tables: Table) -> dict[str, Table]:
    return {t.name: t for t in tables}


TABLES = _tables(
    Table(RAW_TABLE, RAW_TABLE, True, RAW_TRANSACTIONS_SCHEMA, "a validated LGSR line"),
    Table(QUARANTINE_TABLE, QUARANTINE_TABLE, True, QUARANTINE_SCHEMA, "a rejected line and why"),
    Table(PRICES_TABLE, PRICES_TABLE, True, DERIVED_PRICES_SCHEMA, "a product x store x week"),
    Table(GRAPH_NODES_TABLE, GRAPH_TABLE, False, NODES_SCHEMA, "a product or category node"),
    Table(GRAPH_EDGES_TABLE, GRAPH_TABLE, False, EDGES_SCHEMA, "a graph edge"),
    Table(AFFINITY_TABLE, AFFINITY_TABLE, True, AFFINITY_SCHEMA, "a customer as of week W"),
    Table(MISSIONS_TABLE, MISSIONS_TABLE, True, MISSION_SCHEMA, "a customer as of week W"),
    Table(BRANDS_TABLE, BRANDS_TABLE, False, PSEUDO_BRANDS_SCHEMA, "a product's pseudo-brand"),
    Table(PRICE_FEATURES_TABLE, PRICE_FEATURES_TABLE, True, PRICE_FEATURES_SCHEMA, "T4 of a cell"),
    Table(STORE_FEATURES_TABLE, STORE_FEATURES_TABLE, True, STORE_FEATURES_SCHEMA, "T5 of a store"),
    Table(EMBEDDINGS_TABLE, EMBEDDINGS_TABLE, False, ID_MAP_SCHEMA, "embedding row of a product"),
    Table(METADATA_TABLE, METADATA_TABLE, True, METADATA_SCHEMA, "a basket's temporal facts"),
    Table(TRIPS_TABLE, TRIPS_TABLE, True, TRIPS_SCHEMA, "a carded trip with its products"),
    Table(SAMPLES_TABLE, SAMPLES_TABLE, True, SAMPLES_SCHEMA, "a basket a model is scored on"),
    Table(CHECKPOINT_TABLE, CHECKPOINT_TABLE, False, None, "safetensors + JSON + manifest"),
    Table(BASELINES_TABLE, BASELINES_TABLE, False, None, "tuning.json + safetensors + manifest"),
    Table(REPORT_TABLE, REPORT_TABLE, False, None, "metrics JSON/Parquet, report.html"),
    Table(ONNX_TABLE, ONNX_TABLE, False, None, "scoring.onnx + manifest"),
)

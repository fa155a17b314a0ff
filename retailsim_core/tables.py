"""The table registry: every warehouse table's name, schema, partitioning and the asset that
writes it — the one place a table name is defined (``docs/architecture.md`` points here). Tables
the world model writes as files (checkpoint, report, ONNX graph) have no Parquet schema.

It imports schemas only, from the domain modules that own them, so any pipeline step, asset or
service can import a name from here without pulling the pipeline in. A test materializes the tiny
world and checks each Parquet table against its entry here.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from retailsim_core.customers.customer_features import AFFINITY_SCHEMA, MISSION_SCHEMA
from retailsim_core.datasets.sample_buckets import METADATA_SCHEMA, SAMPLES_SCHEMA
from retailsim_core.datasets.trips import TRIPS_SCHEMA
from retailsim_core.derived_prices import DERIVED_PRICES_SCHEMA
from retailsim_core.features.brands import PSEUDO_BRANDS_SCHEMA
from retailsim_core.features.feature_tables import STORE_FEATURES_SCHEMA
from retailsim_core.graph.graph_edges import EDGES_SCHEMA, NODES_SCHEMA
from retailsim_core.graph.product_embeddings import ID_MAP_SCHEMA
from retailsim_core.ingest.lgsr import QUARANTINE_SCHEMA, RAW_TRANSACTIONS_SCHEMA
from retailsim_core.ingest.promotion_plan import (
    PROMOTIONS_QUARANTINE_SCHEMA,
    SOURCE_PROMOTIONS_SCHEMA,
)

# Folder names under the warehouse root; each is also the name of the asset that writes it,
# except the product graph's and the source promotions' two tables each, written by the assets
# ``product_graph`` and ``source_promotions``.
RAW_TABLE = "raw_transactions"
QUARANTINE_TABLE = "raw_transactions_quarantine"
PROMOTIONS_TABLE = "source_promotions"  # the asset; its two tables below
PROMOTION_CELLS_TABLE = f"{PROMOTIONS_TABLE}/cells"
PROMOTIONS_QUARANTINE_TABLE = f"{PROMOTIONS_TABLE}/quarantine"
PRICES_TABLE = "derived_prices"
PRODUCT_GRAPH_TABLE = "product_graph"  # the asset; its two tables below
GRAPH_NODES_TABLE = f"{PRODUCT_GRAPH_TABLE}/nodes"
GRAPH_EDGES_TABLE = f"{PRODUCT_GRAPH_TABLE}/edges"
AFFINITY_TABLE = "customer_store_affinity"
MISSIONS_TABLE = "mission_patterns"
BRANDS_TABLE = "pseudo_brands"
STORE_FEATURES_TABLE = "store_features"
EMBEDDINGS_TABLE = "graphsage_embeddings"
METADATA_TABLE = "temporal_metadata"
TRIPS_TABLE = "customer_trips"
SAMPLES_TABLE = "bucketed_samples"
CHECKPOINT_TABLE = "trained_checkpoint"
BASELINES_TABLE = "tuned_baselines"
REPORT_TABLE = "evaluation_report"
ONNX_TABLE = "onnx_scoring_graph"
HOLDOUT_TABLE = "holdout_checkpoint"
PRICING_TABLE = "pricing_policy"
REFRESH_TABLE = "model_refresh"
DEMAND_TABLE = "demand_forecast"
TRIP_FORECAST_TABLE = "trip_forecast"
WORLD_DEMAND_TABLE = "world_model_demand"


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
    Table(
        PROMOTION_CELLS_TABLE,
        PROMOTIONS_TABLE,
        True,
        SOURCE_PROMOTIONS_SCHEMA,
        "a product x store x week on display or in the mailer",
    ),
    Table(
        PROMOTIONS_QUARANTINE_TABLE,
        PROMOTIONS_TABLE,
        True,
        PROMOTIONS_QUARANTINE_SCHEMA,
        "a rejected promotion row and why",
    ),
    Table(
        PRICES_TABLE,
        PRICES_TABLE,
        True,
        DERIVED_PRICES_SCHEMA,
        "an observed product x store x week",
    ),
    Table(GRAPH_NODES_TABLE, PRODUCT_GRAPH_TABLE, False, NODES_SCHEMA, "a product or category"),
    Table(GRAPH_EDGES_TABLE, PRODUCT_GRAPH_TABLE, False, EDGES_SCHEMA, "a graph edge"),
    Table(AFFINITY_TABLE, AFFINITY_TABLE, True, AFFINITY_SCHEMA, "a customer as of week W"),
    Table(MISSIONS_TABLE, MISSIONS_TABLE, True, MISSION_SCHEMA, "a customer as of week W"),
    Table(BRANDS_TABLE, BRANDS_TABLE, False, PSEUDO_BRANDS_SCHEMA, "a product's pseudo-brand"),
    Table(STORE_FEATURES_TABLE, STORE_FEATURES_TABLE, True, STORE_FEATURES_SCHEMA, "T5 of a store"),
    Table(EMBEDDINGS_TABLE, EMBEDDINGS_TABLE, False, ID_MAP_SCHEMA, "embedding row of a product"),
    Table(METADATA_TABLE, METADATA_TABLE, True, METADATA_SCHEMA, "a basket's temporal facts"),
    Table(TRIPS_TABLE, TRIPS_TABLE, True, TRIPS_SCHEMA, "a carded trip with its products"),
    Table(SAMPLES_TABLE, SAMPLES_TABLE, True, SAMPLES_SCHEMA, "a basket a model is scored on"),
    Table(CHECKPOINT_TABLE, CHECKPOINT_TABLE, False, None, "safetensors + JSON + manifest"),
    Table(BASELINES_TABLE, BASELINES_TABLE, False, None, "tuning.json + safetensors + manifest"),
    Table(REPORT_TABLE, REPORT_TABLE, False, None, "metrics JSON/Parquet, report.html"),
    Table(ONNX_TABLE, ONNX_TABLE, False, None, "scoring.onnx + manifest"),
    Table(HOLDOUT_TABLE, HOLDOUT_TABLE, False, None, "safetensors + JSON + manifest"),
    Table(PRICING_TABLE, PRICING_TABLE, False, None, "results.json, paths, PPO safetensors"),
    Table(REFRESH_TABLE, REFRESH_TABLE, True, None, "a week's refreshed checkpoint"),
    Table(DEMAND_TABLE, DEMAND_TABLE, False, None, "each method's units of a cell-week; scores"),
    Table(TRIP_FORECAST_TABLE, TRIP_FORECAST_TABLE, False, None, "a customer-week's visit; scores"),
    Table(WORLD_DEMAND_TABLE, WORLD_DEMAND_TABLE, False, None, "the world model's cell-week units"),
)

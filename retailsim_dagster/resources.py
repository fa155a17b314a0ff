"""Resources: where raw LGSR files are read from and where the warehouse lives.

Defaults come from ``RETAILSIM_RAW_DIR`` / ``RETAILSIM_WAREHOUSE_DIR`` when set, else the
repository's ``data/raw`` and ``data/warehouse``; both can also be set as resource config.
"""

import os
from pathlib import Path

import dagster as dg

from retailsim_core.warehouse import Warehouse

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def default_raw_dir() -> str:
    return os.environ.get("RETAILSIM_RAW_DIR", str(PROJECT_ROOT / "data" / "raw"))


def default_warehouse_dir() -> str:
    return os.environ.get("RETAILSIM_WAREHOUSE_DIR", str(PROJECT_ROOT / "data" / "warehouse"))


class RawSourceResource(dg.ConfigurableResource):
    """Folder of LGSR week files (``transactions_YYYYWW.csv`` or ``.csv.gz``)."""

    raw_dir: str

    @property
    def path(self) -> Path:
        return Path(self.raw_dir)


class WarehouseResource(dg.ConfigurableResource):
    """Root of the Parquet warehouse (Hive ``week=<key>/`` layout for weekly tables)."""

    root: str

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse(Path(self.root))


def default_resources() -> dict:
    return {
        "raw_source": RawSourceResource(raw_dir=default_raw_dir()),
        "warehouse": WarehouseResource(root=default_warehouse_dir()),
    }

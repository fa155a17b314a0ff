"""Planted truth bound to the raw files it was generated with.

The synthetic generator writes ``raw_fingerprint.json`` into its truth folder: the sha256 of every
week file it wrote. The warehouse's ``raw_transactions`` manifests record the sha256 of the file
each week was ingested from. The oracles and the planted-truth checks use a truth folder only
when every ingested week's file is one the generator wrote; otherwise they are skipped and the
reason is said (run log, report). A truth folder of other files would score the wrong baskets,
or fail after minutes of work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.synth.world import (
    FINGERPRINT_FILE,
    SUBSTITUTES_FILE,
    PlantedTruth,
    World,
    load_world,
)
from retailsim_core.tables import RAW_TABLE


@dataclass(frozen=True)
class TruthBinding:
    truth_dir: Path | None  # the planted truth to use, None when there is none or it does not match
    note: str | None  # why a configured truth folder is not used (None when it is used)


def ingested_files(warehouse: Warehouse) -> dict[int, str]:
    """Week -> sha256 of the source file of every week ingested from a file."""
    out = {}
    for week in warehouse.weeks(RAW_TABLE):
        manifest = warehouse.manifest(RAW_TABLE, week) or {}
        if manifest.get("status") == "ok":
            out[week] = manifest.get("source_sha256") or ""
    return out


def bind_truth(truth_dir: Path | None, warehouse: Warehouse) -> TruthBinding:
    """Use ``truth_dir`` only if it was generated with the files the warehouse ingested."""
    if truth_dir is None or not Path(truth_dir).is_dir():
        return TruthBinding(None, None)
    truth_dir = Path(truth_dir)
    skipped = f"planted truth in {truth_dir} (RETAILSIM_TRUTH_DIR) not used: "
    path = truth_dir / FINGERPRINT_FILE
    if not path.exists():
        return TruthBinding(
            None,
            skipped + f"it has no {FINGERPRINT_FILE} (not written by this "
            "generator version); regenerate it with the raw files (make data)",
        )
    planted = {int(w): sha for w, sha in json.loads(path.read_text())["weeks"].items()}
    ingested = ingested_files(warehouse)
    if not ingested:
        return TruthBinding(None, skipped + "no week has been ingested from a file")
    other = sorted(w for w, sha in ingested.items() if planted.get(w) != sha)
    if other:
        return TruthBinding(
            None,
            skipped + f"{len(other)} of {len(ingested)} ingested week files "
            f"are not the files it was generated with (first: week {other[0]}); "
            "oracles and planted-truth checks are skipped (set RETAILSIM_TRUTH_DIR= "
            "for real data)",
        )
    return TruthBinding(truth_dir, None)


def read_truth(binding: TruthBinding) -> PlantedTruth | None:
    """The bound planted truth, read once for a run and passed down (None when none is bound)."""
    return None if binding.truth_dir is None else PlantedTruth.read(binding.truth_dir)


def bound_world(truth_dir: Path | None, warehouse: Warehouse) -> World | None:
    """The planted world of ``truth_dir`` when it is bound to the warehouse's files, else None
    (its tables only: the planted baskets are not read)."""
    binding = bind_truth(truth_dir, warehouse)
    return None if binding.truth_dir is None else load_world(binding.truth_dir)


def planted_substitutes(binding: TruthBinding) -> pl.DataFrame | None:
    """The substitute pairs the generator planted (None when no truth is bound)."""
    return (
        None if binding.truth_dir is None else pl.read_parquet(binding.truth_dir / SUBSTITUTES_FILE)
    )

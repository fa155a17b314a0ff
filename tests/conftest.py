"""Shared fixtures: one tiny synthetic dataset per test session (seconds to generate)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("DGLBACKEND", "pytorch")

from retailsim_core.synth import preset
from retailsim_core.synth.writer import generate

TINY_WEEKS = range(1, 15)


@pytest.fixture(scope="session")
def tiny_cfg():
    return preset("tiny")


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory, tiny_cfg) -> dict[str, Path]:
    """The tiny preset's first 14 weeks, full header, plain CSV; week 4 left out."""
    root = tmp_path_factory.mktemp("tiny")
    generate(tiny_cfg, root / "raw", root / "truth", missing_weeks=[4], weeks=TINY_WEEKS)
    return {"raw": root / "raw", "truth": root / "truth", "root": root}

"""The default synthetic world run through the pipeline once per test session (~30 s)."""

import pytest

from retailsim_core.pipeline.data.graph_tables import (
    build_product_graph,
    load_graph,
    write_graph,
)
from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
from retailsim_core.pipeline.data.price_weeks import derive_price_weeks
from retailsim_core.pipeline.data.snapshot_weeks import snapshot_weeks
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.synth import preset
from retailsim_core.synth.writer import generate
from tests.shared_builds import built_once


@pytest.fixture(scope="session")
def default_pipeline(tmp_path_factory):
    def build(root):
        generate(preset("default"), root / "raw", root / "truth")
        wh = Warehouse(root / "warehouse")
        weeks = range(1, 118)
        ingest_weeks(root / "raw", wh, weeks)
        derive_price_weeks(wh, weeks)
        write_graph(wh, build_product_graph(wh, TemporalSplit()))
        snapshot_weeks(wh, weeks)

    root = built_once(tmp_path_factory, "default", build)
    wh = Warehouse(root / "warehouse")
    graph = load_graph(wh)  # as written: the graph the build made
    return {"root": root, "truth": root / "truth", "warehouse": wh, "graph": graph}


@pytest.fixture(scope="session")
def large_random_panel():
    """A ``PANEL_SCHEMA`` panel of ~1.5M cells over 95 weeks: large enough that Polars adds up
    a group in partial sums per thread, where a float's sum depends on their order."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(0)
    n = 1_500_000
    promo = rng.random(n) < 0.2
    kind = np.where(rng.random(n) < 0.5, "display", "mailer")
    return pl.DataFrame(
        {
            "product_id": pl.Series(rng.integers(0, 3000, n)).cast(pl.String),
            "store_id": pl.Series(rng.integers(0, 300, n)).cast(pl.String),
            "week": rng.integers(1, 96, n).astype(np.int32),
            "units": rng.poisson(0.7, n).astype(np.float64),
            "promo": promo,
            "kind": pl.Series(np.where(promo, kind, "")).replace("", None),
            "depth": np.where(promo, rng.random(n) * 0.5, np.nan),
        }
    ).unique(["product_id", "store_id", "week"], maintain_order=True)

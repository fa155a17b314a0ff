"""The default synthetic world run through the pipeline once per test session (~30 s)."""

import pytest

from retailsim_core.pipeline.graph_tables import build_product_graph, write_graph
from retailsim_core.pipeline.ingest_weeks import ingest_weeks
from retailsim_core.pipeline.price_weeks import derive_price_weeks
from retailsim_core.pipeline.snapshot_weeks import snapshot_weeks
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.synth import preset
from retailsim_core.synth.writer import generate


@pytest.fixture(scope="session")
def default_pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("default")
    generate(preset("default"), root / "raw", root / "truth")
    wh = Warehouse(root / "warehouse")
    weeks = range(1, 118)
    ingest_weeks(root / "raw", wh, weeks)
    derive_price_weeks(wh, weeks)
    graph = build_product_graph(wh, TemporalSplit())
    write_graph(wh, graph)
    snapshot_weeks(wh, weeks)
    return {"root": root, "truth": root / "truth", "warehouse": wh, "graph": graph}

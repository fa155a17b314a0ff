"""A fresh warehouse per test with the tiny world's raw weeks 1-14 ingested (tests may rewrite
it).
"""

import pytest

from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks
from retailsim_core.storage.warehouse import Warehouse

RAW_WEEKS = range(1, 15)


@pytest.fixture()
def warehouse(tiny_dataset, tmp_path):
    wh = Warehouse(tmp_path / "wh")
    ingest_weeks(tiny_dataset["raw"], wh, RAW_WEEKS)
    return wh

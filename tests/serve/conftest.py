"""The app over the tiny warehouse, with a copy of the tiny checkpoint it may reload."""

import shutil

import pytest
from fastapi.testclient import TestClient

from retailsim_core.pipeline.readers.serving_inputs import load_service
from retailsim_serve.app import create_app
from retailsim_serve.runtime import ServeSettings

LIMITS = ServeSettings(max_k=50, max_batch=64, max_body_bytes=20_000, max_simulations=10)


def make_client(warehouse, checkpoint, settings=LIMITS):
    app = create_app(lambda: load_service(warehouse, checkpoint), checkpoint, settings, watch=False)
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(tiny_warehouse, tiny_checkpoint):
    with make_client(tiny_warehouse["warehouse"], tiny_checkpoint) as c:
        yield c


@pytest.fixture(scope="module")
def context(client):
    frame = client.app.state.holder.service.data.sample_contexts(3, seed=11, new_share=0.0)
    row = frame.row(0, named=True)
    return {
        "customer_id": row["customer_id"],
        "store_id": row["store_id"],
        "date": row["date"].isoformat(),
        "hour": int(row["hour"]),
    }


@pytest.fixture()
def checkpoint_copy(tiny_checkpoint, tmp_path):
    folder = tmp_path / "trained_checkpoint"
    shutil.copytree(tiny_checkpoint, folder)
    return folder

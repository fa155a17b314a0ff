"""A newly published checkpoint is picked up without a dropped request; a half-written one is
not."""

import time
from concurrent.futures import ThreadPoolExecutor

import torch

from retailsim_core.training.checkpoint import load_tensors, save_tensors, write_manifest
from retailsim_serve.runtime import ServeSettings
from tests.serve.conftest import LIMITS, make_client


def _retrain(folder, manifest=True):
    """Stand-in for a new trained_checkpoint: other weights, published by its manifest."""
    weights = load_tensors(folder / "model.safetensors")
    weights["item_bias"] = weights["item_bias"] + torch.linspace(-3, 3, len(weights["item_bias"]))
    save_tensors(folder / "model.safetensors", weights)
    return write_manifest(folder) if manifest else None


def test_reload_swaps_the_model_without_dropping_requests(tiny_warehouse, checkpoint_copy):
    with make_client(tiny_warehouse["warehouse"], checkpoint_copy) as client:
        holder = client.app.state.holder
        old = client.get("/health").json()["checkpoint_id"]
        context = holder.service.data.sample_contexts(1, seed=2).row(0, named=True)
        body = {
            "customer_id": context["customer_id"],
            "store_id": context["store_id"],
            "date": context["date"].isoformat(),
            "k": 5,
        }
        new = _retrain(checkpoint_copy)

        def ask(_):
            return client.post("/v1/next-basket", json=body)

        with ThreadPoolExecutor(8) as pool:
            pending = [pool.submit(ask, i) for i in range(60)]
            assert holder.reload_if_new()
            answers = [p.result() for p in pending]
        assert [a.status_code for a in answers] == [200] * 60
        assert {a.json()["checkpoint_id"] for a in answers} <= {old, new}
        assert client.get("/health").json()["checkpoint_id"] == new != old
        assert client.post("/v1/next-basket", json=body).json()["checkpoint_id"] == new
        assert client.get("/v1/model").json()["reloads"] == 1


def test_a_half_written_checkpoint_is_not_loaded(tiny_warehouse, checkpoint_copy):
    with make_client(tiny_warehouse["warehouse"], checkpoint_copy) as client:
        holder = client.app.state.holder
        old = holder.service.checkpoint_id
        _retrain(checkpoint_copy, manifest=False)  # weights changed, manifest not yet
        assert not holder.reload_if_new()
        assert client.get("/health").json()["checkpoint_id"] == old


def test_the_watcher_finds_a_new_checkpoint_by_itself(tiny_warehouse, checkpoint_copy):
    settings = ServeSettings(**(LIMITS.__dict__ | {"reload_seconds": 1}))
    client = make_client(tiny_warehouse["warehouse"], checkpoint_copy, settings)
    with client:
        client.app.state.holder.watch(1)
        new = _retrain(checkpoint_copy)
        deadline = time.monotonic() + 60
        while client.get("/health").json()["checkpoint_id"] != new:
            assert time.monotonic() < deadline, "no reload within 60 s"
            time.sleep(0.2)

"""A newly published checkpoint is picked up without a dropped request; a half-written one is
not."""

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import torch

from retailsim_core.training.checkpoints.checkpoint import (
    load_tensors,
    published_id,
    save_tensors,
    write_manifest,
)
from retailsim_serve.runtime import ServeSettings, ServiceHolder
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


def _published(folder, value: float) -> str:
    save_tensors(folder / "model.safetensors", {"w": torch.full((2,), value)})
    (folder / "config.json").write_text("{}")
    (folder / "vocabulary.parquet").write_bytes(b"x")
    return write_manifest(folder)


def _holder(folder, calls):
    def load():
        calls.append(1)
        if (folder / "broken").exists():
            raise ValueError("cannot read the weights")
        return SimpleNamespace(checkpoint_id=published_id(folder, "trained_checkpoint"))

    return ServiceHolder(load, folder)


def test_a_forged_manifest_is_refused_once_and_a_later_good_one_loads(tmp_path, caplog):
    first = _published(tmp_path, 1.0)
    holder = _holder(tmp_path, calls := [])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    real_files, real_sizes = manifest["files"], manifest["bytes"]
    for files, sizes in (
        ({}, {}),  # nothing named: was served under the manifest's invented id
        ({"../../../../etc/hostname": "0" * 64}, {"../../../../etc/hostname": 5}),
        ({"/dev/zero": "0" * 64}, {"/dev/zero": 1 << 40}),  # hung the reload thread
    ):
        files = files and real_files | files
        sizes = sizes and real_sizes | sizes
        forged = {"checkpoint_id": "feedfacefeedface", "files": files, "bytes": sizes}
        (tmp_path / "manifest.json").write_text(json.dumps(manifest | forged))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="retailsim_serve"):
            assert not any(holder.reload_if_new() for _ in range(3))
        assert len(caplog.records) == 1 and "not loaded" in caplog.text  # once, with why
        assert "Traceback" not in caplog.text
    assert holder.service.checkpoint_id == first and len(calls) == 1
    second = _published(tmp_path, 2.0)
    assert holder.reload_if_new() and holder.service.checkpoint_id == second != first


def test_a_checkpoint_that_fails_to_load_is_not_retried_until_it_changes(tmp_path, caplog):
    _published(tmp_path, 1.0)
    holder = _holder(tmp_path, calls := [])
    (tmp_path / "broken").touch()
    _published(tmp_path, 2.0)
    with caplog.at_level(logging.WARNING, logger="retailsim_serve"):
        assert not any(holder.reload_if_new() for _ in range(4))
    assert len(calls) == 2 and len(caplog.records) == 1 and "cannot read" in caplog.text
    (tmp_path / "broken").unlink()
    third = _published(tmp_path, 3.0)
    assert holder.reload_if_new() and holder.service.checkpoint_id == third


def test_the_holder_follows_the_folder_its_locator_names(tmp_path):
    """Given a locator (the newest refresh, D111), each check serves the folder it names now:
    a newer refresh published elsewhere is picked up, and an older id is not reloaded."""
    (old, new) = (tmp_path / "week=1", tmp_path / "week=2")
    old.mkdir(), new.mkdir()
    first = _published(old, 1.0)
    where = [old]

    def load():
        return SimpleNamespace(checkpoint_id=published_id(where[0], "model_refresh"))

    holder = ServiceHolder(load, lambda: where[0])
    assert holder.service.checkpoint_id == first and not holder.reload_if_new()
    second = _published(new, 2.0)
    where[0] = new
    assert holder.reload_if_new() and holder.service.checkpoint_id == second != first


def _report(folder, checkpoint_id, text=None):
    """An evaluation report folder that scored ``checkpoint_id`` (or a damaged metrics.json)."""
    folder.mkdir(exist_ok=True)
    metrics = {"next_basket": {"all": {"world_model": {"R@20": 0.5}, "P-TopFreq": {"R@20": 0.4}}}}
    (folder / "metrics.json").write_text(text if text is not None else json.dumps(metrics))
    scored = {"scored_checkpoints": {"trained": checkpoint_id, "refreshed": {}}}
    (folder / "tuning.json").write_text(json.dumps(scored))
    return folder


def _report_client(warehouse, checkpoint, report):
    from fastapi.testclient import TestClient

    from retailsim_core.pipeline.readers.serving_inputs import load_service
    from retailsim_serve.app import create_app

    app = create_app(
        lambda: load_service(warehouse, checkpoint, report), checkpoint, LIMITS, watch=False
    )
    return TestClient(app, raise_server_exceptions=False)


def test_the_model_shows_only_the_evaluation_that_scored_it(
    tiny_warehouse, checkpoint_copy, tmp_path
):
    old = published_id(checkpoint_copy, "trained_checkpoint")
    report = _report(tmp_path / "evaluation_report", old)
    with _report_client(tiny_warehouse["warehouse"], checkpoint_copy, report) as client:
        assert client.get("/v1/model").json()["evaluation"]["world_model"] == {"R@20": 0.5}
        _retrain(checkpoint_copy)
        assert client.app.state.holder.reload_if_new()
        assert client.get("/v1/model").json()["evaluation"] == {}  # the report scored `old`


def test_a_damaged_report_neither_stops_the_service_nor_its_reloads(
    tiny_warehouse, checkpoint_copy, tmp_path, caplog
):
    old = published_id(checkpoint_copy, "trained_checkpoint")
    report = _report(tmp_path / "evaluation_report", old, text='{"next_basket": {"al')
    with caplog.at_level(logging.WARNING):
        with _report_client(tiny_warehouse["warehouse"], checkpoint_copy, report) as client:
            assert client.get("/health").status_code == 200
            assert client.get("/v1/model").json()["evaluation"] == {}
            new = _retrain(checkpoint_copy)
            assert client.app.state.holder.reload_if_new()
            assert client.get("/health").json()["checkpoint_id"] == new
    assert str(report / "metrics.json") in caplog.text

"""``pricing_policy`` end to end on the tiny world, and the held-out simulator's customer
sample."""

import json
import shutil

import numpy as np
import polars as pl
import pytest
from safetensors.torch import load_file

from retailsim_core.pipeline.pricing_run import (
    PricingRunConfig,
    agent_file,
    holdout_schedule,
    run_pricing,
)
from retailsim_core.pipeline.world_model_training import sample_customers
from retailsim_core.training.checkpoints.checkpoint import UnverifiedCheckpointError, verified_id
from retailsim_core.training.run.train_config import TrainConfig


def test_a_customer_share_keeps_whole_customers_drawn_by_the_seed():
    samples = pl.DataFrame({"customer_id": list("aabbccddee"), "basket_id": range(10)})
    half = sample_customers(samples, 0.4, seed=1)
    assert half["customer_id"].n_unique() == 2 and half.height == 4  # whole customers
    assert half.equals(sample_customers(samples, 0.4, seed=1))
    assert sample_customers(samples, 1.0, seed=1).equals(samples)
    draws = {
        tuple(sample_customers(samples, 0.4, seed=s)["customer_id"].unique().sort())
        for s in range(6)
    }
    assert len(draws) > 1


def test_the_held_out_schedule_scales_epochs_and_budget_with_its_customers():
    main = TrainConfig.preset("small", seed=3)
    held = holdout_schedule(main, 0.5)
    assert held.seed == 4  # another draw of weights and batches
    assert held.samples_per_epoch == main.samples_per_epoch // 2
    assert held.max_seconds == main.max_seconds / 2
    assert held.phases == main.phases and held.valid_samples == main.valid_samples
    unbounded = holdout_schedule(TrainConfig.preset("paper"), 0.5)
    assert unbounded.samples_per_epoch is None and unbounded.max_seconds is None


def test_an_agent_file_is_a_plain_name_whatever_the_category():
    names = {agent_file("ppo", c, "seed0") for c in ("A/B", "A B", "../../etc", "SOFT DRINKS")}
    assert len(names) == 4  # one slug, two categories, two files
    for name in names:
        assert "/" not in name and not name.startswith(".") and name.endswith(".safetensors")
    assert agent_file("ppo", "../../etc", "seed0").startswith("ppo_etc-")


@pytest.mark.slow
def test_pricing_writes_every_policy_on_both_simulators(tiny_checkpoint, tiny_warehouse, tmp_path):
    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    cfg = PricingRunConfig(
        categories=2, contexts_per_week=5, seeds=2, ppo_timesteps=48, grid=3, penalty=1.0
    )
    # The training checkpoint as its own "held-out" simulator: every gap must be exactly 0.
    results = run_pricing(wh, split, tiny_checkpoint, tiny_checkpoint, tmp_path, cfg)
    assert results["held_out_simulator"] and results["weeks"] == [12, 13, 14]
    trusted = verified_id(tiny_checkpoint)  # the results name the models they priced with
    assert results["checkpoints"] == {"trained": trusted, "holdout": trusted}
    assert json.loads((tmp_path / "results.json").read_text())["categories"].keys() == (
        results["categories"].keys()
    )
    assert 1 <= len(results["categories"]) <= 2
    for c in results["categories"].values():
        policies = c["policies"]
        assert {"regular", "static", "myopic", "ppo_seed0", "ppo_seed1", "ppo"} <= policies.keys()
        # Two identical simulators never disagree: the penalised agents learn the same prices.
        assert policies["ppo_penalised_seed1"]["training"] == policies["ppo_seed1"]["training"]
        lift = {
            k: v["training"]["lift"] for k, v in policies.items() if "seeds" not in v["training"]
        }
        assert lift["static"] >= lift["regular"] - 1e-9  # the search starts from regular prices
        for name, e in policies.items():
            if name in ("ppo", "ppo_penalised"):
                assert e["training"]["seeds"] == 2 and len(e["training"]["interval"]) == 2
                continue
            assert e["training"]["violations"] == 0
            assert e["held_out"]["lift"] == pytest.approx(e["training"]["lift"])
    paths = pl.read_parquet(tmp_path / "price_paths.parquet")
    assert paths["week"].unique().sort().to_list() == [12, 13, 14]
    assert (paths["multiplier"] > 0).all()
    agents = sorted(tmp_path.glob("ppo_*.safetensors"))
    assert len(agents) == 2 * 2 * len(results["categories"])  # plain and penalised
    assert all(load_file(str(a)) for a in agents)  # safetensors, never pickle
    report = (tmp_path / "report.md").read_text()
    assert "Pricing policies" in report and "held-out" in report
    assert (tmp_path / "price_paths.svg").read_text().startswith("<svg")
    # Deterministic: the same seeds give the same paths.
    again = run_pricing(wh, split, tiny_checkpoint, tiny_checkpoint, tmp_path, cfg)
    assert pl.read_parquet(tmp_path / "price_paths.parquet").equals(paths)
    assert again["categories"] == results["categories"]
    # Without a held-out simulator (none materialized) the results say so.
    off = run_pricing(
        wh,
        split,
        tiny_checkpoint,
        tmp_path / "never_trained",  # holdout_checkpoint not materialized
        tmp_path,
        PricingRunConfig(categories=1, seeds=1, contexts_per_week=4, ppo_timesteps=48, grid=3),
    )
    assert not off["held_out_simulator"] and "off" in off["held_out_note"]
    assert np.isfinite(
        next(iter(off["categories"].values()))["policies"]["static"]["training"]["lift"]
    )


@pytest.mark.parametrize("damaged", ["trained", "holdout"])
def test_pricing_refuses_a_damaged_simulator(tiny_checkpoint, tiny_warehouse, tmp_path, damaged):
    folders = {}
    for name in ("trained", "holdout"):
        folders[name] = tmp_path / f"{name}_checkpoint"
        shutil.copytree(tiny_checkpoint, folders[name])
    weights = folders[damaged] / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    wh, split = tiny_warehouse["warehouse"], tiny_warehouse["split"]
    with pytest.raises(UnverifiedCheckpointError, match=f"materialize {damaged}_checkpoint"):
        run_pricing(wh, split, folders["trained"], folders["holdout"], tmp_path / "out")


def test_units_per_line_come_from_the_demand_forecasts_quantity_fit(tiny_warehouse, tmp_path):
    from retailsim_core.pipeline.pricing_run import _quantity_fit, _units_per_line
    from retailsim_core.storage.warehouse import Warehouse
    from retailsim_core.tables import DEMAND_TABLE, RAW_TABLE

    root = tmp_path / "wh"
    shutil.copytree(tiny_warehouse["warehouse"].root, root)
    wh, split = Warehouse(root), tiny_warehouse["split"]
    assert _quantity_fit(wh, split) is None  # no demand forecast: one unit a line
    folder = wh.table_dir(DEMAND_TABLE)
    folder.mkdir(parents=True)
    fit = {"coefficients": {"log_price_index": None, "display": 0.1}, "mean_quantity": 1.3}
    (folder / "scores.json").write_text(json.dumps({"quantity": fit}))
    assert _quantity_fit(wh, split) is None  # no price effect fitted: nothing to scale
    fit["coefficients"]["log_price_index"] = -0.8
    (folder / "scores.json").write_text(json.dumps({"quantity": fit}))
    lines, elasticity, overall = _quantity_fit(wh, split)
    assert elasticity == -0.8 and overall == 1.3
    raw = wh.scan(RAW_TABLE).filter(pl.col("week") <= split.valid_end).collect()
    some = raw["product_id"][0]
    expected = raw.filter((pl.col("product_id") == some) & (pl.col("quantity") > 0))["quantity"]
    rows = pl.DataFrame({"product_id": [some, "PRD_NEVER_SOLD"]})
    per_line = _units_per_line(rows, lines, elasticity, overall)
    assert per_line.mean.tolist() == pytest.approx([expected.cast(pl.Float64).mean(), 1.3])

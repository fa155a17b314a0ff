"""Pricing policies: capped paths, the static search, the myopic optimiser and PPO, each within
the constraints; evaluation's two computations agree."""

import numpy as np
import pytest

from retailsim_core.pricing.environment import PricingConfig, historical_values
from retailsim_core.pricing.policies import (
    capped_paths,
    evaluate,
    myopic_path,
    path_values,
    ppo_path,
    static_path,
    train_ppo,
    violations,
)


def test_capped_paths_reach_a_target_at_the_cap():
    paths = capped_paths(np.array([[0.25, -0.05]]), weeks=4, step=0.1)
    np.testing.assert_allclose(paths[0, :, 0], [0.1, 0.2, 0.25, 0.25])
    np.testing.assert_allclose(paths[0, :, 1], [-0.05] * 4)


def test_violations_count_range_and_cap_breaks(tiny_pricing):
    panel = tiny_pricing["panel"]
    cfg = PricingConfig(max_change=0.1)
    path = np.zeros((3, panel.n))
    assert violations(panel, path, cfg) == 0
    path[1, 0] = 0.5  # a jump of 0.5 in and out: two cap breaks (and maybe out of range)
    assert violations(panel, path, cfg) >= 2


def test_evaluation_agrees_with_the_batched_values(tiny_pricing):
    panel, cfg = tiny_pricing["panel"], PricingConfig()
    target = np.clip(np.full(panel.n, -0.05), panel.low, panel.high)
    path = capped_paths(target[None], 3, cfg.step)[0]
    result = evaluate(panel, path, cfg)
    values = path_values(panel, path[None], cfg)[0]
    historical, _ = historical_values(panel, cfg)
    assert result["lift"] == pytest.approx(values.sum() / historical.sum() - 1, rel=1e-6)
    assert result["interval"][0] <= result["lift"] <= result["interval"][1] + 1e-9
    assert result["violations"] == 0


def test_the_static_search_never_loses_to_regular_prices(tiny_pricing):
    panel, cfg = tiny_pricing["panel"], PricingConfig()
    path = static_path(panel, cfg, grid=3)
    regular = evaluate(panel, np.zeros((3, panel.n)), cfg)["lift"]
    assert evaluate(panel, path, cfg)["lift"] >= regular - 1e-12
    assert violations(panel, path, cfg) == 0


def test_the_myopic_optimiser_improves_each_week_within_the_constraints(tiny_pricing):
    panel, cfg = tiny_pricing["panel"], PricingConfig()
    path = myopic_path(panel, cfg)
    assert violations(panel, path, cfg) == 0
    # Each week is at least as good as keeping last week's prices (the first: regular ones).
    before = np.vstack([np.zeros(panel.n), path[:-1]])
    stay = path_values(panel, before[None], cfg)[0]
    assert (path_values(panel, path[None], cfg)[0] >= stay - 1e-9 * np.abs(stay)).all()


def test_ppo_is_seeded_and_stays_within_the_constraints(tiny_pricing):
    panel, cfg = tiny_pricing["panel"], PricingConfig()
    a = ppo_path(train_ppo(panel, cfg, seed=3, timesteps=96), panel, cfg)
    b = ppo_path(train_ppo(panel, cfg, seed=3, timesteps=96), panel, cfg)
    np.testing.assert_array_equal(a[0], b[0])
    assert violations(panel, a[0], cfg) == 0 and a[1] >= 0


def test_ppo_writes_nothing_to_the_temp_dir(tiny_pricing, tmp_path, monkeypatch):
    # SB3's default logger makes an SB3-<time> folder under the temp dir on every learn().
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    panel, cfg = tiny_pricing["panel"], PricingConfig()
    train_ppo(panel, cfg, seed=3, timesteps=48)
    assert list(tmp_path.iterdir()) == []

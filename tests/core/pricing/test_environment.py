"""The constrained pricing environment: Gymnasium's contract, constraints by construction, and
an episode's return equal to the lift ``evaluate`` reports."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retailsim_core.pricing.environment import ConstrainedPricingEnv, PricingConfig
from retailsim_core.pricing.policies import evaluate, violations


def test_the_environment_passes_gymnasiums_checker(tiny_pricing):
    env = ConstrainedPricingEnv(tiny_pricing["panel"])
    check_env(env, skip_render_check=True)
    assert env.horizon == 3


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_no_action_can_break_a_constraint_and_asking_is_counted(tiny_pricing, data):
    panel = tiny_pricing["panel"]
    cfg = PricingConfig(max_change=0.1)
    env = ConstrainedPricingEnv(panel, cfg)
    env.reset(seed=0)
    done, path, asked = False, [], 0
    while not done:
        action = np.array(data.draw(st.lists(st.floats(-3, 3), min_size=panel.n, max_size=panel.n)))
        before = env._log_m.copy()
        _, _, done, _, info = env.step(action)
        wanted = before + np.clip(action, -1, 1) * cfg.step
        outside = (wanted < panel.low - 1e-12) | (wanted > panel.high + 1e-12)
        asked += int(((np.abs(action) > 1) | outside).sum())
        path.append(info["log_multipliers"])
    assert violations(panel, np.stack(path), cfg) == 0
    assert env.attempted == asked


def test_an_episodes_return_is_the_lift_vs_historical_prices(tiny_pricing):
    panel = tiny_pricing["panel"]
    for objective in ("margin", "revenue"):
        cfg = PricingConfig(objective=objective)
        env = ConstrainedPricingEnv(panel, cfg)
        env.reset(seed=0)
        rng = np.random.default_rng(1)
        total, path, done = 0.0, [], False
        while not done:
            _, reward, done, _, info = env.step(rng.uniform(-1, 1, panel.n).astype(np.float32))
            total += reward
            path.append(info["log_multipliers"])
        assert total == pytest.approx(evaluate(panel, np.stack(path), cfg)["lift"], rel=1e-6)


def test_a_penalty_needs_a_second_simulator_and_lowers_the_reward(tiny_pricing):
    panel = tiny_pricing["panel"]
    with pytest.raises(ValueError, match="second simulator"):
        ConstrainedPricingEnv(panel, PricingConfig(penalty=1.0))
    plain = ConstrainedPricingEnv(panel, PricingConfig(), second=panel)
    penalised = ConstrainedPricingEnv(panel, PricingConfig(penalty=1.0), second=panel)
    for env in (plain, penalised):
        env.reset(seed=0)
    action = np.full(panel.n, 0.5, dtype=np.float32)
    # The same simulator twice never disagrees: no penalty.
    assert plain.step(action)[1] == pytest.approx(penalised.step(action)[1])

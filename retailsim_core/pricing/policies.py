"""Pricing policies on a category's panel, and their evaluation on any simulator (design §7.3).

Every policy yields a *price path*, (W, n) log multipliers on the regular prices, found by
interacting with the training simulator only; a path is then judged on any panel of the same
weeks and products (the training simulator, or a held-out one it never saw) by ``evaluate``.

- ``static_path``: the best constant multiplier per product, by coordinate ascent over a grid of
  the allowed range (the path moves toward it at the change cap, as the environment allows);
- ``myopic_path``: each week, projected gradient ascent on that week's value; the gradient is
  the model's Jacobian elasticities contracted with the products' margins (autograd, as
  ``/v1/elasticities``);
- ``ppo_path``: stable-baselines3 PPO on ``ConstrainedPricingEnv``, then its deterministic
  rollout (``train_ppo`` returns the agent for its weights).

Glossary: W weeks, n products, K candidate price vectors, G grid points.
"""

from __future__ import annotations

import numpy as np
import torch

from retailsim_core.pricing.environment import (
    ConstrainedPricingEnv,
    PricingConfig,
    week_values,
)
from retailsim_core.pricing.panel import PricingPanel


def capped_paths(targets: np.ndarray, weeks: int, step: float) -> np.ndarray:
    """(K, W, n) paths from the regular prices toward constant targets (K, n), each week moving
    at most ``step`` in log price."""
    reach = step * np.arange(1, weeks + 1)[None, :, None]  # (1, W, 1)
    return np.clip(targets[:, None, :], -reach, reach)


@torch.no_grad()
def path_values(panel: PricingPanel, paths: np.ndarray, cfg: PricingConfig) -> np.ndarray:
    """(K, W) objective value of each week under K paths (K, W, n)."""
    out = np.zeros(paths.shape[:2])
    for w in range(len(panel.weeks)):
        units = panel.units_many(w, torch.as_tensor(paths[:, w])).numpy()  # (K, n)
        out[:, w], _ = week_values(units, np.exp(paths[:, w]), panel.regular_price, cfg)
    return out


def static_path(
    panel: PricingPanel, cfg: PricingConfig, grid: int = 7, sweeps: int = 1
) -> np.ndarray:
    """(W, n) the best static multipliers' path: for each product in turn (by historical units),
    the grid point of its allowed range that maximises the episode's value, the others held."""
    weeks = len(panel.weeks)
    target = np.zeros(panel.n)
    order = np.argsort(-sum(p.historical_units.numpy() for p in panel.panels), kind="stable")
    best = path_values(panel, capped_paths(target[None], weeks, cfg.step), cfg).sum()
    for _ in range(sweeps):
        for i in order:
            points = np.unique(np.r_[np.linspace(panel.low[i], panel.high[i], grid), 0.0])
            candidates = np.repeat(target[None], len(points), 0)
            candidates[:, i] = points
            totals = path_values(panel, capped_paths(candidates, weeks, cfg.step), cfg).sum(1)
            if totals.max() > best + 1e-9 * abs(best):
                best, target = float(totals.max()), candidates[int(totals.argmax())]
    return capped_paths(target[None], weeks, cfg.step)[0]


def myopic_path(panel: PricingPanel, cfg: PricingConfig, iterations: int = 4) -> np.ndarray:
    """(W, n) each week's prices by projected gradient ascent on that week's value, within the
    change cap around last week's and the allowed range; the best point seen is kept, so a week
    is never worse than staying at last week's prices."""
    env = ConstrainedPricingEnv(panel, cfg)
    cost = torch.as_tensor(panel.regular_price * cfg.cost_share)
    regular = torch.as_tensor(panel.regular_price)
    log_m, path = np.zeros(panel.n), []
    for w in range(len(panel.weeks)):
        lo = np.maximum(log_m - cfg.step, panel.low)
        hi = np.minimum(log_m + cfg.step, panel.high)
        x, best, best_value = log_m.copy(), log_m.copy(), -np.inf
        for i in range(iterations + 1):
            t = torch.as_tensor(x, dtype=torch.float64).requires_grad_(True)
            price = regular * torch.exp(t)
            unit_value = price - cost if cfg.objective == "margin" else price
            value = (panel.units(w, t) * unit_value).sum()
            if value.item() > best_value:
                best, best_value = x.copy(), value.item()
            if i == iterations:
                break
            (grad,) = torch.autograd.grad(value, t)
            x = np.clip(x + cfg.step / iterations * np.sign(grad.numpy()), lo, hi)
        log_m, _ = env.move(log_m, (best - log_m) / cfg.step)
        path.append(log_m)
    return np.stack(path)


def train_ppo(
    panel: PricingPanel,
    cfg: PricingConfig,
    seed: int,
    timesteps: int,
    second: PricingPanel | None = None,
):
    """A PPO agent trained on the panel's environment (seeded; CPU)."""
    from stable_baselines3 import PPO  # imported here: only pricing runs need it
    from stable_baselines3.common.logger import Logger

    env = ConstrainedPricingEnv(panel, cfg, second)
    horizon = env.horizon
    agent = PPO(
        "MlpPolicy",
        env,
        n_steps=16 * horizon,  # whole episodes per update
        batch_size=4 * horizon,
        learning_rate=3e-4,
        gamma=1.0,  # the return is the episode's lift: no discounting
        seed=seed,
        device="cpu",
        verbose=0,
    )
    # SB3's default logger makes an empty folder under the temp dir per run: log nowhere.
    agent.set_logger(Logger(folder=None, output_formats=[]))
    agent.learn(total_timesteps=timesteps)
    return agent


def ppo_path(agent, panel: PricingPanel, cfg: PricingConfig) -> tuple[np.ndarray, int]:
    """(W, n) the agent's deterministic rollout on the panel, and its attempted violations."""
    env = ConstrainedPricingEnv(panel, cfg)
    obs, _ = env.reset(seed=0)
    path, done = [], False
    while not done:
        action, _ = agent.predict(obs, deterministic=True)
        obs, _, done, _, info = env.step(action)
        path.append(info["log_multipliers"])
    return np.stack(path), env.attempted


def evaluate(
    panel: PricingPanel, path: np.ndarray, cfg: PricingConfig, draws: int = 200, seed: int = 0
) -> dict:
    """A path (W, n) judged on a panel: lift of the objective vs the historical prices of the
    same weeks, with a 95% interval from resampling each week's contexts; the revenue's week to
    week coefficient of variation (policy, historical, and their weekly ratio); violations of
    the range and cap."""
    x = np.stack([_context_values(panel, w, path[w], cfg) for w in range(len(path))])  # (W, B, 4)
    weeks, b = x.shape[:2]
    picks = np.random.default_rng(seed).integers(0, b, size=(draws, weeks, b))
    drawn = np.take_along_axis(x[None, ..., :2], picks[..., None], 2).sum((1, 2))  # (draws, 2)
    totals = x.sum(1)  # (W, 4): value, historical value, revenue, historical revenue
    return {
        "lift": float(totals[:, 0].sum() / totals[:, 1].sum() - 1),
        "interval": [float(q) for q in np.quantile(drawn[:, 0] / drawn[:, 1] - 1, [0.025, 0.975])],
        "revenue_cv": variation(totals[:, 2]),
        "historical_revenue_cv": variation(totals[:, 3]),
        # The policy's own effect on stability: weekly revenue relative to the same week's at
        # historical prices, free of the weeks' differing demand (the design's < 8%).
        "revenue_ratio_cv": variation(totals[:, 2] / np.maximum(totals[:, 3], 1e-12)),
        "violations": violations(panel, path, cfg),
    }


def violations(panel: PricingPanel, path: np.ndarray, cfg: PricingConfig) -> int:
    """Product-weeks outside the allowed range or moving more than the cap from the week
    before (the first week from the regular price)."""
    tol = 1e-9
    moves = np.abs(np.diff(np.vstack([np.zeros(panel.n), path]), axis=0))
    outside = (path < panel.low - tol) | (path > panel.high + tol)
    return int((outside | (moves > cfg.step + tol)).sum())


@torch.no_grad()
def _context_values(panel: PricingPanel, w: int, log_m: np.ndarray, cfg: PricingConfig):
    """(B, 4) each context's objective value and revenue under ``log_m`` and under the
    historical shelf: value, historical value, revenue, historical revenue."""
    p = panel.panels[w]
    units = panel.context_units(w, torch.as_tensor(log_m)).numpy()  # (B, n)
    policy, revenue = week_values(units, np.exp(log_m), panel.regular_price, cfg)
    hist, hist_revenue = week_values(
        p.context_units.numpy(), p.context_multiplier.numpy(), panel.regular_price, cfg
    )
    return np.stack([policy, hist, revenue, hist_revenue], -1)


def variation(x: np.ndarray) -> float:
    """Coefficient of variation (std / |mean|)."""
    return float(np.std(x) / max(abs(np.mean(x)), 1e-12))

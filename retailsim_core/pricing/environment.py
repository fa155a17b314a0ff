"""A constrained Gymnasium environment over a category's pricing panel (design §7.3, §7.4).

One episode is the panel's weeks, one step one week. The action a in [-1, 1]^n moves each
product's log price multiplier by a x log(1 + max_change) from last week's; the result is
projected into the product's allowed range (observed in the training weeks, and the optional
margin floor), so a constraint can never be violated: a step that asked for more counts as an
*attempted* violation (``info["attempted"]``). The episode starts at the regular prices.

Reward: the week's margin (or revenue) under the policy minus under the historical prices of
the same week, over the historical total of the episode, so an episode's return is the lift vs
historical prices. Observation: [week fraction, current log multipliers, each product's share of
the category's expected units]. With a ``second`` panel (the held-out simulator) and a
``penalty`` weight, the reward loses penalty x |the two simulators' week values' difference|
(the uncertainty penalty; such a policy has seen the second simulator's answers).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from retailsim_core.pricing.panel import PricingPanel


@dataclass(frozen=True)
class PricingConfig:
    max_change: float = 0.10  # largest week-to-week price change, as a share of the price
    objective: str = "margin"  # "margin" | "revenue"
    cost_share: float = 0.7  # unit cost / regular price: a grocery gross margin of about 30%
    floor_markup: float | None = None  # price >= cost x (1 + floor_markup) when set
    penalty: float = 0.0  # weight of the two simulators' disagreement (needs ``second``)

    @property
    def step(self) -> float:
        return float(np.log1p(self.max_change))


def week_values(
    units: np.ndarray, multiplier: np.ndarray, regular: np.ndarray, cfg: PricingConfig
) -> tuple[np.ndarray, np.ndarray]:
    """(objective value, revenue) of units (..., n) sold at regular x multiplier (..., n), summed
    over the products."""
    revenue = units * regular * multiplier
    cost = units * regular * cfg.cost_share
    value = revenue - cost if cfg.objective == "margin" else revenue
    return value.sum(-1), revenue.sum(-1)


def historical_values(panel: PricingPanel, cfg: PricingConfig) -> tuple[np.ndarray, np.ndarray]:
    """(W,) objective value and revenue of every week at the historical shelf."""
    units = np.stack([p.historical_units.numpy() for p in panel.panels])
    multiplier = np.stack([p.historical_multiplier.numpy() for p in panel.panels])
    return week_values(units, multiplier, panel.regular_price, cfg)


class ConstrainedPricingEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(
        self,
        panel: PricingPanel,
        cfg: PricingConfig = PricingConfig(),
        second: PricingPanel | None = None,
    ):
        super().__init__()
        if cfg.penalty and second is None:
            raise ValueError("an uncertainty penalty needs a second simulator (second=...)")
        self.panel, self.cfg, self.second = panel, cfg, second
        n = panel.n
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(n,), dtype=np.float32)
        self.observation_space = gym.spaces.Box(
            -np.inf, np.inf, shape=(1 + 2 * n,), dtype=np.float32
        )
        self.historical, _ = historical_values(panel, cfg)
        self.total = max(abs(float(self.historical.sum())), 1e-12)
        self._week, self._log_m, self._share = 0, np.zeros(n), np.zeros(n)
        self.attempted = 0  # attempted violations since the last reset

    @property
    def horizon(self) -> int:
        return len(self.panel.weeks)

    def move(self, log_m: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, int]:
        """Next log multipliers from the current ones and an action, and how many product moves
        asked for more than the constraints allow (an action outside [-1, 1] or a price outside
        the allowed range; each product move counts once)."""
        action = np.asarray(action, dtype=np.float64)
        inside = np.clip(action, -1.0, 1.0)
        wanted = log_m + inside * self.cfg.step
        new = np.clip(wanted, self.panel.low, self.panel.high)
        outside = (wanted < self.panel.low - 1e-12) | (wanted > self.panel.high + 1e-12)
        attempted = int(((inside != action) | outside).sum())  # product moves, each once
        return new, attempted

    def _obs(self) -> np.ndarray:
        week = self._week / self.horizon
        return np.concatenate([[week], self._log_m, self._share]).astype(np.float32)

    @torch.no_grad()
    def _week_value(
        self, panel: PricingPanel, log_m: np.ndarray
    ) -> tuple[float, float, np.ndarray]:
        units = panel.units(self._week, torch.as_tensor(log_m)).numpy()
        value, revenue = week_values(units, np.exp(log_m), panel.regular_price, self.cfg)
        return float(value), float(revenue), units

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._week, self._log_m, self.attempted = 0, np.zeros(self.panel.n), 0
        units = self.panel.panels[0].historical_units.numpy()
        self._share = units / max(units.sum(), 1e-12)
        return self._obs(), {}

    def step(self, action):
        self._log_m, attempted = self.move(self._log_m, action)
        self.attempted += attempted
        value, revenue, units = self._week_value(self.panel, self._log_m)
        reward = (value - self.historical[self._week]) / self.total
        info = {"value": value, "revenue": revenue, "attempted": attempted}
        if self.second is not None:
            info["second_value"], _, _ = self._week_value(self.second, self._log_m)
            reward -= self.cfg.penalty * abs(value - info["second_value"]) / self.total
        self._share = units / max(units.sum(), 1e-12)
        info["log_multipliers"] = self._log_m.copy()
        self._week += 1
        return self._obs(), float(reward), self._week >= self.horizon, False, info

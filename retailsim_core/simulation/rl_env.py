"""A Gymnasium environment over the world model (design §7.3): price a category, week by week.

Each step is one week: the action is a vector of log price changes for the category's products
(bounded by ``max_change``); the simulator returns the expected units of every product for a
fixed panel of shopping contexts (``simulation.expected_units``), and the reward is the
category's expected revenue (or margin, with unit costs) relative to the unchanged prices.
Observation: [week fraction, current log multipliers, each product's share of category units].
The panel and the model are fixed, so an episode is deterministic given its actions; ``reset``
draws nothing random, but takes a seed as Gymnasium requires.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from retailsim_core.models.world_model import WorldModel
from retailsim_core.simulation.simulate import expected_units
from retailsim_core.training_data.batch import Batch


class CategoryPricingEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(
        self,
        model: WorldModel,
        batch: Batch,
        basket_size: torch.Tensor,
        products: np.ndarray,
        prices: np.ndarray,
        unit_cost: np.ndarray | None = None,
        horizon: int = 8,
        max_change: float = 0.3,
    ):
        super().__init__()
        self.model, self.batch, self.size = model.train(False), batch, basket_size
        self.products = torch.as_tensor(np.asarray(products), dtype=torch.long)
        self.prices = torch.as_tensor(np.asarray(prices, dtype=np.float64))  # (n,) regular prices
        self.cost = (
            None if unit_cost is None else torch.as_tensor(np.asarray(unit_cost, dtype=np.float64))
        )
        self.horizon, self.max_change = horizon, max_change
        n = len(self.products)
        self.action_space = gym.spaces.Box(-max_change, max_change, shape=(n,), dtype=np.float32)
        self.observation_space = gym.spaces.Box(
            -np.inf, np.inf, shape=(1 + 2 * n,), dtype=np.float32
        )
        self.baseline = self._value(torch.zeros(n))[0]
        self._week, self._log_m, self._share = 0, np.zeros(n), np.zeros(n)

    @torch.no_grad()
    def _value(self, log_m: torch.Tensor) -> tuple[float, np.ndarray]:
        full = torch.zeros(self.model.vocab_size)
        full[self.products] = log_m.float()
        units = expected_units(self.model, self.batch, self.size, full)[self.products].double()
        price = self.prices * torch.exp(log_m.double())
        value = units * (price - (self.cost if self.cost is not None else 0.0))
        return float(value.sum()), (units / units.sum().clamp(min=1e-12)).numpy()

    def _obs(self) -> np.ndarray:
        return np.concatenate([[self._week / self.horizon], self._log_m, self._share]).astype(
            np.float32
        )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._week, self._log_m = 0, np.zeros(len(self.products))
        _, self._share = self._value(torch.zeros(len(self.products)))
        return self._obs(), {"baseline": self.baseline}

    def step(self, action):
        action = np.clip(np.asarray(action, dtype=np.float64), -self.max_change, self.max_change)
        self._log_m = action
        value, self._share = self._value(torch.as_tensor(action))
        self._week += 1
        reward = (value - self.baseline) / max(abs(self.baseline), 1e-12)
        return (
            self._obs(),
            float(reward),
            self._week >= self.horizon,
            False,
            {"value": value, "baseline": self.baseline},
        )

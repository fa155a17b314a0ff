"""A price path judged by the generator's planted demand (synthetic data only; D89).

The oracle knows the true response: each test basket's planted context (customer, store,
mission focus, price mode, size) and the demand model the baskets were drawn from
(``synth.demand``: a product's weight in its slot is (price / regular) ** (elasticity x k_mode),
and a slot's pull is the sum of its members'). A path's price multipliers replace the planted
promotion depths of the category's products in every region (depth = 1 - multiplier, so a rise
is a negative depth); units are the planted probabilities that each basket holds each product
times the planted stock-up of a cut (a line below its regular price holds more units, D132).
The mailer's traffic is not judged: a path sets prices, the plan's mailer is the retailer's.
The lift is the objective under the path over the objective at the planted historical prices,
with the same money (regular prices, unit costs) as the simulator's figures.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl

from retailsim_core.pricing.environment import PricingConfig, week_values
from retailsim_core.synth.oracle import purchase_probabilities, week_demand
from retailsim_core.synth.plan_response import units_multiplier
from retailsim_core.synth.world import PlantedTruth


class PlantedDemand:
    """The planted units of a category's products for one panel's contexts."""

    def __init__(self, truth: PlantedTruth, weekly_samples: list[pl.DataFrame], product_ids):
        self.world = truth.world
        codes = {c: i for i, c in enumerate(self.world.catalogue.product_code)}
        self.index = np.array([codes[p] for p in product_ids])  # (n,) catalogue rows
        self.contexts = [truth.context(s) for s in weekly_samples]

    def units(self, week: int, ctx: pl.DataFrame, multiplier: np.ndarray | None) -> np.ndarray:
        """(B, n) planted expected units: the probability that each basket holds each product
        times the planted stock-up at its price (units per line relative to the drawn units,
        ``plan_response.units_multiplier``); ``multiplier`` (n,) the path's prices / regular
        (None: the planted historical prices, each basket at its own region's)."""
        world = self.world
        if multiplier is None:
            regions = world.catalogue.store_region[ctx["store_idx"].to_numpy()]
            ratio = 1.0 - world.prices.depth[week][self.index][:, regions].T.astype(np.float64)
        else:
            ratio = np.broadcast_to(multiplier, (ctx.height, len(self.index)))
        if multiplier is not None:
            depth = world.prices.depth[week].astype(np.float64).copy()  # (P, R)
            depth[self.index] = 1.0 - multiplier[:, None]
            prices = dataclasses.replace(world.prices, depth={week: depth})
            world = dataclasses.replace(world, prices=prices)
        probs = purchase_probabilities(
            world,
            week,
            ctx["customer_idx"].to_numpy(),
            ctx["store_idx"].to_numpy(),
            ctx["mission_focus"].to_list(),
            ctx["price_mode"].to_list(),
            ctx["basket_size"].to_list(),
            week_demand(world, week),
        )
        return probs[:, self.index] * units_multiplier(self.world, ratio)

    def lift(
        self, weeks: list[int], path: np.ndarray, regular: np.ndarray, cfg: PricingConfig
    ) -> float:
        """The objective's lift of a path (W, n) vs the planted historical prices."""
        policy = historical = 0.0
        for w, (week, ctx) in enumerate(zip(weeks, self.contexts, strict=True)):
            m = np.exp(path[w])
            policy += float(week_values(self.units(week, ctx, m), m, regular, cfg)[0].sum())
            # Each basket at its own region's planted price.
            regions = self.world.catalogue.store_region[ctx["store_idx"].to_numpy()]
            depth = self.world.prices.depth[week][self.index].astype(np.float64)  # (n, R)
            hist_m = 1.0 - depth[:, regions].T  # (B, n)
            historical += float(
                week_values(self.units(week, ctx, None), hist_m, regular, cfg)[0].sum()
            )
        return policy / historical - 1.0

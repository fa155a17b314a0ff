"""A category's pricing panel (design §7.3): what a pricing policy acts on and is judged by.

For each test week a seeded sample of that week's baskets gives the contexts (customer history,
store, week). Prices enter the world model only through the shelf (D39), so each week's decoder
output is computed once; a price vector then costs the scoring of the category's columns of one
slot (``slot_cache``). A policy's
prices are one log multiplier per category product on the product's *regular* shelf price, the
same at every store; other categories stay at their historical shelf, display and mailer at the
plan. The historical prices are the stores' own shelf of the week, promotions included
(multiplier 1 - depth per context), so they are not a point of the policy's action space (D89).

Units are the chance each basket holds the product (``simulation.held`` of the expected basket
size and the first-slot probability, as ``simulation.expected_units``) times the units a line
holds at that price (``UnitsPerLine``, the quantity model's stock-up, where the demand forecast
has fitted one, D133): the trips and their sizes are fixed, the choice and the units per line
respond.

Glossary: W weeks, B contexts of a week, V vocabulary, S shelf features, n category products.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import polars as pl
import torch

from retailsim_core.counterfactual.simulate import held, mean_size
from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.shelf import SHELF_FEATURES
from retailsim_core.models.world_model import WorldModel
from retailsim_core.pricing.slot_cache import SlotCache, build_cache, slot_probs

_DEPTH = SHELF_FEATURES.index("discount_depth")
RANGE_QUANTILE = 0.05  # the allowed range: paid prices between these quantiles of the observed
CATEGORY_PRICES_SCHEMA = pl.Schema(  # one row per priced product (``category_prices``)
    {
        "product_id": pl.String,
        "regular_price": pl.Float64,  # median regular (base) price of its observed cells
        "low": pl.Float64,  # 5th percentile of the paid prices / regular price
        "high": pl.Float64,  # 95th percentile of the paid prices / regular price
        "revenue": pl.Float64,  # paid price x units over the cells
    }
)


def category_prices(cells: pl.LazyFrame) -> pl.LazyFrame:
    """Each product's regular price and observed price range (the central 90% of its paid
    prices) from ``derived_prices`` cells observed in the training weeks (product_id,
    actual_price, base_price, units)."""
    return (
        cells.filter(pl.col("actual_price") > 0, pl.col("base_price") > 0)
        .group_by("product_id")
        .agg(
            pl.col("base_price").median().alias("regular_price"),
            # The central 90% of the paid prices: a product's extreme cells are mostly data
            # errors and other pack sizes (real LGSR: up to 13.7 x the regular price).
            pl.col("actual_price").quantile(RANGE_QUANTILE).alias("lowest"),
            pl.col("actual_price").quantile(1 - RANGE_QUANTILE).alias("highest"),
            (pl.col("actual_price") * pl.col("units")).sum().cast(pl.Float64).alias("revenue"),
        )
        .select(
            "product_id",
            "regular_price",
            (pl.col("lowest") / pl.col("regular_price")).alias("low"),
            (pl.col("highest") / pl.col("regular_price")).alias("high"),
            "revenue",
        )
        .cast(dict(CATEGORY_PRICES_SCHEMA))
        .sort("product_id")
    )


@dataclass(frozen=True)
class WeekPanel:
    cache: SlotCache  # the contexts' first slot at the historical shelf (slot_cache)
    size: torch.Tensor  # (B,) expected basket sizes (size head)
    context_units: torch.Tensor  # (B, n) each context's expected units at the historical shelf
    context_multiplier: torch.Tensor  # (B, n) each context's historical price / regular price

    @property
    def historical_units(self) -> torch.Tensor:
        """(n,) expected units at the historical shelf."""
        return self.context_units.sum(0)

    @property
    def historical_multiplier(self) -> torch.Tensor:
        """(n,) units-weighted mean historical price / regular price: units x this is the
        historical revenue / regular price."""
        units = self.context_units
        return (units * self.context_multiplier).sum(0) / units.sum(0).clamp(min=1e-12)


@dataclass(frozen=True)
class UnitsPerLine:
    """Units a line holds at a price: 1 + (mean - 1) · m^b, the quantity model's stock-up
    (D117) at price multiplier m of the regular price, from the product's mean units per line
    (``mean``) and the model's elasticity ``b`` of the units beyond the first (D133)."""

    mean: np.ndarray  # (n,) mean units per line before the test weeks
    elasticity: float  # b: the quantity model's coefficient on the log price index

    def at(self, log_m: torch.Tensor) -> torch.Tensor:
        """(..., n) units per line at log multipliers ``log_m`` (..., n); differentiable."""
        extra = torch.as_tensor(self.mean, dtype=torch.float64).clamp(min=0.0) - 1.0
        return 1.0 + extra.clamp(min=0.0) * torch.exp(self.elasticity * log_m.double())


@dataclass(frozen=True)
class PricingPanel:
    model: WorldModel
    weeks: tuple[int, ...]
    panels: tuple[WeekPanel, ...]
    products: torch.Tensor  # (n,) tokens of the priced products
    regular_price: np.ndarray  # (n,) money
    low: np.ndarray  # (n,) lowest allowed log multiplier
    high: np.ndarray  # (n,) highest allowed log multiplier
    per_line: UnitsPerLine | None = None  # None: a line holds one unit at any price

    @property
    def n(self) -> int:
        return len(self.products)

    def units(self, week: int, log_m: torch.Tensor) -> torch.Tensor:
        """(n,) expected units of the priced products in week index ``week`` when their prices
        are regular x exp(log_m) (n,) at every store; differentiable in ``log_m``."""
        return self.units_many(week, log_m[None])[0]

    def units_many(self, week: int, log_m: torch.Tensor) -> torch.Tensor:
        """(K, n) expected units for K price vectors (K, n), scored in one batch."""
        return self.context_units_many(week, log_m).sum(1)

    def context_units(self, week: int, log_m: torch.Tensor) -> torch.Tensor:
        """(B, n) each context's expected units under one price vector (n,)."""
        return self.context_units_many(week, log_m[None])[0]

    def context_units_many(self, week: int, log_m: torch.Tensor) -> torch.Tensor:
        """(K, B, n) each context's expected units under K price vectors (K, n): the cost grows
        with the category's columns, not with the vocabulary (``slot_cache``)."""
        p = self.panels[week]
        units = held(p.size.double()[None, :, None], slot_probs(self.model, p.cache, log_m))
        return units if self.per_line is None else units * self.per_line.at(log_m)[:, None, :]


@torch.no_grad()
def week_panel(model: WorldModel, batch: Batch, products: torch.Tensor) -> WeekPanel:
    """Score a week's contexts once at their historical shelf."""
    model.train(False)
    out, log_p = model.next_basket(batch)
    size = mean_size(out.size_logits)  # (B,)
    units = held(size[:, None], log_p[:, products].double().exp())  # (B, n)
    shelf = batch["shelf"]
    multiplier = 1 - shelf[:, products, _DEPTH].double()  # (B, n) historical price / regular
    return WeekPanel(build_cache(model, out, shelf, products), size.float(), units, multiplier)


def build_panel(
    model: WorldModel,
    weeks: list[int],
    batches: list[Batch],
    products: np.ndarray,
    prices: pl.DataFrame,
    floor_markup: float | None = None,
    cost_share: float = 0.7,
    per_line: UnitsPerLine | None = None,
) -> PricingPanel:
    """A panel of ``weeks`` from each week's context batch; ``products`` (n,) tokens in the
    order of ``prices`` (``CATEGORY_PRICES_SCHEMA`` rows). The allowed range is the observed one
    (training weeks); with ``floor_markup`` the price also stays >= cost x (1 + floor_markup),
    cost = ``cost_share`` x regular price. The range always holds the regular price (the
    episode's start). ``per_line``: the units a line holds at each price (None: one)."""
    tokens = torch.tensor(
        np.asarray(products), dtype=torch.long
    )  # a copy: polars arrays are read-only
    low = np.log(prices["low"].to_numpy().clip(1e-3, 1.0))
    high = np.log(prices["high"].to_numpy().clip(1.0, None))
    if floor_markup is not None:
        low = np.maximum(low, min(np.log(cost_share * (1 + floor_markup)), 0.0))
    panels = tuple(week_panel(model, b, tokens) for b in batches)
    if per_line is not None:  # the historical baskets' lines at their own shelf's prices
        panels = tuple(
            replace(p, context_units=p.context_units * per_line.at(p.context_multiplier.log()))
            for p in panels
        )
    return PricingPanel(
        model=model,
        weeks=tuple(weeks),
        panels=panels,
        products=tokens,
        regular_price=prices["regular_price"].to_numpy().copy(),  # writable
        low=low,
        high=high,
        per_line=per_line,
    )

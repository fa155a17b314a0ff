"""An empirical-Bayes start for the product responses to promotions (decisions D87, D88).

A display or mailer flag is on a few percent of a store-week's shelf, so each product's
gradient on its display response is a rare positive spike among small negatives, and Adam
moves such a weight little in a CPU budget: started near zero, the responses stayed there. They
start instead where the training weeks put them. On the training weeks' panel (every week of
each product × store's span, zero-sale weeks counted; D76), a product's display (mailer) rate
ratio is its units in displayed weeks over the units its stores sell in their unpromoted weeks,
shrunk toward its category's and the category's toward the overall one (gamma-Poisson, a prior
of ``PSEUDO_UNITS`` expected units). Its log is the logit shift that multiplies a small choice
probability by that ratio: the model's scale. (Lifts of log(units + 1), the hierarchical
baseline's scale, are compressed where units are a few per store-week, and started the
responses at a tenth of the observed lift.) Training then moves them like any weight.

The own-depth response starts the same way (D88): a product's rate ratio in the store-weeks the
other stores of its region showed it cut (the shelf's leave-one-store-out depth, D45) over its
unpromoted weeks, as a logit shift per unit of depth (log ratio / mean depth). Learned from
scratch, that response ranked the planted elasticities at Spearman 0.49 where the training
weeks' own rate ratios rank them at 0.74: a promoted store-week is a sparse spike here too.

Only the training weeks are read.

Glossary: V vocabulary, K categories.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from retailsim_core.evaluation.promotion_events import (
    CELL,
    PROMOTIONS_SCHEMA,
    basket_sales,
    sales_panel,
    table_promotions,
)
from retailsim_core.models.heads import POOLED_RESPONSES, PRODUCT_RESPONSES, PriceResponse

PLAN_RESPONSES = ("display", "mailer")
PRICE_KIND = "price"  # ``regional_promotions``' kind: a cut the region's other stores showed
FLOOR = 0.01  # a response is >= 0 by construction; a negative or zero lift starts here
PSEUDO_UNITS = 10.0  # expected units of prior weight pulling a product toward its category
_MEAN_DEPTH = pl.col("on_depth") / pl.col("on_weeks")  # kinds without a depth: meaningless


def plan_lifts(
    trips: pl.DataFrame, plan: pl.DataFrame, vocab: pl.DataFrame, categories: np.ndarray
) -> np.ndarray | None:
    """(V, 2) each token's display and mailer lift (log units) over the weeks of ``trips``
    (the training weeks' trip store: basket_id, store_id, week, products) and ``plan``
    (``SOURCE_PROMOTIONS_SCHEMA`` cells of those weeks); ``vocab``: product_id, token;
    ``categories`` (V,) code per token. None where the plan promotes nothing sold."""
    depths = pl.LazyFrame(schema=PROMOTIONS_SCHEMA).select(*CELL, "depth")
    panel = _panel(trips, table_promotions(plan.lazy(), depths))
    if not panel["promo"].any():
        return None
    category = _categories(vocab, categories)
    out = np.zeros((len(categories), len(PLAN_RESPONSES)))
    for j, kind in enumerate(PLAN_RESPONSES):
        ratio = rate_ratios(panel, category, kind, PSEUDO_UNITS)
        out[:, j] = np.log(_per_token(ratio, vocab, categories)[0])
    return out


def depth_responses(
    trips: pl.DataFrame, promotions: pl.LazyFrame, vocab: pl.DataFrame, categories: np.ndarray
) -> np.ndarray | None:
    """(V,) each token's own-depth response: its log rate ratio on a price cut per unit of mean
    depth (a logit shift per unit of depth, the model's scale), over the weeks of ``trips``
    (as in ``plan_lifts``) and ``promotions`` (``PROMOTIONS_SCHEMA`` rows of kind "price" with
    a depth: ``regional_promotions`` of those weeks). None where nothing cut sold."""
    panel = _panel(trips, promotions.filter(pl.col("depth") > 0))
    if not panel["promo"].any():
        return None
    ratio = rate_ratios(panel, _categories(vocab, categories), PRICE_KIND, PSEUDO_UNITS, True)
    rates, depths = _per_token(ratio, vocab, categories)
    return np.log(rates) / depths


def _panel(trips: pl.DataFrame, promotions: pl.LazyFrame) -> pl.DataFrame:
    return sales_panel(basket_sales(trips, trips["basket_id"]), promotions).collect()


def _categories(vocab: pl.DataFrame, categories: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame(
        {"product_id": vocab["product_id"], "category": categories[vocab["token"].to_numpy()]}
    )


def _per_token(
    ratio: RateRatios, vocab: pl.DataFrame, categories: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(V,) rate ratio and (V,) mean depth of each token's product, else of its category, else
    the overall ones."""
    out = np.array([np.full(len(categories), ratio.overall), np.full(len(categories), ratio.depth)])
    known = ratio.by_category.join(
        pl.DataFrame({"category": categories, "token": np.arange(len(categories))}), on="category"
    )
    per_product = vocab.select("product_id", "token").join(ratio.by_product, on="product_id")
    for rows in (known, per_product):
        out[:, rows["token"].to_numpy()] = rows.select("ratio", "depth").to_numpy().T
    return out[0], out[1]


@dataclass(frozen=True)
class RateRatios:
    overall: float
    by_category: pl.DataFrame  # category, ratio, depth
    by_product: pl.DataFrame  # product_id, ratio, depth (mean over the promoted store-weeks)
    depth: float  # the overall mean depth


def rate_ratios(
    panel: pl.DataFrame,
    category: pl.DataFrame,
    kind: str,
    pseudo_units: float,
    per_depth: bool = False,
) -> RateRatios:
    """Units on ``kind`` (cells whose kind names it) against the units the product × store
    sells in its unpromoted weeks, as gamma-Poisson rate ratios: a product's (observed + m *
    prior) / (expected + m), its prior its category's ratio, the category's likewise toward the
    overall one, m = ``pseudo_units`` expected units; beside each ratio, the mean depth of its
    promoted store-weeks. ``per_depth``: the response is per unit of depth, so a prior ratio R
    of mean depth D becomes R ** (d / D) at the child's depth d. A log rate ratio is what a
    logit shift does to a small choice probability, the scale of the model's response."""
    on = pl.col("kind").str.contains(kind)
    per_store = (
        panel.group_by("product_id", "store_id")
        .agg(
            off_mean=pl.col("units").filter(~pl.col("promo")).mean(),
            observed=pl.col("units").filter(on).sum(),
            on_weeks=on.sum(),
            on_depth=pl.col("depth").filter(on).sum(),
        )
        .filter(pl.col("off_mean").is_not_null() & (pl.col("on_weeks") > 0))
        .with_columns(expected=pl.col("off_mean") * pl.col("on_weeks"))
    )
    sums = pl.col("observed", "expected", "on_weeks", "on_depth").sum()
    per_product = (
        per_store.group_by("product_id")
        .agg(sums)
        .join(category, on="product_id", how="left")
        .with_columns(pl.col("category").fill_null(-1), depth=_MEAN_DEPTH)
        .sort("product_id")
    )
    total = per_product.select(sums).row(0, named=True)
    overall = (total["observed"] + pseudo_units) / (total["expected"] + pseudo_units)
    depth = total["on_depth"] / total["on_weeks"] if total["on_weeks"] else float("nan")

    def shrunk(prior: pl.Expr, prior_depth: pl.Expr) -> pl.Expr:
        if per_depth:
            prior = prior ** (pl.col("depth") / prior_depth)
        return (pl.col("observed") + pseudo_units * prior) / (pl.col("expected") + pseudo_units)

    by_category = (
        per_product.group_by("category")
        .agg(sums)
        .with_columns(depth=_MEAN_DEPTH)
        .with_columns(ratio=shrunk(pl.lit(overall), pl.lit(depth)))
        .sort("category")
    )
    by_product = per_product.join(
        by_category.select("category", parent="ratio", parent_depth="depth"),
        on="category",
        how="left",
    ).select("product_id", ratio=shrunk(pl.col("parent"), pl.col("parent_depth")), depth="depth")
    return RateRatios(overall, by_category.select("category", "ratio", "depth"), by_product, depth)


@torch.no_grad()
def start_plan_responses(response: PriceResponse, lifts: np.ndarray) -> None:
    """Set the display and mailer responses to ``lifts`` (V, 2), floored at ``FLOOR``: each
    category's to the (lower) median of its products' lifts, each product's deviation to the
    rest."""
    raw = _softplus_inverse(lifts)  # (V, 2)
    category = response.category_of  # (V,)
    for j, name in enumerate(PLAN_RESPONSES):
        column, pooled = PRODUCT_RESPONSES.index(name), POOLED_RESPONSES.index(name)
        medians = (
            pl.DataFrame({"k": category.numpy(), "raw": raw[:, j].numpy()})
            .group_by("k")
            .agg(pl.col("raw").quantile(0.5, "lower"))
        )
        k = torch.tensor(medians["k"].to_numpy())
        response.raw_category_weights[k, pooled] = torch.tensor(medians["raw"].to_numpy())
        response.raw_product_weights[:, column] = (
            raw[:, j] - response.raw_category_weights[category, pooled]
        )


@torch.no_grad()
def start_depth_responses(response: PriceResponse, own: np.ndarray) -> None:
    """Set each product's own-depth response to ``own`` (V,), floored at ``FLOOR``."""
    column = PRODUCT_RESPONSES.index("discount_depth")
    response.raw_product_weights[:, column] = _softplus_inverse(own)


def _softplus_inverse(values: np.ndarray) -> torch.Tensor:
    """softplus^-1 of ``values`` floored at ``FLOOR`` (float32), stable for small values."""
    target = torch.from_numpy(np.maximum(values, FLOOR)).float()
    return target + torch.log(-torch.expm1(-target))

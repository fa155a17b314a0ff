"""An empirical-Bayes start for the promotion-plan responses (decision D87).

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

Only the training weeks are read, and only the plan responses start this way: a source without
a plan (LGSR, the synthetic data) trains exactly as before.

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
FLOOR = 0.01  # a response is >= 0 by construction; a negative or zero lift starts here
PSEUDO_UNITS = 10.0  # expected units of prior weight pulling a product toward its category


def plan_lifts(
    trips: pl.DataFrame, plan: pl.DataFrame, vocab: pl.DataFrame, categories: np.ndarray
) -> np.ndarray | None:
    """(V, 2) each token's display and mailer lift (log units) over the weeks of ``trips``
    (the training weeks' trip store: basket_id, store_id, week, products) and ``plan``
    (``SOURCE_PROMOTIONS_SCHEMA`` cells of those weeks); ``vocab``: product_id, token;
    ``categories`` (V,) code per token. None where the plan promotes nothing sold."""
    sales = basket_sales(trips, trips["basket_id"])
    depths = pl.LazyFrame(schema=PROMOTIONS_SCHEMA).select(*CELL, "depth")
    panel = sales_panel(sales, table_promotions(plan.lazy(), depths)).collect()
    if not panel["promo"].any():
        return None
    tokens = vocab.select("product_id", "token")
    category = pl.DataFrame(
        {"product_id": tokens["product_id"], "category": categories[tokens["token"].to_numpy()]}
    )
    out = np.zeros((len(categories), len(PLAN_RESPONSES)))
    for j, kind in enumerate(PLAN_RESPONSES):
        ratio = rate_ratios(panel, category, kind, PSEUDO_UNITS)
        out[:, j] = np.log(ratio.overall)
        known = ratio.by_category.join(
            pl.DataFrame({"category": categories, "token": np.arange(len(categories))}),
            on="category",
        )
        out[known["token"].to_numpy(), j] = np.log(known["ratio"].to_numpy())
        per_product = tokens.join(ratio.by_product, on="product_id")
        out[per_product["token"].to_numpy(), j] = np.log(per_product["ratio"].to_numpy())
    return out


@dataclass(frozen=True)
class RateRatios:
    overall: float
    by_category: pl.DataFrame  # category, ratio
    by_product: pl.DataFrame  # product_id, ratio


def rate_ratios(
    panel: pl.DataFrame, category: pl.DataFrame, kind: str, pseudo_units: float
) -> RateRatios:
    """Units on ``kind`` (cells whose kind names it) against the units the product × store sells
    in its unpromoted weeks, as gamma-Poisson rate ratios: a product's (observed + m * its
    category's) / (expected + m), the category's likewise toward the overall one, m =
    ``pseudo_units`` expected units. A log rate ratio is what a logit shift does to a small
    choice probability, the scale of the model's response."""
    per_store = (
        panel.group_by("product_id", "store_id")
        .agg(
            off_mean=pl.col("units").filter(~pl.col("promo")).mean(),
            on_units=pl.col("units").filter(pl.col("kind").str.contains(kind)).sum(),
            on_weeks=pl.col("kind").str.contains(kind).sum(),
        )
        .filter(pl.col("off_mean").is_not_null() & (pl.col("on_weeks") > 0))
        .with_columns(expected=pl.col("off_mean") * pl.col("on_weeks"))
    )
    per_product = (
        per_store.group_by("product_id")
        .agg(observed=pl.col("on_units").sum(), expected=pl.col("expected").sum())
        .join(category, on="product_id", how="left")
        .with_columns(pl.col("category").fill_null(-1))
        .sort("product_id")
    )
    total = per_product.select(pl.col("observed", "expected").sum()).row(0)
    overall = (total[0] + pseudo_units) / (total[1] + pseudo_units)
    by_category = (
        per_product.group_by("category")
        .agg(pl.col("observed", "expected").sum())
        .with_columns(
            ratio=(pl.col("observed") + pseudo_units * overall)
            / (pl.col("expected") + pseudo_units)
        )
        .sort("category")
    )
    by_product = per_product.join(
        by_category.select("category", category_ratio="ratio"), on="category", how="left"
    ).select(
        "product_id",
        ratio=(pl.col("observed") + pseudo_units * pl.col("category_ratio"))
        / (pl.col("expected") + pseudo_units),
    )
    return RateRatios(overall, by_category.select("category", "ratio"), by_product)


@torch.no_grad()
def start_plan_responses(response: PriceResponse, lifts: np.ndarray) -> None:
    """Set the display and mailer responses to ``lifts`` (V, 2), floored at ``FLOOR``: each
    category's to the median of its products' lifts, each product's deviation to the rest."""
    target = torch.from_numpy(np.maximum(lifts, FLOOR)).float()  # (V, 2)
    raw = target + torch.log(-torch.expm1(-target))  # softplus^-1, stable for small values
    category = response.category_of  # (V,)
    for j, name in enumerate(PLAN_RESPONSES):
        column, pooled = PRODUCT_RESPONSES.index(name), POOLED_RESPONSES.index(name)
        for k in torch.unique(category).tolist():
            members = category == k
            response.raw_category_weights[k, pooled] = raw[members, j].median()
        response.raw_product_weights[:, column] = (
            raw[:, j] - response.raw_category_weights[category, pooled]
        )

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

The own-depth response starts from the same panel (D88, D94): in the store-weeks the other
stores of its region showed it cut (the shelf's leave-one-store-out depth, D45), a product's
units against its stores' unpromoted rate, as a Poisson log-log slope on the cut's log price
change, shrunk toward its category's by empirical Bayes (``shrunk_poisson``), then put per unit
of depth. Learned from scratch, that response ranked the planted elasticities far worse than
the training weeks' own rate ratios, and the shrunk slopes better than either (D88).

Only the training weeks are read.

Glossary: V vocabulary, K categories.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from retailsim_core.models.heads.products import POOLED_RESPONSES, PRODUCT_RESPONSES, PriceResponse
from retailsim_core.response.promotion_events import (
    CELL,
    PROMOTIONS_SCHEMA,
    panel_groups,
    table_promotions,
    weekly_sales,
)
from retailsim_core.response.shrunk_poisson import hierarchical_slopes

PLAN_RESPONSES = ("display", "mailer")
FLOOR = 0.01  # a response is >= 0 by construction; a negative or zero lift starts here
PSEUDO_UNITS = 10.0  # expected units of prior weight pulling a product toward its category
# Panel cells per group (``panel_groups``), bounding one group's panel (D97): beside the trip
# store a group of 1M sold cells peaked 2.7 GB at ``large`` and one of 250K 1.0 GB in the same
# time; a group holds at least as many panel cells as sold ones, so this bounds it as 250K sold
# cells did (D126).
PRIOR_GROUP_CELLS = 250_000


def plan_lifts(
    trips: pl.DataFrame | pl.LazyFrame,
    plan: pl.DataFrame,
    vocab: pl.DataFrame,
    categories: np.ndarray,
) -> np.ndarray | None:
    """(V, 2) each token's display and mailer lift (log units) over the weeks of ``trips``
    (the training weeks' trip store: basket_id, store_id, week, products) and ``plan``
    (``SOURCE_PROMOTIONS_SCHEMA`` cells of those weeks); ``vocab``: product_id, token;
    ``categories`` (V,) code per token. None where the plan promotes nothing sold."""
    depths = pl.LazyFrame(schema=PROMOTIONS_SCHEMA).select(*CELL, "depth")
    promotions = table_promotions(plan.lazy(), depths)
    # A week's product lists at a time (``weekly_sales``), and the panel a group of products at
    # a time: the rates are per product x store, never split across groups (the whole panel
    # of the synthetic ``large`` training weeks peaked at 13.5 GB).
    sales = weekly_sales(trips.lazy())
    per_store = {kind: [] for kind in PLAN_RESPONSES}
    promoted = False
    for panel in panel_groups(sales, promotions, cells=PRIOR_GROUP_CELLS):
        promoted = promoted or bool(panel["promo"].any())
        for kind in PLAN_RESPONSES:
            per_store[kind].append(store_rates(panel, kind))
    if not promoted:
        return None
    category = _categories(vocab, categories)
    out = np.zeros((len(categories), len(PLAN_RESPONSES)))
    for j, kind in enumerate(PLAN_RESPONSES):
        ratio = rate_ratios(pl.concat(per_store[kind]), category, PSEUDO_UNITS)
        out[:, j] = np.log(_per_token(ratio, vocab, categories))
    return out


def depth_responses(
    trips: pl.DataFrame | pl.LazyFrame,
    promotions: pl.LazyFrame,
    vocab: pl.DataFrame,
    categories: np.ndarray,
) -> np.ndarray | None:
    """(V,) each token's own-depth response, a logit shift per unit of depth (the model's
    scale), over the weeks of ``trips`` (as in ``plan_lifts``) and ``promotions``
    (``PROMOTIONS_SCHEMA`` rows of kind "price" with a depth: ``regional_promotions`` of those
    weeks): its Poisson log-log slope on the cut's log price change, shrunk toward its
    category's and the category's toward the overall one by empirical Bayes
    (``shrunk_poisson``, D94), times its cuts' mean log price change per unit of depth. A
    token never cut takes its category's slope. None where nothing cut sold."""
    sales = weekly_sales(trips.lazy())
    cuts = promotions.filter(pl.col("depth") > 0).collect().lazy()
    parts = []
    # The panel in groups of products (a product x store's cells are all in one group, so the
    # unpromoted rate is the same), in product order: the cells come in the panel's order and
    # memory holds one group's panel, not every product x store x week of the training weeks.
    for panel in panel_groups(sales, cuts, cells=PRIOR_GROUP_CELLS):
        parts.append(
            panel.with_columns(
                off=pl.col("units").filter(~pl.col("promo")).mean().over("product_id", "store_id")
            )
            .filter(pl.col("promo") & pl.col("off").is_not_null())
            .join(vocab.select("product_id", "token"), on="product_id", maintain_order="left")
            .select("token", "units", "off", "depth", x=-(1 - pl.col("depth")).log())
        )
    cells = pl.concat(parts)
    if cells.height == 0 or cells["units"].sum() == 0:
        return None
    token = cells["token"].cast(pl.Int64).to_numpy()
    x, depth = cells["x"].to_numpy(), cells["depth"].to_numpy()
    slopes, _, _ = hierarchical_slopes(
        cells["units"].to_numpy(), cells["off"].to_numpy(), x, token, categories.astype(np.int64)
    )
    n = len(categories)
    sums = np.bincount(token, x, n), np.bincount(token, depth, n)
    per_depth = np.divide(*sums, out=np.full(n, x.sum() / depth.sum()), where=sums[1] > 0)
    return slopes * per_depth


def _categories(vocab: pl.DataFrame, categories: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame(
        {"product_id": vocab["product_id"], "category": categories[vocab["token"].to_numpy()]}
    )


def _per_token(ratio: RateRatios, vocab: pl.DataFrame, categories: np.ndarray) -> np.ndarray:
    """(V,) rate ratio of each token's product, else of its category, else the overall one."""
    out = np.full(len(categories), ratio.overall)
    known = ratio.by_category.join(
        pl.DataFrame({"category": categories, "token": np.arange(len(categories))}), on="category"
    )
    per_product = vocab.select("product_id", "token").join(ratio.by_product, on="product_id")
    for rows in (known, per_product):
        out[rows["token"].to_numpy()] = rows["ratio"].to_numpy()
    return out


@dataclass(frozen=True)
class RateRatios:
    overall: float
    by_category: pl.DataFrame  # category, ratio
    by_product: pl.DataFrame  # product_id, ratio


def store_rates(panel: pl.DataFrame, kind: str) -> pl.DataFrame:
    """Per product x store of ``panel`` with unpromoted weeks and weeks on ``kind`` (cells whose
    kind names it): the units observed on ``kind`` and the units its unpromoted mean expects
    over those weeks."""
    on = pl.col("kind").str.contains(kind)
    return (
        panel.group_by("product_id", "store_id")
        .agg(
            off_mean=pl.col("units").filter(~pl.col("promo")).mean(),
            observed=pl.col("units").filter(on).sum(),
            on_weeks=on.sum(),
        )
        .filter(pl.col("off_mean").is_not_null() & (pl.col("on_weeks") > 0))
        .select("product_id", "observed", expected=pl.col("off_mean") * pl.col("on_weeks"))
    )


def rate_ratios(per_store: pl.DataFrame, category: pl.DataFrame, pseudo_units: float) -> RateRatios:
    """Units observed against expected (``store_rates``) as gamma-Poisson rate ratios: a
    product's (observed + m * prior) / (expected + m), its prior its category's ratio, the
    category's likewise toward the overall one, m = ``pseudo_units`` expected units. A log rate
    ratio is what a logit shift does to a small choice probability, the scale of the model's
    response."""
    sums = pl.col("observed", "expected").sum()
    per_product = (
        per_store.group_by("product_id")
        .agg(sums)
        .join(category, on="product_id", how="left")
        .with_columns(pl.col("category").fill_null(-1))
        .sort("product_id")
    )
    total = per_product.select(sums).row(0, named=True)
    overall = (total["observed"] + pseudo_units) / (total["expected"] + pseudo_units)

    def shrunk(prior: pl.Expr) -> pl.Expr:
        return (pl.col("observed") + pseudo_units * prior) / (pl.col("expected") + pseudo_units)

    by_category = (
        per_product.group_by("category")
        .agg(sums)
        .with_columns(ratio=shrunk(pl.lit(overall)))
        .sort("category")
    )
    by_product = per_product.join(
        by_category.select("category", parent="ratio"), on="category", how="left"
    ).select("product_id", ratio=shrunk(pl.col("parent")))
    return RateRatios(overall, by_category.select("category", "ratio"), by_product)


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

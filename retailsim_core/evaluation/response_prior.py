"""An empirical-Bayes start for the promotion-plan responses (decision D87).

A display or mailer flag is on a few percent of a store-week's shelf, so each product's
gradient on its display response is a rare positive spike among small negatives, and Adam
moves such a weight little in a CPU budget: started near zero, the responses stayed there. They
start instead where the training weeks put them: the hierarchical log-log model
(``baselines/econometric.py``) fitted on the training weeks' panel (every week of each product
× store's span, zero-sale weeks counted; D76) gives each product's display and mailer lift,
shrunk toward its category's. Training then moves them like any weight.

Only the training weeks are read, and only the plan responses start this way: a source without
a plan (LGSR, the synthetic data) trains exactly as before.

Glossary: V vocabulary, K categories.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import torch

from retailsim_core.baselines.econometric import HierarchicalLogLog
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
SHRINKAGE = 10.0  # pseudo-observations pulling a product toward its category (as the baseline)


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
    category = tokens.select(
        "product_id", category=pl.Series(categories[tokens["token"].to_numpy()]).cast(pl.String)
    )
    fit = HierarchicalLogLog.fit(panel, category, SHRINKAGE)
    out = np.tile(_kind_betas(fit.pooled[None], fit.kinds), (len(categories), 1))  # (V, 2)
    per_product = tokens.join(fit.responses, on="product_id", how="inner")
    beta = per_product.select(f"beta_{i}" for i in range(len(fit.kinds) + 1)).to_numpy()
    out[per_product["token"].to_numpy()] = _kind_betas(beta, fit.kinds)
    return out


def _kind_betas(beta: np.ndarray, kinds: tuple[str, ...]) -> np.ndarray:
    """(N, 2) the display and mailer columns of (N, K) fitted responses (0 for a kind the
    fitted weeks never had; "display+mailer" has its own column and is not read)."""
    zero = np.zeros(len(beta))
    return np.stack([beta[:, kinds.index(k)] if k in kinds else zero for k in PLAN_RESPONSES], -1)


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

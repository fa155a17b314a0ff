"""Econometric baselines of a price response (decision D76): what a pricing analyst would fit.

- ``HierarchicalLogLog``: log(units + 1) of a product × store × week on the promotion's kind
  indicators and log(1 - depth), with product × store and week effects, and per-product
  responses shrunk toward their category's (the family that leads public counterfactual-demand
  benchmarks). Fitted in three steps that promotions, being rare, make nearly exact: week
  effects from the unpromoted cells (each product × store's mean removed), product × store
  levels from the same cells, then the responses from the promoted cells' residuals, each
  product's pulled toward its category's and each category's toward the pooled one by a ridge
  of ``shrinkage`` pseudo-observations.
- ``constant_elasticity_units``: the meta-analytic own-price elasticity (-2.6, Bijmolt, van
  Heerde & Pieters 2005) times log(1 - depth) on the unpromoted level.
- No response: the unpromoted level itself.

All fit on a panel of the training and validation weeks only (``promotion_events.sales_panel``)
and predict each event's units with and without its promotion.

Glossary: N fitted cells, P products, C categories, K response regressors, E events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from retailsim_core.baselines.panel_sums import PAIR, PanelSums

META_ELASTICITY = -2.6  # SKU-level own-price elasticity, Bijmolt et al. (2005)


@dataclass(frozen=True)
class HierarchicalLogLog:
    kinds: tuple[str, ...]  # promotion kinds with an indicator each, then log(1 - depth)
    levels: pl.DataFrame  # product_id, store_id, level: mean of log(units + 1) - week effect
    product_levels: pl.DataFrame  # product_id, level: for a store the product was not fitted at
    global_level: float  # for a product the fit never saw
    week_mean: float  # the mean week effect of the fitted weeks (later weeks are unknown)
    responses: pl.DataFrame  # product_id, beta_0..beta_{K-1}: the shrunk per-product responses
    pooled: np.ndarray  # (K,) the responses of a product the fit never saw promoted

    @classmethod
    def fit(
        cls, panel: pl.DataFrame | PanelSums, categories: pl.DataFrame, shrinkage: float = 10.0
    ) -> HierarchicalLogLog:
        """``panel``: ``PANEL_SCHEMA`` rows of the fitting weeks, or their ``PanelSums`` (the
        event check sums them a product group at a time, D125); ``categories``: product_id,
        category."""
        sums = panel if isinstance(panel, PanelSums) else PanelSums.of(panel)
        kinds = tuple(sorted(sums.promoted["kind"].unique().to_list()))
        weeks, levels = sums.week_effects_and_levels()
        product_levels = levels.group_by("product_id").agg(pl.col("level").mean())
        on = (
            sums.promoted.select(*PAIR, "week", "kind", "depth", y=(pl.col("units") + 1).log())
            .join(weeks, on="week", how="left")
            .join(levels, on=["product_id", "store_id"], how="inner")  # a level to compare with
            .join(categories, on="product_id", how="left")
            .with_columns(resid=pl.col("y") - pl.col("level") - pl.col("effect").fill_null(0.0))
            .sort("product_id", "store_id", "week")
        )
        x = _regressors(on, kinds)  # (N, K)
        r = on["resid"].to_numpy()
        pooled = _ridge(x.T @ x, x.T @ r, shrinkage, np.zeros(x.shape[1]))
        cat_codes, cat_index = np.unique(
            on["category"].fill_null("").to_numpy(), return_inverse=True
        )
        by_category = _group_ridge(x, r, cat_index, len(cat_codes), shrinkage, pooled[None])
        products, product_index = np.unique(on["product_id"].to_numpy(), return_inverse=True)
        product_category = np.zeros(len(products), dtype=np.int64)
        product_category[product_index] = cat_index
        beta = _group_ridge(
            x, r, product_index, len(products), shrinkage, by_category[product_category]
        )
        responses = pl.DataFrame(
            {"product_id": products, **{f"beta_{k}": beta[:, k] for k in range(beta.shape[1])}}
        )
        return cls(
            kinds,
            levels,
            product_levels,
            float(levels["level"].mean()),
            float(weeks["effect"].mean()),
            responses,
            pooled,
        )

    def predict(self, events: pl.DataFrame) -> pl.DataFrame:
        """``events`` with ``units_promoted`` and ``units_unpromoted``: the expected units of
        each cell with its promotion and with none (the fitted weeks' mean week effect)."""
        level = (
            events.join(
                self.levels, on=["product_id", "store_id"], how="left", maintain_order="left"
            )
            .join(
                self.product_levels,
                on="product_id",
                how="left",
                suffix="_product",
                maintain_order="left",
            )
            .join(self.responses, on="product_id", how="left", maintain_order="left")
        )
        base = level["level"].fill_null(level["level_product"]).fill_null(self.global_level)
        base = base.to_numpy()
        k = len(self.kinds) + 1
        beta = np.column_stack([level[f"beta_{i}"].to_numpy() for i in range(k)])
        beta = np.where(np.isnan(beta), self.pooled[None], beta)
        shift = (_regressors(events, self.kinds) * beta).sum(1)
        unpromoted = np.exp(base + self.week_mean) - 1
        return events.with_columns(
            units_unpromoted=pl.Series(np.maximum(unpromoted, 0.0)),
            units_promoted=pl.Series(np.maximum(np.exp(base + self.week_mean + shift) - 1, 0.0)),
        )


def unpromoted_level(panel: pl.DataFrame | PanelSums, events: pl.DataFrame) -> np.ndarray:
    """(E,) each event's product × store mean units over the panel's unpromoted weeks (the
    product's mean over stores where the store has none; 0 where the product has none)."""
    sums = panel if isinstance(panel, PanelSums) else PanelSums.of(panel)
    products = events["product_id"].unique().implode()
    pairs = sums.pairs.filter(pl.col("product_id").is_in(products))
    ps = pairs.select(*PAIR, base=pl.col("units_sum") / pl.col("n"))
    p = pairs.group_by("product_id").agg(base_product=pl.col("units_sum").sum() / pl.col("n").sum())
    joined = events.join(ps, on=["product_id", "store_id"], how="left", maintain_order="left")
    joined = joined.join(p, on="product_id", how="left", maintain_order="left")
    return joined["base"].fill_null(joined["base_product"]).fill_null(0.0).to_numpy()


def constant_elasticity_units(
    base: np.ndarray, depth: np.ndarray, elasticity: float = META_ELASTICITY
) -> np.ndarray:
    """(E,) units at a price cut of ``depth`` (NaN = no known cut: no response)."""
    cut = np.clip(np.nan_to_num(depth, nan=0.0), 0.0, 0.95)
    return base * np.exp(elasticity * np.log1p(-cut))


def _regressors(df: pl.DataFrame, kinds: tuple[str, ...]) -> np.ndarray:
    """(N, K): an indicator per promotion kind, then log(1 - depth) (0 when no cut is known)."""
    kind = df["kind"].fill_null("").to_numpy()
    depth = np.clip(df["depth"].fill_null(0.0).to_numpy(), 0.0, 0.95)
    return np.column_stack([(kind == k).astype(np.float64) for k in kinds] + [np.log1p(-depth)])


def _ridge(xtx: np.ndarray, xty: np.ndarray, lam: float, prior: np.ndarray) -> np.ndarray:
    k = xtx.shape[-1]
    return np.linalg.solve(xtx + lam * np.eye(k), xty + lam * prior)


def _group_ridge(
    x: np.ndarray, r: np.ndarray, group: np.ndarray, n: int, lam: float, prior: np.ndarray
) -> np.ndarray:
    """(n, K) per group: (X'X + lam I)^-1 (X'r + lam prior), all groups in one batched solve."""
    k = x.shape[1]
    xtx = np.zeros((n, k, k))
    np.add.at(xtx, group, x[:, :, None] * x[:, None, :])
    xty = np.zeros((n, k))
    np.add.at(xty, group, x * r[:, None])
    prior = np.broadcast_to(prior, (n, k))
    return np.linalg.solve(xtx + lam * np.eye(k)[None], (xty + lam * prior)[..., None])[..., 0]

"""The model's price response against what held-out weeks show (real data has no planted truth).

- **Own promotions.** For each product, the observed uplift of its own promotions in the test
  weeks: per store, log((mean units on promotion + 1) / (mean units off promotion + 1)), weighted
  by promotion store-weeks. The model's predicted uplift is its own-price elasticity times
  log(1 - the product's mean observed promotion depth), over test contexts. Agreement is the
  Spearman rank correlation over products, with a 95% bootstrap interval over products.
- **Substitutes' cross-effects.** For substitution edges (A, B), the observed change in B's
  units when A is on promotion (``substitution.pair_effects``) against the model's predicted
  change, cross-elasticity d log E[B] / d log p[A] times log(1 - A's depth): the sign of each
  mean and the share of pairs whose signs agree.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy.stats import spearmanr

from retailsim_core.counterfactual.simulate import Contexts, jacobian_rows
from retailsim_core.graph.substitution import log_rate_ratio, pair_effects, weighted_mean

MIN_PROMO_STORE_WEEKS = 5


def own_uplift(cells: pl.LazyFrame) -> pl.DataFrame:
    """Per product: observed uplift of its own promotions, promotion store-weeks, mean depth."""
    per_store = (
        cells.group_by("product_id", "store_id")
        .agg(
            on_units=pl.col("units").filter(pl.col("promo") & pl.col("observed")).sum(),
            on_weeks=(pl.col("promo") & pl.col("observed")).sum(),
            off_units=pl.col("units").filter(~pl.col("promo")).sum(),
            off_weeks=(~pl.col("promo")).sum(),
            depth=pl.col("discount_depth").filter(pl.col("promo") & pl.col("observed")).mean(),
        )
        .filter((pl.col("on_weeks") > 0) & (pl.col("off_weeks") > 0))
        .with_columns(uplift=log_rate_ratio("on_units", "on_weeks", "off_units", "off_weeks"))
    )
    return (
        per_store.group_by("product_id")
        .agg(
            weighted_mean("uplift", "on_weeks").alias("observed_uplift"),
            pl.col("on_weeks").sum().cast(pl.Int64).alias("promo_store_weeks"),
            weighted_mean("depth", "on_weeks").alias("depth"),
        )
        .sort("product_id")
        .collect()
    )


def products_read(promoted: pl.Series, edges: pl.DataFrame) -> pl.Series:
    """The products whose cells ``observed_check`` reads: those promoted in an observed cell
    (``promoted``: product ids), and their substitutes in either direction (the pairs whose
    cross-effect it measures). Every other product's cells change none of its figures, so the
    check's cells can be read for these alone (on the real LGSR sample the test weeks' dense
    cells took 2 GB)."""
    subs = edges.filter(pl.col("edge_type") == "substitution")
    partners = pl.concat(
        [
            subs.filter(pl.col("src").is_in(promoted.implode()))["dst"],
            subs.filter(pl.col("dst").is_in(promoted.implode()))["src"],
        ]
    )
    return pl.concat([promoted.cast(pl.String), partners.cast(pl.String)]).unique().sort()


def _spearman_interval(x: np.ndarray, y: np.ndarray, n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), (n, len(x)))
    rhos = np.array([spearmanr(x[i], y[i])[0] for i in idx])  # n small fits: 1,000 x ~40 values
    return [float(v) for v in np.nanquantile(rhos, [0.025, 0.975])]


def observed_check(
    model,
    contexts: Contexts,
    size,
    vocab,
    cells: pl.LazyFrame,
    edges: pl.DataFrame,
    *,
    n_products: int = 40,
    n_pairs: int = 60,
    bootstrap: int = 1000,
    seed: int = 0,
    chunk: int | None = None,
) -> dict:
    """Own-promotion uplift and substitutes' cross-effects, model against held-out weeks;
    ``chunk``: contexts per backward pass of the Jacobian."""
    token = dict(zip(vocab.products, range(1, vocab.n_products + 1), strict=True))
    uplift = own_uplift(cells)
    own = (
        uplift.filter(
            (pl.col("promo_store_weeks") >= MIN_PROMO_STORE_WEEKS)
            & pl.col("product_id").is_in(list(token))
        )
        .sort(["promo_store_weeks", "product_id"], descending=[True, False])
        .head(n_products)
    )
    out: dict = {"own_products": own.height}
    subs = edges.filter(pl.col("edge_type") == "substitution").select(
        pl.col("src").alias("a"), pl.col("dst").alias("b")
    )
    pairs = pl.concat([subs, subs.select(pl.col("b").alias("a"), pl.col("a").alias("b"))])
    pairs = pairs.filter(pl.col("a").is_in(list(token)) & pl.col("b").is_in(list(token)))
    fx = pair_effects(
        cells.select("product_id", "store_id", "week", "promo", "observed", "units"), pairs
    )
    fx = fx.sort(["store_weeks", "a", "b"], descending=[True, False, False]).head(n_pairs)
    firsts = sorted({*own["product_id"].to_list(), *fx["a"].to_list()})
    if not firsts:
        return out | {"note": "no product promoted in enough held-out store-weeks"}
    tokens = np.array([token[p] for p in firsts])
    jac = jacobian_rows(model, contexts, size, tokens, chunk)  # (n, V) d log E_i / d log p_j
    row_of = {p: k for k, p in enumerate(firsts)}
    if own.height >= 3:
        log_cut = np.log1p(-own["depth"].fill_null(0.0).clip(0.0, 0.95).to_numpy())
        elasticity = np.array([jac[row_of[p], token[p]] for p in own["product_id"]])
        predicted, observed = elasticity * log_cut, own["observed_uplift"].to_numpy()
        out |= {
            "own_spearman": float(spearmanr(predicted, observed)[0]),
            "own_spearman_ci": _spearman_interval(predicted, observed, bootstrap, seed),
            "own_observed_uplift_mean": float(observed.mean()),
            "own_predicted_uplift_mean": float(predicted.mean()),
        }
    else:  # a rank correlation of fewer than three products says nothing
        out["note"] = f"{own.height} products promoted in enough held-out store-weeks (3 needed)"
    fx = fx.join(
        uplift.select("product_id", "depth"), left_on="a", right_on="product_id", how="left"
    )
    if fx.height:
        # Row b of the Jacobian is needed: d log E[b] / d log p[a].
        need = sorted(set(fx["b"].to_list()) - set(row_of))
        if need:
            extra = jacobian_rows(model, contexts, size, np.array([token[p] for p in need]), chunk)
            jac = np.concatenate([jac, extra])
            row_of |= {p: len(firsts) + k for k, p in enumerate(need)}
        cross = np.array([jac[row_of[b], token[a]] for a, b in zip(fx["a"], fx["b"], strict=True)])
        predicted = cross * np.log1p(-fx["depth"].fill_null(0.0).clip(0.0, 0.95).to_numpy())
        observed = fx["effect"].to_numpy()
        out |= {
            "cross_pairs": fx.height,
            "cross_observed_mean": float(observed.mean()),
            "cross_predicted_mean": float(predicted.mean()),
            "cross_sign_agreement": float((np.sign(predicted) == np.sign(observed)).mean()),
            "cross_mean_signs_agree": bool(np.sign(predicted.mean()) == np.sign(observed.mean())),
        }
    return out

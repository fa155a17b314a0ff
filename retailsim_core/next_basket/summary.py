"""The metrics stage: per-basket metrics summarised by slice, with bootstrap intervals."""

from __future__ import annotations

import numpy as np
import polars as pl

from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.ingest.lgsr import STORE_FORMAT_CODES
from retailsim_core.next_basket.bootstrap import interval, resample_weights
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.next_basket.scoring import MethodResults
from retailsim_core.training.scoring.metrics import masked_item_summary, summarise


def week_ranges(
    weeks: np.ndarray, configured: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    """The test-week slices: the ``configured`` ranges that hold a scored week (LGSR's
    calendar by default); where none does (another source's calendar), the scored weeks in
    two halves, so every source reports how the figures move through the test period."""
    if len(weeks) == 0:
        return ()
    used = tuple((lo, hi) for lo, hi in configured if ((weeks >= lo) & (weeks <= hi)).any())
    if used or not configured:
        return used
    first, last = int(weeks.min()), int(weeks.max())
    if first == last:
        return ((first, last),)
    middle = (first + last) // 2
    return ((first, middle), (middle + 1, last))


def slices(
    samples: pl.DataFrame,
    data: TrainingSet,
    rows: np.ndarray,
    week_slices: tuple[tuple[int, int], ...] = (),
    in_sample: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Slice name -> positions into ``rows``: all, test-week ranges, cold start (< 5 prior
    baskets), baskets with novel products, each history bucket, each store format.
    ``in_sample`` (len(rows),) bool: the rows of the random sample; every slice but cold start
    keeps only those, cold start keeps every cold-start row scored (default: all in the sample)."""
    s = samples[rows]
    week = s["week"].to_numpy()
    sample = np.ones(len(rows), bool) if in_sample is None else np.asarray(in_sample, bool)
    out = {"all": np.flatnonzero(sample)}
    for lo, hi in week_ranges(week[sample], week_slices):
        out[f"test_{lo}_{hi}"] = np.flatnonzero(sample & (week >= lo) & (week <= hi))
    for w in np.unique(week[sample]):  # one slice a week: the staleness curve (D111)
        out[f"week_{w}"] = np.flatnonzero(sample & (week == w))
    out |= {
        "cold_start": np.flatnonzero(s["is_cold_start"].to_numpy()),
        "novel_products": np.flatnonzero(sample & s["is_novel_products"].to_numpy()),
    }
    for b in sorted(s["bucket"].unique().to_list()):
        out[f"bucket_{b}"] = np.flatnonzero(sample & (s["bucket"].to_numpy() == b))
    codes = data.store_codes[rows, 0]
    for i, fmt in enumerate(STORE_FORMAT_CODES, 1):
        out[f"format_{fmt}"] = np.flatnonzero(sample & (codes == i))
    return {k: v for k, v in out.items() if len(v)}


def nested_metrics(results: MethodResults, slice_rows: dict[str, np.ndarray]) -> dict:
    """{task: {slice: {method: {metric: value}}}}; ``slice_rows`` index ``results.rows``."""
    nb = {
        s: {m: summarise(v, idx) for m, v in results.next_basket.items()}
        for s, idx in slice_rows.items()
    }
    mi = {}
    for s, idx in slice_rows.items():
        sel = np.flatnonzero(np.isin(results.masked_position, idx))
        mi[s] = {m: masked_item_summary(r, sel) for m, r in results.masked_ranks.items()}
    return {"next_basket": nb, "masked_item": mi}


def intervals(
    results: MethodResults,
    slice_rows: dict[str, np.ndarray],
    customers: np.ndarray,
    cfg: EvalConfig,
    reference: str = "world_model",
    refreshed: str = "world_model (refreshed)",
) -> dict:
    """95% customer-cluster bootstrap intervals of next-basket R@20 and NDCG@10 and masked-item
    Hit@10 per slice and method, and of each method's paired difference from ``reference``:
    {task: {slice: {method: {metric: [lo, hi], "diff_" + metric: [lo, hi]}}}}; where the
    ``refreshed`` model was scored, its difference too ("diff_refreshed_" + metric)."""
    out: dict = {"next_basket": {}, "masked_item": {}}
    for s, idx in slice_rows.items():
        weights, index = resample_weights(customers[idx], cfg.bootstrap, cfg.seed)
        nb = results.next_basket
        out["next_basket"][s] = {
            m: {k: list(interval(v[k][idx], weights, index)) for k in ("R@20", "NDCG@10")}
            for m, v in nb.items()
        }
        for ref, prefix in ((reference, "diff_"), (refreshed, "diff_refreshed_")):
            if ref not in nb:
                continue
            for m, v in nb.items():
                for k in ("R@20", "NDCG@10"):
                    diff = nb[ref][k][idx] - v[k][idx]
                    out["next_basket"][s][m][prefix + k] = list(interval(diff, weights, index))
        sel = np.flatnonzero(np.isin(results.masked_position, idx))
        pos = np.searchsorted(idx, results.masked_position[sel])  # masked slot -> basket in slice
        out["masked_item"][s] = {
            m: {"Hit@10": list(interval((r[sel] <= 10).astype(float), weights, index[pos]))}
            for m, r in results.masked_ranks.items()
        }
    return out


def vocabulary_coverage(trips: pl.DataFrame, baskets: pl.Series, vocab: pl.DataFrame) -> dict:
    """How much of what ``baskets`` (basket ids) bought the model can name: of their
    purchases (basket x product) and of their distinct products, the share in ``vocab``
    (product_id). A product outside it is never predicted by any token-based method."""
    bought = (
        trips.lazy()
        .filter(pl.col("basket_id").is_in(baskets.implode()))
        .select("basket_id", product_id=pl.col("products"))
        .explode("product_id")
        .drop_nulls("product_id")
        .with_columns(known=pl.col("product_id").is_in(vocab["product_id"].implode()))
        .collect()
    )
    products = bought.unique("product_id")
    return {
        "purchases": bought.height,
        "purchases_covered": int(bought["known"].sum()),
        "purchase_share": float(bought["known"].mean()) if bought.height else None,
        "products": products.height,
        "products_covered": int(products["known"].sum()),
        "vocabulary": vocab.height,
    }

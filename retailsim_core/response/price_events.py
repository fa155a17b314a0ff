"""The price-response check on promotion events (design §6.2; decisions D76, D93).

Every method predicts each test-week event's units (how many of the store-week's evaluated
baskets hold the product) with its promotion and without it, in the same contexts:

- the world model: sum over the store-week's test baskets of the chance each holds the product
  (``simulation.held``, D95), with each event's promotion told on its shelf (its known depth,
  else the shelf's; on display or in the mailer as its kind says), then with the event
  products' promotions removed (their price back to regular, depth 0, off display and out of
  the mailer);
- the baselines of ``baselines/econometric.py``, fitted on the training and validation weeks'
  panel (their evaluated baskets: the training weeks' samples and the validation baskets).

Then ``response_metrics`` against the observed lifts, the split-half ceiling, and the tables
behind them (``price_events.parquet``, one row per event; ``price_event_products.parquet``).

Glossary: B baskets of a chunk, V vocabulary, E events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from retailsim_core.baselines.econometric import (
    HierarchicalLogLog,
    constant_elasticity_units,
    unpromoted_level,
)
from retailsim_core.counterfactual.simulate import units_of
from retailsim_core.datasets.shelf import (
    MAX_DEPTH,
    SHELF_FEATURES,
    with_price_multipliers,
)
from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.models.heads.products import PriceResponse, mixture_log_probs
from retailsim_core.models.outputs import ModelOutput
from retailsim_core.models.world_model import WorldModel
from retailsim_core.response.planted_events import planted_check, planted_event_units
from retailsim_core.response.promotion_events import (
    basket_sales,
    check_panels,
    panel_groups,
    product_lifts,
    promotion_events,
    split_half_ceiling,
)
from retailsim_core.response.response_metrics import (
    calibration_bins,
    paired_difference,
    predicted_lifts,
    product_resamples,
    response_metrics,
)
from retailsim_core.storage.heap import release_free_heap
from retailsim_core.synth.world import PlantedTruth

SHELF_DEPTH = SHELF_FEATURES.index("discount_depth")
SHELF_PLAN = [SHELF_FEATURES.index("display"), SHELF_FEATURES.index("mailer")]
SHELF_AVAILABLE = SHELF_FEATURES.index("available")
EVENT_CHUNK = 256  # test baskets per forward of the model's event units (fewer: EvalConfig)
METHODS = {  # name -> (promoted column, unpromoted column) of the events table
    "world_model": ("predicted_units", "predicted_units_no_promotion"),
    **{
        name: (f"{name}_units", f"{name}_units_no_promotion")
        for name in ("hierarchical_loglog", "constant_elasticity", "no_response")
    },
}


@dataclass(frozen=True)
class EventCheck:
    summary: dict  # per method the metrics, the paired WAPE differences, the ceiling, counts
    events: pl.DataFrame  # one row per event: observed units and every method's two predictions
    products: pl.DataFrame  # one row per product: observed lift and every method's lift


def price_event_check(
    model: WorldModel,
    data: TrainingSet,
    samples: pl.DataFrame,
    trips: pl.DataFrame,
    promotions: pl.LazyFrame,
    categories: pl.DataFrame,
    source: str,
    seed: int,
    n_boot: int = 500,
    fit_baskets: pl.Series | None = None,
    truth: PlantedTruth | None = None,
    chunk: int = EVENT_CHUNK,
) -> EventCheck:
    """``samples``: the validation and test baskets of ``data`` (row-aligned); ``trips``: the
    trip store (basket_id, store_id, week, products); ``promotions``: ``PROMOTIONS_SCHEMA``
    rows known without the cells' own sales, from ``source``; ``categories``: product_id,
    category; ``fit_baskets``: the training weeks' basket ids the baselines fit on besides the
    validation baskets (None: the validation weeks alone); ``truth``: the planted truth
    (synthetic data), which adds the planted units and every method's figures against them;
    ``chunk``: test baskets per forward of the model's event units."""
    split = samples["split"].to_numpy()
    test_rows = np.flatnonzero(split == "test")
    test_weeks = sorted(samples["week"].filter(samples["split"] == "test").unique().to_list())
    baskets = samples["basket_id"]
    if fit_baskets is not None:
        baskets = pl.concat([fit_baskets.cast(baskets.dtype), baskets])
    sales = basket_sales(trips, baskets).collect()
    # The test weeks' cells, and the training and validation weeks' summed for the baselines'
    # fit: the whole panel is never held (issue #62, D124, D125).
    groups = panel_groups(sales, promotions, test_weeks[-1])
    panel, fit, stores = check_panels(groups, test_weeks)
    del sales
    events = promotion_events(panel.lazy(), test_weeks)
    observed = product_lifts(panel.lazy(), test_weeks)
    if events.height == 0:
        return EventCheck({"source": source, "events": 0}, events, observed)
    ceiling = split_half_ceiling(panel.lazy(), test_weeks, stores=stores)
    del panel
    fit_weeks = fit.weeks()
    table = _event_table(model, data, samples, test_rows, fit, events, categories, chunk)
    if truth is not None:
        table = table.with_columns(*planted_event_units(truth, samples[test_rows], events))
    weights = product_resamples(observed.height, n_boot, seed)
    scored = {
        name: response_metrics(observed, table, on, off, weights, units="observed_units")
        for name, (on, off) in METHODS.items()
    }
    summary = {
        "source": source,
        "events": table.height,
        "weeks": [test_weeks[0], test_weeks[-1]],
        "fitted_weeks": [fit_weeks[0], fit_weeks[-1]] if len(fit_weeks) else None,
        "ceiling": ceiling,
        "methods": {name: s.summary for name, s in scored.items()},
        "world_model_vs": {
            name: paired_difference(scored["world_model"], s)
            for name, s in scored.items()
            if name != "world_model"
        },
    }
    if truth is not None:
        summary["planted"] = planted_check(table, observed, METHODS, weights)
    products = _lifts_by_method(observed, table)
    summary["calibration_bins"] = {
        name: calibration_bins(products, name) for name in ("world_model", "hierarchical_loglog")
    }
    summary["promotional_elasticity"] = promotional_elasticities(products)
    return EventCheck(summary, table, products)


def promotional_elasticities(products: pl.DataFrame, min_depth: float = 0.05) -> dict:
    """Arc elasticities of the promotions themselves: per product with a known mean depth above
    ``min_depth``, lift / log(1 - depth) (the change of log units per change of log price),
    observed and per method; medians over those products (the literature puts promotional
    elasticities near -3.6)."""
    cut = products.filter(pl.col("depth") > min_depth)
    log_price = (1 - cut["depth"]).log()
    out = {"products": cut.height}
    for name in ("observed_lift", *METHODS):
        value = (cut[name] / log_price).median() if cut.height else None
        out["observed" if name == "observed_lift" else name] = value
    return out


@torch.no_grad()
def model_event_units(
    model: WorldModel,
    data: TrainingSet,
    rows: np.ndarray,
    samples: pl.DataFrame,
    events: pl.DataFrame,
    chunk: int = EVENT_CHUNK,
) -> tuple[pl.Series, pl.Series]:
    """(E,) twice: each event's expected units over the store-week's baskets among ``rows``,
    with the shelf as the model reads it and with the event products' promotions removed."""
    tokens = data.vocab.frame().select("product_id", "token")
    keyed = events.with_row_index("event").join(tokens, on="product_id", how="left")
    on, off = np.zeros(events.height), np.zeros(events.height)
    rows = rows[np.argsort(data.hist_end[rows] - data.hist_start[rows], kind="stable")]
    model.train(False)
    for start in range(0, len(rows), chunk):
        _event_chunk(model, data, rows[start : start + chunk], samples, keyed, on, off)
        release_free_heap()  # the chunk's freed buffers, before the next chunk's (D126)
    return pl.Series(on), pl.Series(off)


def _event_chunk(
    model: WorldModel,
    data: TrainingSet,
    part: np.ndarray,
    samples: pl.DataFrame,
    keyed: pl.DataFrame,
    on: np.ndarray,
    off: np.ndarray,
) -> None:
    """Add the expected units of the events in the store-weeks of baskets ``part`` into ``on``
    and ``off`` (``model_event_units``); the chunk's tensors die on return."""
    cells = (
        samples[part]
        .select("store_id", pl.col("week").cast(pl.Int32))
        .with_row_index("b")
        .join(keyed.drop_nulls("token"), on=["store_id", "week"])
    )
    if cells.height == 0:
        return
    batch = data[part]
    b, t = cells["b"].to_numpy(writable=True), cells["token"].to_numpy(writable=True)
    b, t = torch.from_numpy(b).long(), torch.from_numpy(t).long()
    shelf = batch["shelf"]  # (B, V, S)
    regular, told = event_shelves(shelf[b, t], cells)
    # The shelf enters only the slot's price terms (D39): one decoder pass serves every
    # shelf, and telling or removing the events moves the terms of their products and of
    # the products reading their depths as substitutes only.
    out = model.query_pass(batch)
    rows_b, slot = torch.arange(len(part)), torch.zeros(len(part), dtype=torch.long)
    explore, repeat, products, share, excluded = model.slot_terms(out, rows_b, slot)
    event = cells["event"].to_numpy()
    for cells_now, into in ((told, on), (regular, off)):
        delta = (  # (B, V); a model without shelf prices does not respond
            price_change(model.price_response, out, shelf, b, t, cells_now)
            if out.shelf is not None
            else torch.zeros_like(explore)
        )
        shelf[b, t] = cells_now  # the next change starts from this shelf
        explore = explore + delta
        if repeat is not None:
            repeat = repeat + delta.gather(1, products)
        log_p = mixture_log_probs(explore, repeat, products, share, excluded)
        np.add.at(into, event, units_of(out.size_logits, log_p)[b, t].numpy())


def event_shelves(cells: torch.Tensor, events: pl.DataFrame) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, S) shelf cells of N events twice: without any promotion (regular price, depth 0, off
    display, out of the mailer) and with the event's own promotion told (D93): its known depth
    (the shelf's where the depth is unknown), on display or in the mailer where its kind says
    so. Every baseline reads the event's depth and kind; so does the model, rather than only
    what its leave-one-store-out shelf happened to see. An unavailable cell stays so."""
    regular = without_promotion(cells)
    depth = cells[:, SHELF_DEPTH].clamp(max=0.95)
    known = torch.from_numpy(events["depth"].fill_null(np.nan).to_numpy(writable=True)).float()
    told_depth = torch.where(known.isnan(), depth, known.clamp(0.0, MAX_DEPTH))
    told = with_price_multipliers(regular, torch.log1p(-told_depth))
    kind = events["kind"]
    for column, name in zip(SHELF_PLAN, ("display", "mailer"), strict=True):
        flag = torch.from_numpy(kind.str.contains(name).to_numpy(writable=True))
        told[:, column] = torch.where(flag, cells[:, SHELF_AVAILABLE], cells[:, column])
    return regular, told


def without_promotion(cells: torch.Tensor) -> torch.Tensor:
    """(N, S) shelf cells back to their regular price: depth 0, off display, out of the
    mailer (an unavailable cell stays so)."""
    depth = cells[:, SHELF_DEPTH].clamp(max=0.95)
    regular = with_price_multipliers(cells, -torch.log1p(-depth))  # depth 0, no promo
    regular[:, SHELF_PLAN] = 0.0
    return regular


def price_change(
    response: PriceResponse,
    out: ModelOutput,
    shelf: torch.Tensor,
    b: torch.Tensor,
    t: torch.Tensor,
    cells: torch.Tensor,
) -> torch.Tensor:
    """(B, V) change of the first slot's price terms when the shelf cells (b, t) (N,) hold
    ``cells`` (N, S): non-zero in the changed products' and their substitutes' columns only.
    Updates ``out.shelf`` in place."""
    src, dst = response.substitute_edges
    cols = torch.cat([t, dst[torch.isin(src, t.unique())]]).unique()  # (C,)
    h, rows = out.hidden[:, 1], torch.arange(shelf.shape[0])  # (B, D) the first slot
    before = response(h, out.shelf[:, cols], rows, cols)  # (B, C)
    response.replace_cells(out.shelf, shelf, b, t, cells)
    delta = torch.zeros(shelf.shape[:2], dtype=before.dtype)
    delta[:, cols] = response(h, out.shelf[:, cols], rows, cols) - before
    return delta


def _event_table(
    model, data, samples, test_rows, fit, events, categories, chunk: int
) -> pl.DataFrame:
    """Every event's observed units and every method's units with and without the promotion:
    the world model from the test baskets' contexts, the baselines fitted on ``fit`` (the
    panel's training and validation weeks)."""
    hier = HierarchicalLogLog.fit(fit, categories).predict(events)
    base = unpromoted_level(fit, events)
    depth = events["depth"].fill_null(np.nan).to_numpy()
    model_on, model_off = model_event_units(model, data, test_rows, samples, events, chunk)
    return (
        events.drop("promo")
        .rename({"units": "observed_units"})
        .with_columns(
            predicted_units=model_on,
            predicted_units_no_promotion=model_off,
            hierarchical_loglog_units=hier["units_promoted"],
            hierarchical_loglog_units_no_promotion=hier["units_unpromoted"],
            constant_elasticity_units=pl.Series(constant_elasticity_units(base, depth)),
            constant_elasticity_units_no_promotion=pl.Series(base),
            no_response_units=pl.Series(base),
            no_response_units_no_promotion=pl.Series(base),
        )
    )


def _lifts_by_method(observed: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """One row per product: its observed lift and every method's predicted lift."""
    products = observed.rename({"lift": "observed_lift"})
    for name, (on, off) in METHODS.items():
        lifts = predicted_lifts(table, on, off).select("product_id", pl.col("lift").alias(name))
        products = products.join(lifts, on="product_id", how="left", maintain_order="left")
    return products

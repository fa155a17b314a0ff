"""Sum the world model's baskets over shoppers into cells (``world_demand``): every context
(customer × store × week, with its expected trips as ``weight``) is scored once, its (V,) chance
that the basket holds each product (``counterfactual.simulate.units_of``) weighted and added
into its store's row of the week; the forecast cells then read their (store, product) entries.

The promotion counterfactual comes from the same pass: the shelf enters only the slot's price
terms (D39), so removing the promoted cells' promotions (regular price, off display, out of the
mailer) moves the price terms of those products and of their substitutes only
(``response.price_events.price_change``), and the basket is mixed again.

Cost grows with the contexts (one model pass each, V-wide), never with stores × products: a
week's store rows are the stores its contexts are at.

Glossary: B contexts of a batch, S stores of a week, V' the model's columns, N cells, K promoted
(context, product) pairs of a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from retailsim_core.counterfactual.simulate import units_of
from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.shelf import SHELF_FEATURES
from retailsim_core.demand.world.world_demand import CONTEXT_COLUMNS
from retailsim_core.models.heads.products import mixture_log_probs
from retailsim_core.models.world_model import WorldModel
from retailsim_core.response.price_events import price_change, without_promotion
from retailsim_core.serving.context import ServingData

KEY = ["product_id", "store_id", "week"]
SHELF_LINE_COLUMNS = [SHELF_FEATURES.index(f) for f in ("discount_depth", "display", "mailer")]


def line_units(
    mean: torch.Tensor, coefficients: dict[str, float] | None, shelf: torch.Tensor
) -> torch.Tensor:
    """(B, V) units per line of each product (``mean`` (V,)) on each context's shelf (B, V, 3:
    depth, display, mailer): ``world_demand.cell_quantity``'s stock-up, 1 + (mean - 1) ·
    exp(b_display · display + b_mailer · mailer + b_price · log(1 - depth)); ``mean`` itself
    without ``coefficients``."""
    if coefficients is None:
        return mean.expand(shelf.shape[:2])
    b = {k: coefficients.get(k) or 0.0 for k in ("display", "mailer", "log_price_index")}
    shelf = shelf.double()
    index = torch.log(1.0 - shelf[..., 0].clamp(0.0, 0.95))
    effect = b["display"] * shelf[..., 1] + b["mailer"] * shelf[..., 2]
    return 1.0 + (mean - 1.0).clamp(min=0.0) * torch.exp(effect + b["log_price_index"] * index)


@dataclass(frozen=True)
class ShopperUnits:
    buyers: np.ndarray  # (N,) expected baskets holding each cell's product
    buyers_unpromoted: np.ndarray  # (N,) the same with the promoted cells' promotions removed
    depth: np.ndarray  # (N,) each cell's discount depth on its store's shelf that week
    totals: dict[int, float]  # week -> sum of weight · held · quantity over every product


@torch.no_grad()
def shopper_units(
    models: Mapping[int, WorldModel],
    data: ServingData,
    contexts: pl.DataFrame,
    cells: pl.DataFrame,
    quantity: np.ndarray,
    promoted: pl.DataFrame | None = None,
    batch_size: int = 256,
    coefficients: dict[str, float] | None = None,
) -> ShopperUnits:
    """``models``: the model of each week; ``contexts``: ``forecast_contexts`` rows (their
    stores known to ``data``); ``cells``: product_id, store_id, week; ``quantity``: (V,) units
    per line of each token (``totals``), moved by the quantity model's ``coefficients`` at each
    context's shelf (display, mailer, discount) as the forecast's units per line are (None:
    as given); ``promoted``: the cells (product_id, store_id, week)
    whose promotion the unpromoted forecast removes. A cell no context reaches (its store or
    product unknown) is 0."""
    tokens = data.vocab.frame().select("product_id", "token")
    keyed = _tokens(cells, tokens).with_row_index("cell")
    plan = _tokens(promoted if promoted is not None else cells.clear(), tokens).drop_nulls("token")
    on, off, depth = np.zeros(cells.height), np.zeros(cells.height), np.zeros(cells.height)
    totals = {}
    q = torch.tensor(np.asarray(quantity, dtype=np.float64))  # (V,) the vocabulary's tokens
    n_q = len(q)
    for (week,), part in contexts.sort("week").group_by("week", maintain_order=True):
        model = models[int(week)]
        model.train(False)
        stores = part["store_id"].unique().sort()
        row_of = pl.DataFrame({"store_id": stores, "row": pl.int_range(stores.len(), eager=True)})
        # Short histories together: a batch pads to its longest (as the service does).
        part = (
            part.with_columns(history=pl.Series(data.history_trips(part.select(CONTEXT_COLUMNS))))
            .sort("history", "customer_id", "store_id", "date", "hour")
            .join(row_of, on="store_id", how="left", maintain_order="left")
        )
        week_plan = plan.filter(pl.col("week") == week)
        # (S, V') V' = the model's columns: the vocabulary and its special tokens after it
        acc = torch.zeros(stores.len(), model.vocab_size, dtype=torch.float64)
        acc_off = acc.clone()
        # (S, V, 3) each store-week's shelf: every context of a store-week sees the same one,
        # so its lines' units are a store row's, applied to the row's summed baskets
        shelf_rows = torch.zeros(stores.len(), data.vocab.size, len(SHELF_LINE_COLUMNS))
        for lo in range(0, part.height, batch_size):
            chunk = part.slice(lo, batch_size)
            held, held_off, shelf = _basket_units(model, data, chunk, week_plan)
            weight = torch.tensor(chunk["weight"].to_numpy())[:, None]  # (B, 1)
            rows = torch.tensor(chunk["row"].to_numpy())
            acc.index_add_(0, rows, held.double() * weight)
            acc_off.index_add_(0, rows, held_off.double() * weight)
            shelf_rows[rows] = shelf
        per_line = line_units(q, coefficients, shelf_rows[:, :n_q])  # (S, V)
        totals[int(week)] = float((acc[:, :n_q] * per_line).sum())
        shelf_depth = shelf_rows[..., 0]  # (S, V)
        found = (
            keyed.filter(pl.col("week") == week)
            .join(row_of, on="store_id", how="inner")
            .drop_nulls("token")
        )
        at = (found["row"].to_numpy(), found["token"].to_numpy())
        on[found["cell"].to_numpy()] = acc[at].numpy()
        off[found["cell"].to_numpy()] = acc_off[at].numpy()
        depth[found["cell"].to_numpy()] = shelf_depth[at].numpy()
    return ShopperUnits(on, off, depth, totals)


def _tokens(cells: pl.DataFrame, tokens: pl.DataFrame) -> pl.DataFrame:
    return cells.select(*KEY).with_columns(pl.col("week").cast(pl.Int64)).join(
        tokens, on="product_id", how="left", maintain_order="left"
    )  # fmt: skip


def _basket_units(
    model: WorldModel, data: ServingData, chunk: pl.DataFrame, plan: pl.DataFrame
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, V') held units of each context's basket, as the shelf has it and with the
    promotions of ``plan``'s cells at the context's store removed (the same where none); (B, V,
    3) each product's discount depth, display and mailer on the context's shelf."""
    batch = data.batch(chunk.select(CONTEXT_COLUMNS))
    cut = batch["shelf"][..., SHELF_LINE_COLUMNS]
    pairs = (
        chunk.select("store_id").with_row_index("b").join(plan, on="store_id")
    )  # (K,) a context's promoted products at its store this week
    bk = torch.tensor(pairs["b"].to_numpy()).long()
    tk = torch.tensor(pairs["token"].to_numpy()).long()
    return *held_units(model, batch, bk, tk, without_promotion), cut


def held_units(
    model: WorldModel,
    batch: Batch,
    b: torch.Tensor,
    t: torch.Tensor,
    change: Callable[[torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, V') held units of each context's basket as the batch's shelf has it, and with the
    shelf cells (b, t) (K,) replaced by ``change`` of them ((K, S) -> (K, S)): the changed
    products' and their substitutes' price terms move, the basket is mixed again. The same
    tensor twice where nothing changes or the model reads no prices."""
    out = model.query_pass(batch)
    n = len(batch["basket_labels"])
    explore, repeat, products, share, excluded = model.slot_terms(
        out, torch.arange(n), torch.zeros(n, dtype=torch.long)
    )
    held = units_of(out.size_logits, mixture_log_probs(explore, repeat, products, share, excluded))
    if len(b) == 0 or out.shelf is None:
        return held, held
    shelf = batch["shelf"]  # (B, V, S)
    delta = price_change(model.price_response, out, shelf, b, t, change(shelf[b, t]))
    explore = explore + delta
    repeat = repeat + delta.gather(1, products) if repeat is not None else None
    changed = units_of(
        out.size_logits, mixture_log_probs(explore, repeat, products, share, excluded)
    )
    return held, changed

"""Basket simulation and price sensitivity with a trained world model (design §4.3.2, §6.2).

- ``generate``: baskets for given contexts (customer history, store, week, optionally the
  mission): a size drawn from the size head, then the slots filled one by one (decision D34:
  each step is the suffix-masking query the model was trained on), never [PAD] or a product
  twice; seeded; with the week's prices or counterfactual ones (``log_multipliers``) (D53).
- ``expected_units``: expected units of every product for the contexts, a differentiable function
  of log price multipliers: basket size x the first-slot distribution.
- ``elasticities``: own and cross price elasticities d log E_i / d log p_j by autograd, sparsified
  to own, top-K cross and same-category pairs.

Glossary: B contexts, V vocabulary, P = 9 T4 price inputs, S shelf features.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import scipy.sparse as sp
import torch

from retailsim_core.datasets.batch import Batch, batch_range
from retailsim_core.datasets.shelf import with_price_multipliers
from retailsim_core.datasets.tensors import PRICE_COLUMNS
from retailsim_core.datasets.tokens import PAD, ProductVocab
from retailsim_core.models.world_model import WorldModel
from retailsim_core.storage.heap import release_free_heap

# Contexts to differentiate or sum over: a built batch, or a function that builds rows
# [start, stop) of one on demand, so that a chunk's dense shelf is all that is ever held
# (at 61,448 products, 256 contexts' shelves are 0.4 GB: D127).
Contexts = Batch | Callable[[int, int], Batch]


def contexts_range(contexts: Contexts, start: int, stop: int) -> Batch:
    """Rows [start, stop) of ``contexts``: built on demand, or views of a built batch."""
    return contexts(start, stop) if callable(contexts) else batch_range(contexts, start, stop)


def price_book(
    price_features: pl.DataFrame, store_ids: list[str], weeks: list[int], vocab: ProductVocab
) -> torch.Tensor:
    """(B, V, P) T4 inputs of every product at each context's store and week (0 where the store
    does not carry it), from the ``price_features`` table."""
    keys = (
        pl.DataFrame({"store_id": store_ids, "week": weeks})
        .with_row_index("b")
        .with_columns(pl.col("week").cast(pl.Int16))
    )
    cells = price_features.join(keys, on=["store_id", "week"], how="inner").join(
        vocab.frame(), on="product_id", how="inner"
    )
    book = np.zeros((len(store_ids), vocab.size, len(PRICE_COLUMNS)), dtype=np.float32)
    book[cells["b"].to_numpy(), cells["token"].to_numpy()] = cells.select(
        pl.col(PRICE_COLUMNS).cast(pl.Float32).fill_null(0.0)
    ).to_numpy()
    return torch.from_numpy(book)


def reprice_book(book: torch.Tensor, log_multiplier: torch.Tensor) -> torch.Tensor:
    """T4 inputs after multiplying prices by exp(log_multiplier) (V,) or (B, V)."""
    m = torch.exp(log_multiplier)
    carried = (book[..., 0] > 0).to(book.dtype)
    out = book.clone()
    out[..., 0] = book[..., 0] * m
    out[..., 1] = book[..., 1] + log_multiplier * carried
    out[..., 2] = book[..., 2] * m
    out[..., 6] = torch.clamp(1 - (1 - book[..., 6]) * m, min=0.0) * carried
    out[..., 7] = (out[..., 6] > 0.05).to(book.dtype) * carried
    return out


def _with_prices(batch: Batch, log_multiplier: torch.Tensor | None) -> Batch:
    if log_multiplier is None or "shelf" not in batch:
        return batch
    return {**batch, "shelf": with_price_multipliers(batch["shelf"], log_multiplier)}


@torch.no_grad()
def size_distribution(
    model: WorldModel, batch: Batch, given_mission: torch.Tensor | None = None
) -> torch.Tensor:
    """(B, max_items) P(the basket holds k + 1 products) from the context (size head)."""
    out, _ = model.next_basket(batch, given_mission=given_mission)
    return torch.softmax(out.size_logits.double(), -1)


@torch.no_grad()
def expected_basket_size(model: WorldModel, batch: Batch) -> torch.Tensor:
    """(B,) E[number of products] of each context's basket under the size head: a constant to
    every derivative taken of it (a price multiplier never reaches it), so it keeps no graph
    (with one, every (B, V) activation of the forward stayed alive with it: D126)."""
    p = size_distribution(model, batch)
    return (p * torch.arange(1, p.shape[1] + 1, dtype=p.dtype)).sum(1).float()


@torch.no_grad()
def generate(
    model: WorldModel,
    batch: Batch,
    book: torch.Tensor,
    *,
    seed: int,
    log_multiplier: torch.Tensor | None = None,
    temperature: float = 1.0,
    given_mission: torch.Tensor | None = None,
    sizes: torch.Tensor | None = None,
) -> list[list[int]]:
    """Sampled baskets (product tokens) for the contexts of ``batch``. The size is drawn from the
    size head (or given as ``sizes`` (B,)); then each slot is filled from the model's distribution
    given the products already chosen. ``given_mission`` (B,): rows told their true mission (T6
    type and focus), else none. ``book``: (B, V, P) from ``price_book``."""
    model.train(False)
    gen = torch.Generator().manual_seed(seed)
    b_size = len(book)
    if log_multiplier is not None:
        book = reprice_book(book, log_multiplier)
    batch = _with_prices(batch, log_multiplier)
    if sizes is None:
        probs = size_distribution(model, batch, given_mission)
        sizes = torch.multinomial(probs, 1, generator=gen)[:, 0] + 1
    sizes = sizes.clamp(1, model.cfg.max_items)
    # The context's part of the pass once; each slot decodes only the baskets still filling
    # (mean size ~9 of up to 50 slots on The Complete Journey: 5x fewer rows than all).
    enc = model.encode(batch, given_mission)
    n_slots = int(sizes.max())
    tokens = torch.full((b_size, n_slots), PAD, dtype=torch.long)
    prices = torch.zeros(b_size, n_slots, book.shape[-1])
    chosen = model.excluded(b_size)
    for t in range(n_slots):
        live = torch.nonzero(t < sizes).flatten()  # (M,)
        tokens[live, t] = model.mask_token
        seen = tokens[live, : t + 1]  # (M, t + 1) the products so far and the slot to fill
        out = model.decode(
            enc, seen, prices[live, : t + 1], hidden=seen == model.mask_token, rows=live
        )
        slot = torch.full((len(live),), t)
        log_p = model.slot_log_probs(out, live, slot, chosen[live]) / temperature
        pick = torch.multinomial(torch.softmax(log_p.double(), -1), 1, generator=gen)[:, 0]
        tokens[live, t] = pick
        chosen[live, pick] = True
        prices[live, t] = book[live, pick]
    return [[int(x) for x in row if 0 < x < model.mask_token] for row in tokens]


def first_slot_distribution(
    model: WorldModel, batch: Batch, log_multiplier: torch.Tensor | None = None
) -> torch.Tensor:
    """(B, V) probability of each product for a basket slot given the context (differentiable)."""
    _, log_p = model.next_basket(_with_prices(batch, log_multiplier))
    return log_p.exp()


def expected_units(
    model: WorldModel,
    batch: Batch,
    basket_size: torch.Tensor,
    log_multiplier: torch.Tensor | None = None,
) -> torch.Tensor:
    """(V,) expected units over the contexts: sum_b held(size_b, P_b(product))."""
    return held(basket_size[:, None], first_slot_distribution(model, batch, log_multiplier)).sum(0)


@torch.no_grad()
def sizes_and_units(
    model: WorldModel, contexts: Contexts, n: int, chunk: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n,) ``expected_basket_size`` and (V,) ``expected_units`` of the ``n`` contexts,
    ``chunk`` of them a forward (None: all): a chunk's (chunk, V) activations at once, not the
    batch's (D126). The units add the chunks' sums."""
    step = n if chunk is None else max(1, chunk)
    sizes, units = [], torch.zeros(model.vocab_size, dtype=torch.float64)
    for start in range(0, n, step):
        part = contexts_range(contexts, start, min(start + step, n))
        sizes.append(expected_basket_size(model, part))
        units += expected_units(model, part, sizes[-1]).double()
        del part  # before the next chunk's batch is built (D127)
        release_free_heap()
    return torch.cat(sizes), units


@torch.no_grad()
def basket_units(model: WorldModel, batch: Batch) -> torch.Tensor:
    """(B, V) each basket's expected units of every product (``held``), from one forward pass
    (``expected_units`` per basket, without gradients)."""
    out, log_p = model.next_basket(batch)
    return units_of(out.size_logits, log_p)


def units_of(size_logits: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
    """(B, V) float32 ``held`` units from the size head's logits and a slot's (B, V)
    log-probabilities."""
    return held(mean_size(size_logits)[:, None], log_p.double().exp()).float()


def held(size: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Expected units of a product in a basket of ``size`` expected products whose slots each
    draw it with probability ``p`` (broadcast): 1 - (1 - p) ** size, the chance the basket
    holds it. A basket lists a product once (a line per product, its quantity apart), so
    units are baskets holding the product, what the data counts; size x p would count a
    best seller once per slot that could draw it (D95). Differentiable; float64 in, out."""
    return -torch.expm1(size * torch.log1p(-p.clamp(max=1.0 - 1e-12)))


def mean_size(size_logits: torch.Tensor) -> torch.Tensor:
    """(B,) E[number of products] from the size head's logits (B, max_items), float64."""
    size = torch.softmax(size_logits.double(), -1)
    return (size * torch.arange(1, size.shape[1] + 1, dtype=size.dtype)).sum(1)


def jacobian_rows(
    model: WorldModel,
    contexts: Contexts,
    basket_size: torch.Tensor,
    products: np.ndarray,
    chunk: int | None = None,
) -> np.ndarray:
    """(len(products), V) d log E_i / d log p_j for each i in ``products``: one backward pass per
    i and chunk of ``chunk`` contexts (None: all at once). E_i sums over contexts, so chunks add
    their dE_i / d log p and their E_i: d log E_i = sum dE_i / sum E_i. A chunk's graph holds a
    few (chunk, V) matrices, not the whole batch's (issue #62)."""
    model.train(False)
    n = len(basket_size)
    chunk = n if chunk is None else max(1, chunk)
    grads = np.zeros((len(products), model.vocab_size))
    units_of_products = np.zeros(len(products))
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        log_m = torch.zeros(model.vocab_size, requires_grad=True)
        part = contexts_range(contexts, start, stop)
        units = expected_units(model, part, basket_size[start:stop], log_m)
        for a, i in enumerate(products):
            (grad,) = torch.autograd.grad(units[int(i)], log_m, retain_graph=a < len(products) - 1)
            grads[a] += grad.numpy()
        units_of_products += units.detach().double().numpy()[np.asarray(products, dtype=np.int64)]
        del units, part  # the chunk's graph, before its freed buffers go back (D126)
        release_free_heap()
    return grads / units_of_products[:, None]


def elasticities(
    model: WorldModel,
    contexts: Contexts,
    basket_size: torch.Tensor,
    products: np.ndarray,
    categories: np.ndarray,
    top_k: int = 5,
    chunk: int | None = None,
) -> pl.DataFrame:
    """Elasticities d log E_i / d log p_j for i, j in ``products`` (tokens). Kept: own (i = j),
    the top-K cross pairs by |elasticity| per product, and all pairs within a category.
    Columns: product, other, elasticity, kind. ``chunk``: contexts per backward pass."""
    products = np.asarray(products)
    jac = jacobian_rows(model, contexts, basket_size, products, chunk)[:, products]
    own = np.eye(len(products), dtype=bool)
    same = categories[products][:, None] == categories[products][None, :]
    cross = np.where(own, 0.0, np.abs(jac))
    top = np.zeros_like(own)
    k = min(top_k, len(products) - 1)
    if k > 0:
        top[np.arange(len(products))[:, None], np.argsort(-cross, axis=1)[:, :k]] = True
    keep = sp.coo_matrix(own | same | top)
    kind = np.where(
        own[keep.row, keep.col],
        "own",
        np.where(same[keep.row, keep.col], "same_category", "top_cross"),
    )
    return pl.DataFrame(
        {
            "product": products[keep.row],
            "other": products[keep.col],
            "elasticity": jac[keep.row, keep.col],
            "kind": kind,
        }
    ).sort("product", "kind", "other")

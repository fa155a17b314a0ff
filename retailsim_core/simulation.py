"""Basket simulation and price sensitivity with a trained world model (spec §4.3.2, §6.2).

- ``generate``: baskets for given contexts (customer history, store, week, mission), filled slot
  by slot (decision D34: each step is the suffix-masking query the model was trained on) until
  [EOS] or 50 products, never [PAD] or a product twice; seeded; with the week's prices or
  counterfactual ones (``log_multipliers``).
- ``expected_units``: expected units of every product for the contexts, a differentiable function
  of log price multipliers: basket size x the first-slot distribution.
- ``elasticities``: own and cross price elasticities d log E_i / d log p_j by autograd, sparsified
  to own, top-K cross and same-category pairs.

Glossary: B contexts, V vocabulary, P = 9 T4 price inputs, S shelf features.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import scipy.sparse as sp
import torch

from retailsim_core.customers import MISSION_FOCI, MISSION_TYPES
from retailsim_core.models.world_model import WorldModel
from retailsim_core.shelf import with_price_multipliers
from retailsim_core.tensors import PRICE_COLUMNS
from retailsim_core.tokens import PAD, ProductVocab

MAX_ITEMS = 50


def price_book(price_features: pl.DataFrame, store_ids: list[str], weeks: list[int], vocab: ProductVocab) -> torch.Tensor:
    """(B, V, P) T4 inputs of every product at each context's store and week (0 where the store
    does not carry it), from the ``price_features`` table."""
    keys = pl.DataFrame({"store_id": store_ids, "week": weeks}).with_row_index("b").with_columns(pl.col("week").cast(pl.Int16))
    cells = (price_features.join(keys, on=["store_id", "week"], how="inner")
             .join(vocab.frame(), on="product_id", how="inner"))
    book = np.zeros((len(store_ids), vocab.size, len(PRICE_COLUMNS)), dtype=np.float32)
    book[cells["b"].to_numpy(), cells["token"].to_numpy()] = cells.select(
        pl.col(PRICE_COLUMNS).cast(pl.Float32).fill_null(0.0)).to_numpy()
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


def sample_missions(batch: dict, t1_names: tuple[str, ...], rng: np.random.Generator) -> torch.Tensor:
    """T6 with mission type and focus drawn from each customer's as-of-W mission distributions (in
    T1, ``TrainingSet.t1_names``); price sensitivity and size left unknown (0) for the model to
    infer. The "sampled" mission of spec §4.7.1's dual use."""
    t6 = torch.zeros_like(batch["t6"])
    probs = batch["t1_numeric"].numpy().astype(np.float64)
    for col, names in ((0, MISSION_TYPES), (1, MISSION_FOCI)):
        p = probs[:, [t1_names.index(n) for n in names]]
        p = np.where(p.sum(1, keepdims=True) > 0, p, 1.0)                             # no history: uniform
        p /= p.sum(1, keepdims=True)
        draws = (rng.random((len(p), 1)) > np.cumsum(p, 1)).sum(1)
        t6[:, col] = torch.from_numpy(np.minimum(draws, p.shape[1] - 1) + 1)
    return t6


def _with_prices(batch: dict, log_multiplier: torch.Tensor | None) -> dict:
    if log_multiplier is None or "shelf" not in batch:
        return batch
    return {**batch, "shelf": with_price_multipliers(batch["shelf"], log_multiplier)}


@torch.no_grad()
def generate(model: WorldModel, batch: dict, book: torch.Tensor, *, seed: int, log_multiplier: torch.Tensor | None = None,
             temperature: float = 1.0, max_items: int = MAX_ITEMS) -> list[list[int]]:
    """Sampled baskets (product tokens, no [EOS]) for the contexts of ``batch``; its ``t6`` is the
    mission given to the model: the true one, one from ``sample_missions``, or zeros to let the
    model infer it. ``book``: (B, V, P) from ``price_book``."""
    model.train(False)
    gen = torch.Generator().manual_seed(seed)
    b_size, vocab = len(book), model.vocab_size
    eos, mask = vocab - 1, vocab - 2
    if log_multiplier is not None:
        book = reprice_book(book, log_multiplier)
    batch = _with_prices(batch, log_multiplier)
    tokens = torch.full((b_size, 1), mask, dtype=torch.long)
    prices = torch.zeros(b_size, 1, book.shape[-1])
    chosen = torch.zeros(b_size, vocab, dtype=torch.bool)
    chosen[:, [PAD, mask]] = True
    done = torch.zeros(b_size, dtype=torch.bool)
    rows = torch.arange(b_size)
    for t in range(max_items + 1):
        out = model({**batch, "t4_prices": prices}, tokens, hidden=tokens == mask)
        logits = model.product_logits(out, rows, torch.full((b_size,), t)) / temperature
        logits = logits.masked_fill(chosen, -torch.inf)
        if t == 0:
            logits[:, eos] = -torch.inf                                              # no empty baskets
        if t == max_items:
            pick = torch.full((b_size,), eos)
        else:
            pick = torch.multinomial(torch.softmax(logits.double(), -1), 1, generator=gen)[:, 0]
        pick = torch.where(done, torch.full_like(pick, PAD), pick)
        done = done | (pick == eos)
        tokens[:, t] = pick
        chosen[rows, pick] = True
        prices[:, t] = book[rows, pick] * (pick != eos)[:, None]
        if done.all():
            break
        tokens = torch.cat([tokens, torch.where(done, PAD, mask)[:, None]], dim=1)
        prices = torch.cat([prices, torch.zeros(b_size, 1, book.shape[-1])], dim=1)
    return [[int(x) for x in row if 0 < x < mask] for row in tokens]


def first_slot_distribution(model: WorldModel, batch: dict, log_multiplier: torch.Tensor | None = None) -> torch.Tensor:
    """(B, V) probability of each product for a basket slot given the context (differentiable)."""
    _, logits = model.next_basket(_with_prices(batch, log_multiplier))
    return torch.softmax(logits, -1)


def expected_units(model: WorldModel, batch: dict, basket_size: torch.Tensor,
                   log_multiplier: torch.Tensor | None = None) -> torch.Tensor:
    """(V,) expected units over the contexts: sum_b size_b * P_b(product)."""
    return (basket_size[:, None] * first_slot_distribution(model, batch, log_multiplier)).sum(0)


def jacobian_rows(model: WorldModel, batch: dict, basket_size: torch.Tensor, products: np.ndarray) -> np.ndarray:
    """(len(products), V) d log E_i / d log p_j for each i in ``products``: one backward pass per i."""
    model.train(False)
    log_m = torch.zeros(model.vocab_size, requires_grad=True)
    units = expected_units(model, batch, basket_size, log_m)
    rows = np.zeros((len(products), model.vocab_size))
    for a, i in enumerate(products):
        (grad,) = torch.autograd.grad(torch.log(units[int(i)]), log_m, retain_graph=a < len(products) - 1)
        rows[a] = grad.numpy()
    return rows


def elasticities(model: WorldModel, batch: dict, basket_size: torch.Tensor, products: np.ndarray,
                 categories: np.ndarray, top_k: int = 5) -> pl.DataFrame:
    """Elasticities d log E_i / d log p_j for i, j in ``products`` (tokens). Kept: own (i = j),
    the top-K cross pairs by |elasticity| per product, and all pairs within a category.
    Columns: product, other, elasticity, kind."""
    products = np.asarray(products)
    jac = jacobian_rows(model, batch, basket_size, products)[:, products]
    own = np.eye(len(products), dtype=bool)
    same = categories[products][:, None] == categories[products][None, :]
    cross = np.where(own, 0.0, np.abs(jac))
    top = np.zeros_like(own)
    k = min(top_k, len(products) - 1)
    if k > 0:
        top[np.arange(len(products))[:, None], np.argsort(-cross, axis=1)[:, :k]] = True
    keep = sp.coo_matrix(own | same | top)
    kind = np.where(own[keep.row, keep.col], "own", np.where(same[keep.row, keep.col], "same_category", "top_cross"))
    return pl.DataFrame({"product": products[keep.row], "other": products[keep.col],
                         "elasticity": jac[keep.row, keep.col], "kind": kind}).sort("product", "kind", "other")

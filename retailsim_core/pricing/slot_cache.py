"""A next-basket slot scored for a category's prices at the cost of the category, not of the
vocabulary (D89): the fast path of ``WorldModel.slot_log_probs`` for a pricing panel.

A price vector changes the shelf rows of the n priced products only (``with_price_multipliers``),
so of the slot's logits only the *affected* columns move: the priced products and the products
whose substitutes' mean depth reads a priced product's depth. Everything else is computed once
per week at the historical shelf: the explore logits without their price term, and the
log-normaliser of every other column (``log_z_rest``). A price vector then costs O(B x a)
instead of O(B x V): on The Complete Journey a = tens and V = 61,445.

The panel's tests check it against the model's full forward pass (``expected_units``).

Glossary: B contexts (one slot each), V vocabulary, D model width, S shelf features, n priced
products, a affected columns (priced first), U history products of the repeat head, K price
vectors scored together.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from retailsim_core.datasets.shelf import SHELF_FEATURES, with_price_multipliers
from retailsim_core.datasets.tokens import PAD
from retailsim_core.models.heads.products import NEG
from retailsim_core.models.world_model import ModelOutput, WorldModel

_LOG_PRICE, _DEPTH, _PROMO = (SHELF_FEATURES.index(f) for f in SHELF_FEATURES[:3])
_AVAILABLE = SHELF_FEATURES.index("available")


@dataclass(frozen=True)
class SlotCache:
    """What a price vector leaves unchanged in the first slot of B contexts."""

    n: int  # priced products: columns[:n]
    columns: torch.Tensor  # (a,) affected tokens, the priced ones first
    h: torch.Tensor  # (B, D) the slot's states
    shelf: torch.Tensor  # (B, a, S) the affected columns' shelf, the priced ones at regular
    explore: torch.Tensor  # (B, a) explore logits without their price term
    log_z_rest: torch.Tensor  # (B,) log-normaliser of the unaffected columns (historical)
    depth_sum: torch.Tensor  # (B, a) summed depths of each column's unpriced substitutes
    edge_src: torch.Tensor  # (E,) priced position of each edge's priced substitute...
    edge_dst: torch.Tensor  # (E,) ...and the affected position it feeds
    inverse_degree: torch.Tensor  # (a,)
    log_pi: torch.Tensor  # (B,) log share of repeats (NEG without a history product)
    log_rest: torch.Tensor  # (B,) log share of exploration
    repeat: torch.Tensor | None  # (B, U) repeat logits without their price term
    repeat_price: torch.Tensor | None  # (B, U) their historical price term
    repeat_at: torch.Tensor | None  # (B, U) affected position of each history product, or a
    repeat_invalid: torch.Tensor | None  # (B, U)


def regular_rows(shelf: torch.Tensor) -> torch.Tensor:
    """(..., S) the shelf with its promotions' price cuts removed (display and mailer kept)."""
    available = shelf[..., _AVAILABLE]
    depth = shelf[..., _DEPTH].clamp(max=0.99)
    out = shelf.clone()
    out[..., _LOG_PRICE] = shelf[..., _LOG_PRICE] - torch.log1p(-depth) * available
    out[..., _DEPTH] = 0.0
    out[..., _PROMO] = 0.0
    return out


@torch.no_grad()
def build_cache(
    model: WorldModel, out: ModelOutput, shelf: torch.Tensor, products: torch.Tensor
) -> SlotCache:
    """The cache of the first slot of ``out``'s B contexts at their historical ``shelf``
    (B, V, S), for the priced ``products`` (n,) tokens."""
    b, v = shelf.shape[:2]
    response = model.price_response
    src, dst = response.substitute_edges
    priced = torch.zeros(v, dtype=torch.bool)
    priced[products] = True
    fed = torch.zeros(v, dtype=torch.bool)
    fed[dst[priced[src]]] = True
    others = torch.nonzero(fed & ~priced).flatten()
    columns = torch.cat([products, others])  # (a,)
    position = torch.full((v,), columns.numel(), dtype=torch.long)  # a: not affected
    position[columns] = torch.arange(columns.numel())

    rows = torch.arange(b)
    h = out.hidden[:, 1]  # (B, D) the first slot (after the context token)
    emb = model.item_out(model.product_table)  # (V, D)
    explore = model.query(h) @ emb.T / model.cfg.d_model**0.5 + model.item_bias  # (B, V)
    if out.season is not None:
        explore = explore + torch.einsum("ms,mvs->mv", model.season_weights(h), out.season)
    feats = out.shelf if out.shelf is not None else response.features(shelf)  # (B, V, 2 + P)
    price = response(h, feats, rows)  # (B, V) historical price term
    excluded = model.excluded(b)
    rest = (explore + price).masked_fill(excluded, NEG)
    rest[:, columns] = -torch.inf
    log_z_rest = torch.logsumexp(rest, 1)  # (B,)

    depth = shelf[..., _DEPTH]  # (B, V)
    fixed = ~priced[src] & (position[dst] < columns.numel())
    depth_sum = torch.zeros(b, columns.numel()).index_add(
        1, position[dst[fixed]], depth[:, src[fixed]]
    )
    moving = priced[src]
    cached = dict(
        n=products.numel(),
        columns=columns,
        h=h,
        shelf=torch.cat([regular_rows(shelf[:, products]), shelf[:, others]], 1),
        explore=explore[:, columns],
        log_z_rest=log_z_rest,
        depth_sum=depth_sum,
        edge_src=position[src[moving]],
        edge_dst=position[dst[moving]],
        inverse_degree=response.inverse_degree[columns],
    )
    if out.repeat is None:
        zeros = torch.zeros(b)
        return SlotCache(
            **cached,
            log_pi=torch.full((b,), NEG),
            log_rest=zeros,
            repeat=None,
            repeat_price=None,
            repeat_at=None,
            repeat_invalid=None,
        )
    history = out.repeat_products  # (B, U)
    invalid = (history == PAD) | excluded.gather(1, history)
    has = ~invalid.all(1)
    share = model.repeat_share(h)[:, 0].masked_fill(~out.has_history, -30.0)
    return SlotCache(
        **cached,
        log_pi=torch.where(has, F.logsigmoid(share), torch.full_like(share, NEG)),
        log_rest=torch.where(has, F.logsigmoid(-share), torch.zeros_like(share)),
        repeat=model.repeat_head(out.repeat, rows, h),
        repeat_price=price.gather(1, history),
        repeat_at=position[history],
        repeat_invalid=invalid,
    )


def slot_probs(model: WorldModel, cache: SlotCache, log_m: torch.Tensor) -> torch.Tensor:
    """(K, B, n) p(priced product fills the slot) when their prices are regular x exp(log_m)
    (K, n); differentiable in ``log_m``. The same mixture as ``mixture_log_probs``."""
    k, (b, a) = log_m.shape[0], cache.explore.shape
    n = cache.n
    priced = with_price_multipliers(
        cache.shelf[:, :n].repeat(k, 1, 1), log_m.repeat_interleave(b, 0).to(cache.shelf.dtype)
    )  # (K * B, n, S)
    shelf = torch.cat([priced, cache.shelf[:, n:].repeat(k, 1, 1)], 1)  # (K * B, a, S)
    depth = priced[..., _DEPTH]  # (K * B, n)
    summed = cache.depth_sum.repeat(k, 1).index_add(1, cache.edge_dst, depth[:, cache.edge_src])
    feats = model.price_response.column_features(shelf, summed * cache.inverse_degree)
    h = cache.h.repeat(k, 1)
    price = model.price_response(h, feats, torch.arange(k * b), cache.columns)  # (K * B, a)
    logits = cache.explore.repeat(k, 1) + price
    log_z = torch.logaddexp(cache.log_z_rest.repeat(k), torch.logsumexp(logits, 1))
    log_explore = (logits[:, :n] - log_z[:, None]).double()
    p = (cache.log_rest.repeat(k).double()[:, None] + log_explore).exp()  # (K * B, n)
    if cache.repeat is not None:
        at = cache.repeat_at.repeat(k, 1)  # (K * B, U)
        moved = price.gather(1, at.clamp(max=a - 1))
        repeat_price = torch.where(at < a, moved, cache.repeat_price.repeat(k, 1))
        invalid = cache.repeat_invalid.repeat(k, 1)
        logits_u = (cache.repeat.repeat(k, 1) + repeat_price).masked_fill(invalid, NEG)
        p_u = F.log_softmax(logits_u, 1).double().exp().masked_fill(invalid, 0.0)
        p_rep = torch.zeros(k * b, a + 1, dtype=p.dtype).scatter_add(1, at, p_u)[:, :n]
        p = p + cache.log_pi.repeat(k).double().exp()[:, None] * p_rep
    return p.view(k, b, n)

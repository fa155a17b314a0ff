"""Product heads of the world model: where a basket slot's distribution over products comes from.

A slot's distribution is a mixture of two proper distributions (decision D51):

    p(c | h) = pi(h) * p_repeat(c | h) + (1 - pi(h)) * p_explore(c | h)

- ``p_explore``: a full softmax over the whole vocabulary (decoder state . tied product
  embedding + a per-product bias + the price response). Trained on every target with no
  sampling, it stays a marginal in which popular products are popular: a customer with no
  history gets a context-aware popularity ranking.
- ``p_repeat``: a softmax over the customer's own history products only, scored by
  ``RepeatHead`` from per-(customer, product) history statistics (``history_features.py``),
  the product's embedding and the slot's state, plus the price response.
- ``pi(h)``: the share of repeats, from the slot's state; 0 for a customer with no history.

Glossary: B baskets, U history products of a basket, F history features, M scored slots,
V vocabulary, D d_model, G product embedding width, P product responses, K categories.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from retailsim_core.datasets.history_features import (
    FOCUS_COLUMNS,
    HISTORY_FEATURES,
    TYPE_COLUMNS,
)
from retailsim_core.datasets.shelf import SHELF_FEATURES
from retailsim_core.datasets.tokens import PAD
from retailsim_core.models.weight_cache import WeightCache

# The price response reads the shelf in two groups: per-context weights on the price level and
# availability, per-product (pooled by category) weights on what a promotion changes.
CONTEXT_SHELF_FEATURES = ("log_relative_price", "available")
PRODUCT_SHELF_FEATURES = ("discount_depth", "display", "mailer")
_RESPONSE_COLUMNS = [
    SHELF_FEATURES.index(n) for n in CONTEXT_SHELF_FEATURES + PRODUCT_SHELF_FEATURES
]
# Product responses: own depth, substitutes' depth, display, mailer; the substitutes' lowers the
# score, the others raise it (sign-constrained, D45, D87). Initial raw values: softplus(0) = 0.69
# on the own depth; softplus(-4) = 0.018 (near zero, with a usable gradient under Adam). The
# plan responses (display, mailer) are pooled by category; the price responses are per product.
PRODUCT_RESPONSES = ("discount_depth", "substitutes_depth", "display", "mailer")
POOLED_RESPONSES = ("display", "mailer")
_POOLED = len(PRODUCT_RESPONSES) - len(POOLED_RESPONSES)
assert PRODUCT_RESPONSES[_POOLED:] == POOLED_RESPONSES
DEPTH_RESPONSES = PRODUCT_RESPONSES[:_POOLED]  # per product, started from the data (D88)
_SUBSTITUTES = len(CONTEXT_SHELF_FEATURES) + 1  # the feature after the own depth
_SIGNS = (1.0, -1.0, 1.0, 1.0)
_INITIAL_RAW = (0.0, -4.0, 0.0, 0.0)  # display, mailer: their category's start is -4
_INITIAL_CATEGORY_RAW = (-4.0, -4.0)
# Appended to F: the history counts of the given mission's trips (conditional mode), and of the
# product's substitutes (product-graph edges): a shopper who buys either of two substitutes
# buys the pair's "slot", and which member depends on this week's prices.
MISSION_FEATURES = ("log_count_given_type", "log_count_given_focus")
SUBSTITUTE_FEATURES = ("log_substitute_count",)
_COUNT = HISTORY_FEATURES.index("log_count")
NEG = -1e4  # "impossible" in log space: finite, so no NaN gradients through logaddexp


class PriceResponse(nn.Module):
    """Candidate-side price and promotion scores (decisions D39, D45, D87). Features of
    candidate c: its shelf log relative price and available flag (context features), and its
    own discount depth, the mean depth of its substitutes (product-graph edges), and whether it
    is on display or in the mailer (product features). The step-shaped promo flag is left out:
    its derivative is 0, so a response learned on it would be invisible to autograd
    elasticities. Score:

        sum_s f[c, s] * w_s(h)  +  exp(k(h)) * sum_p f[c, p] * a[c, p]

    w(h): how this context reacts to the price level and to availability; a[c]: the product's own
    response to its promotions and to its substitutes' (its elasticities), scaled per context by
    exp(k(h)). The price responses are the product's own: a[c] = softplus(d[c]) * sign (D45);
    the plan responses are pooled, a[c] = softplus(b[category(c)] + d[c]): a category's response
    plus the product's deviation from it, so a rarely displayed product starts at, and moves
    with, its category's until its own promotions say otherwise. Signs are fixed: a product's
    own promotion never lowers its score and a substitute's never raises it; only magnitudes
    are learned. w and k start at zero."""

    def __init__(
        self,
        d_model: int,
        vocab_size: int,
        substitutes: torch.Tensor,
        categories: torch.Tensor | None = None,
    ):
        super().__init__()
        self.register_buffer(
            "substitute_edges", substitutes.long().reshape(2, -1)
        )  # (2, E) src -> dst
        ones = torch.ones(self.substitute_edges.shape[1])
        degree = torch.zeros(vocab_size).index_add_(0, self.substitute_edges[1], ones)
        self.register_buffer(
            "inverse_degree", 1.0 / degree.clamp(min=1.0), persistent=False
        )  # (V,)
        if categories is None:
            categories = torch.zeros(vocab_size, dtype=torch.long)
        self.register_buffer("category_of", categories.long().reshape(vocab_size))  # (V,)
        self.register_buffer("response_columns", torch.tensor(_RESPONSE_COLUMNS), persistent=False)
        self.context_weights = nn.Linear(d_model, len(CONTEXT_SHELF_FEATURES))
        self.scale = nn.Linear(d_model, 1)
        for layer in (self.context_weights, self.scale):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
        n_categories = int(self.category_of.max()) + 1 if vocab_size else 1
        self.raw_category_weights = nn.Parameter(
            torch.tensor(_INITIAL_CATEGORY_RAW).repeat(n_categories, 1)
        )  # (K, 2) the plan responses' category parts
        self.raw_product_weights = nn.Parameter(
            torch.tensor(_INITIAL_RAW).repeat(vocab_size, 1)
        )  # (V, P); for the plan responses, deviations from the category
        self.register_buffer("product_signs", torch.tensor(_SIGNS), persistent=False)

    @property
    def product_weights(self) -> torch.Tensor:
        """(V, P) a[c]: >= 0 on the own depth, display and mailer, <= 0 on the substitutes'."""
        return self.weights_of(None)

    def weights_of(self, columns: torch.Tensor | None) -> torch.Tensor:
        """(C, P) a[c] of the candidates ``columns`` (C,); all V where None."""
        raw, category = self.raw_product_weights, self.category_of
        if columns is not None:
            raw, category = raw[columns], category[columns]
        pooled = F.pad(self.raw_category_weights[category], (_POOLED, 0))  # (C, P)
        return F.softplus(raw + pooled) * self.product_signs

    def features(self, shelf: torch.Tensor) -> torch.Tensor:
        """(B, V, S) shelf -> (B, V, 2 + P) response features: the context features, then own
        depth, substitutes' depth, display, mailer."""
        src, dst = self.substitute_edges
        depth = shelf[..., SHELF_FEATURES.index("discount_depth")]  # (B, V)
        sub = torch.zeros_like(depth).index_add(1, dst, depth[:, src]) * self.inverse_degree
        return self.column_features(shelf, sub)

    @torch.no_grad()
    def replace_cells(
        self,
        feats: torch.Tensor,
        shelf: torch.Tensor,
        rows: torch.Tensor,
        cols: torch.Tensor,
        cells: torch.Tensor,
    ) -> torch.Tensor:
        """``feats`` = ``features(shelf)`` (B, V, 2 + P), updated in place to the shelf whose N
        distinct cells (``rows``, ``cols``) (N,) hold ``cells`` (N, S): only those cells and
        the substitutes' mean depths they feed are recomputed, not the (B, V, S) shelf."""
        src, dst = self.substitute_edges
        at = SHELF_FEATURES.index("discount_depth")
        delta = torch.zeros(shelf.shape[:2], dtype=feats.dtype)  # (B, V) change of depth
        delta[rows, cols] = cells[:, at] - shelf[rows, cols, at]
        moved = torch.isin(src, cols.unique())
        shift = torch.zeros_like(delta).index_add(1, dst[moved], delta[:, src[moved]])
        feats[..., _SUBSTITUTES].add_(shift * self.inverse_degree)
        sub = feats[rows, cols, _SUBSTITUTES]  # (N,) the cells' own, after their substitutes'
        feats[rows, cols] = self.column_features(cells[:, None], sub[:, None])[:, 0]
        return feats

    def column_features(self, shelf: torch.Tensor, sub: torch.Tensor) -> torch.Tensor:
        """(B, C, S) shelf rows of C candidates and (B, C) their substitutes' mean depth ->
        (B, C, 2 + P) response features (``features`` for a subset of the vocabulary)."""
        picked = shelf.index_select(-1, self.response_columns)  # (B, C, 5)
        return torch.cat([picked[..., :3], sub[..., None], picked[..., 3:]], dim=-1)

    def forward(
        self,
        h: torch.Tensor,
        feats: torch.Tensor,
        rows: torch.Tensor,
        columns: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """h (M, D) states of slots in basket rows ``rows`` (M,); feats (B, V, 2 + P) -> (M, V);
        or feats (B, C, 2 + P) of the candidates ``columns`` (C,) -> (M, C)."""
        context = feats[..., : len(CONTEXT_SHELF_FEATURES)]
        product = feats[..., len(CONTEXT_SHELF_FEATURES) :]
        weights = self.weights_of(columns)
        own = (product * weights).sum(-1)  # (B, V) or (B, C)
        out = torch.exp(self.scale(h)) * own[rows]  # (M, V)
        for s, w in enumerate(self.context_weights(h).unbind(-1)):  # 2 features
            out = out.addcmul(w[:, None], context[..., s][rows])
        return out


class CopurchaseResponse(nn.Module):
    """A slot's affinity to the products already shown in its basket: the mean log-lift of the
    product graph's co-purchase edges from each shown product to the candidate (0 where none),
    weighted per slot by w(h). With nothing shown (a next-basket query) it adds nothing. The
    graph comes from training weeks only (design §2.3.3); the decoder could learn complements from
    the shown tokens too, but minutes of CPU training do not get there (D54)."""

    def __init__(self, d_model: int, vocab_size: int, edges: torch.Tensor, lift: torch.Tensor):
        super().__init__()
        self.vocab_size = vocab_size
        self.register_buffer("edges", edges.long().reshape(2, -1))  # (2, E) src -> dst
        self.register_buffer("log_lift", torch.log(lift.float().clamp(min=1.0)))  # (E,)
        self.weight = nn.Linear(d_model, 1)
        nn.init.zeros_(self.weight.weight)
        nn.init.zeros_(self.weight.bias)

    def matrix(self) -> torch.Tensor:
        """(V, V) sparse: row d, column s = log-lift of the edge s -> d (rebuilt per call, about a
        millisecond, so it can never go stale after ``load_state_dict``)."""
        src, dst = self.edges
        return torch.sparse_coo_tensor(
            torch.stack([dst, src]), self.log_lift, (self.vocab_size, self.vocab_size)
        ).coalesce()

    def forward(self, h: torch.Tensor, shown: torch.Tensor) -> torch.Tensor:
        """h (M, D), shown (M, V) bool -> (M, V) score offsets."""
        counts = shown.sum(1, keepdim=True).clamp(min=1).float()  # (M, 1)
        mean = torch.sparse.mm(self.matrix(), shown.T.float()).T / counts  # (M, V)
        return self.weight(h) * mean


def mission_features(values: torch.Tensor, basket_labels: torch.Tensor) -> torch.Tensor:
    """(B, U, 2): the history counts among trips of the basket's given mission type and focus
    (0 where the mission is not given: label code 0), from the per-type/focus columns."""
    by_type = F.pad(values[..., TYPE_COLUMNS], (1, 0))  # (B, U, 4), 0 = none
    by_focus = F.pad(values[..., FOCUS_COLUMNS], (1, 0))  # (B, U, 5)
    mission_type = basket_labels[:, 0].clamp(max=by_type.shape[-1] - 1)  # XX -> no class
    focus = basket_labels[:, 1].clamp(max=by_focus.shape[-1] - 1)

    def pick(table, code):
        return table.gather(-1, code[:, None, None].expand(-1, table.shape[1], 1))

    return torch.cat([pick(by_type, mission_type), pick(by_focus, focus)], dim=-1)


def substitute_counts(
    values: torch.Tensor, products: torch.Tensor, edges: torch.Tensor, vocab_size: int
) -> torch.Tensor:
    """(B, U, 1) log(1 + history count of each product's substitutes), from the log counts of the
    row's history products and the (2, E) substitution edges (src -> dst)."""
    counts = torch.expm1(values[..., _COUNT]) * (products != PAD)  # (B, U)
    dense = counts.new_zeros(products.shape[0], vocab_size)  # (B, V)
    dense = dense.scatter_add(1, products, counts)
    src, dst = edges
    subs = torch.zeros_like(dense).index_add(1, dst, dense[:, src])  # (B, V)
    return torch.log1p(subs.gather(1, products))[..., None]


class RepeatHead(nn.Module):
    """Scores of each basket's history products (ReCANet-style, decision D51). A product's
    encoding mixes its standardised history statistics (plus those of the given mission) and
    its embedding; a slot's score is a base score plus a low-rank interaction with the slot's
    state (the store, time, mission and the other items of the basket shape which repeats)."""

    def __init__(self, d_model: int, product_dim: int, hidden: int, rank: int):
        super().__init__()
        n = len(HISTORY_FEATURES) + len(MISSION_FEATURES) + len(SUBSTITUTE_FEATURES)
        self.register_buffer("feature_shift", torch.zeros(n))
        self.register_buffer("feature_scale", torch.ones(n))
        self.features = nn.Linear(n, hidden)
        self.product = nn.Linear(product_dim, hidden, bias=False)
        self.mix = nn.Sequential(nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.base = nn.Linear(hidden, 1)
        self.key = nn.Linear(hidden, rank)
        self.query = nn.Linear(d_model, rank)
        self.cache = WeightCache()

    @staticmethod
    def raw_features(
        values: torch.Tensor,
        products: torch.Tensor,
        basket_labels: torch.Tensor,
        substitutes: torch.Tensor,
        vocab_size: int,
    ) -> torch.Tensor:
        """(B, U, F + 3): the history features, those of the given mission, the substitutes'
        count.
        """
        return torch.cat(
            [
                values,
                mission_features(values, basket_labels),
                substitute_counts(values, products, substitutes, vocab_size),
            ],
            dim=-1,
        )

    @torch.no_grad()
    def fit_scaling(self, raw: torch.Tensor, products: torch.Tensor) -> None:
        """Standardise with the mean and sd of real entries of a sample of training batches
        (``raw`` from ``raw_features`` with no mission given; the given-mission columns take the
        statistics of the first type and focus columns)."""
        real = raw[products != PAD]  # (N, F + 3)
        n = len(HISTORY_FEATURES)
        real[:, n : n + 2] = real[:, [TYPE_COLUMNS[0], FOCUS_COLUMNS[0]]]
        self.feature_shift.copy_(real.mean(0))
        self.feature_scale.copy_(real.std(0).clamp(min=1e-3))

    def encode(
        self, raw: torch.Tensor, products: torch.Tensor, product_table: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, U) base scores and (B, U, rank) keys of each history product; ``raw`` (B, U, F +
        3).
        """
        # Project the (V, G) table once, then gather H-wide rows: the same product as gathering
        # (B, U, G) rows first, without a (B, U, G) copy (most of a large batch's time).
        projected = self.cache.get(
            "product", (product_table, self.product.weight), lambda: self.product(product_table)
        )  # (V, hidden)
        x = self.features((raw - self.feature_shift) / self.feature_scale) + projected[products]
        z = self.mix(x)  # (B, U, hidden)
        return self.base(z)[..., 0], self.key(z)

    def forward(
        self, encoded: tuple[torch.Tensor, torch.Tensor], rows: torch.Tensor, h: torch.Tensor
    ) -> torch.Tensor:
        """(M, U) scores of the history products of basket rows ``rows`` for slot states h (M,
        D).
        """
        base, keys = encoded
        return base[rows] + torch.einsum("mr,mur->mu", self.query(h), keys[rows])


def mixture_log_probs(
    explore: torch.Tensor,
    repeat: torch.Tensor | None,
    repeat_products: torch.Tensor | None,
    share_logit: torch.Tensor | None,
    excluded: torch.Tensor,
) -> torch.Tensor:
    """(M, V) log p(c) = log(pi p_repeat(c) + (1 - pi) p_explore(c)).

    explore (M, V) logits; repeat (M, U) logits of ``repeat_products`` (M, U) ([PAD] slots unused);
    share_logit (M,) logit of pi; excluded (M, V) bool: products that cannot fill the slot (the
    specials, products already shown in the basket). A slot whose customer has no allowed
    history product has pi = 0. Impossible entries get ``NEG`` (finite: no NaN gradients)."""
    log_explore = F.log_softmax(explore.masked_fill(excluded, NEG), dim=-1)
    if repeat is None:
        return log_explore.masked_fill(excluded, NEG)
    invalid = (repeat_products == PAD) | excluded.gather(1, repeat_products)  # (M, U)
    has = ~invalid.all(1)  # (M,)
    log_repeat = F.log_softmax(repeat.masked_fill(invalid, NEG), dim=-1)
    log_pi = torch.where(has, F.logsigmoid(share_logit), torch.full_like(share_logit, NEG))
    log_rest = torch.where(has, F.logsigmoid(-share_logit), torch.zeros_like(share_logit))
    out = log_rest[:, None] + log_explore  # (M, V)
    at = out.gather(1, repeat_products)  # (M, U)
    mixed = torch.where(invalid, at, torch.logaddexp(at, log_pi[:, None] + log_repeat))
    return out.scatter(1, repeat_products, mixed).masked_fill(excluded, NEG)

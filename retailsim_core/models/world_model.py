"""The RetailSim world model (spec §5): Mamba trip encoder + Transformer basket decoder + heads.

Glossary of dimensions:
    B  batch, L  basket length incl. [EOS] (the decoder sees L + 1 with the context token),
    H  history trips, K  products per history trip, D  d_model, G  GraphSAGE width,
    V  vocabulary (PAD, N products, MASK, EOS), F  repeat features (``REPEAT_FEATURES``),
    C  candidate products of a sampled softmax, S shelf features (``shelf.py``), R shelf features
    the price response reads (``RESPONSE_SHELF_FEATURES``).

Data flow: history trips -> ``TripEncoder`` (trip = mean product row + trip context + time gap,
then Mamba blocks, chronological) -> encoder states (B, H, D) and a history vector (B, D);
T1+T3+T5+T6 + history vector -> ``ContextFusion`` -> context token; T2+T4 -> ``ProductFusion``;
``BasketDecoder`` = bidirectional self-attention over the basket + cross-attention to the encoder
states (decisions D34, D35). Heads: products (generative logits tied to the product table +
the repeat path + the price response), and from position 0 basket size, price sensitivity, mission type and focus.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from retailsim_core.models.inputs import ContextFusion, InputConfig, ProductFusion
from retailsim_core.models.mamba import MambaBlock, MambaConfig
from retailsim_core.shelf import SHELF_FEATURES
from retailsim_core.tensors import BASKET_TYPES, MISSIONS, PRICE_SENSITIVITY_CODES, SIZES
from retailsim_core.tokens import PAD

# Auxiliary heads: name -> (column of the T6 codes, number of classes). Codes are 1-based, 0 missing;
# LGSR's "XX" (unknown, always the last code) is no class: those rows carry no auxiliary loss.
AUX_HEADS = {"mission_type": (0, len(BASKET_TYPES) - 1), "mission_focus": (1, len(MISSIONS) - 1),
             "price_sensitivity": (2, len(PRICE_SENSITIVITY_CODES) - 1), "basket_size": (3, len(SIZES))}
# Repeat-path features of (customer, product) from the history; all zero for never-bought products.
# The per-focus counts let the gate, which sees the mission, weigh the trips of the same mission.
FOCUS_COUNTS = tuple(f"log_count_{m.lower()}" for m in MISSIONS[:4])
REPEAT_FEATURES = ("log_count", "share_of_trips", "decay_14d", "decay_56d", "decay_182d", "recency", "bought",
                   *FOCUS_COUNTS)
_DECAY_DAYS = (14.0, 56.0, 182.0)
RESPONSE_SHELF_FEATURES = ("log_relative_price", "discount_depth", "available")
_RESPONSE_COLUMNS = [SHELF_FEATURES.index(name) for name in RESPONSE_SHELF_FEATURES]
# Response features = RESPONSE_SHELF_FEATURES + substitutes' depth; the context weights read the even
# columns (log relative price, available), the product weights the odd ones (depth, substitutes'
# depth): strided views, no copies in the scoring hot path.
_CONTEXT_RESPONSE_COLUMNS = slice(0, None, 2)
_PRODUCT_RESPONSE_COLUMNS = slice(1, None, 2)
assert RESPONSE_SHELF_FEATURES[_CONTEXT_RESPONSE_COLUMNS] == ("log_relative_price", "available")
assert RESPONSE_SHELF_FEATURES[_PRODUCT_RESPONSE_COLUMNS] == ("discount_depth",)


@dataclass(frozen=True)
class WorldModelConfig:
    d_model: int = 512             # D (spec §5: 512)
    encoder_layers: int = 4        # Mamba blocks over the trip history
    d_state: int = 64              # Mamba state N
    d_conv: int = 4                # Mamba causal conv kernel
    decoder_layers: int = 2        # Transformer decoder layers
    n_heads: int = 8
    d_ffn: int = 2048
    dropout: float = 0.1
    product_dim: int = 256         # G, GraphSAGE width (T2)
    max_items: int = 50            # basket products; + [EOS] + context token = positions
    freeze_product_embeddings: bool = False
    repeat_path: bool = True       # copy scores over the customer's own history (D36)
    shelf_prices: bool = True      # candidate-side shelf prices in the product scores (D39)
    n_negatives: int = 512         # sampled-softmax negatives in training; full softmax at evaluation
    scan: str = "auto"             # Mamba scan: auto | reference | fast | cuda

    @classmethod
    def preset(cls, name: str) -> WorldModelConfig:
        if name == "paper":
            return cls()
        if name == "small":   # the CPU demo: trains on the default data in minutes
            return cls(d_model=64, encoder_layers=2, d_state=16, decoder_layers=2, n_heads=4, d_ffn=256)
        if name == "tiny":    # tests
            return cls(d_model=32, encoder_layers=1, d_state=8, decoder_layers=1, n_heads=2, d_ffn=64, n_negatives=16)
        raise ValueError(f"unknown model preset {name!r} (paper | small | tiny)")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ModelOutput:
    hidden: torch.Tensor                      # (B, L + 1, D) decoder states, position 0 = context token
    repeat_features: RepeatFeatures | None    # (B, U, F) over each row's history products
    shelf: torch.Tensor | None                # (B, V, R + 1) candidate price features (``PriceResponse``)
    aux_logits: dict[str, torch.Tensor] = field(default_factory=dict)   # name -> (B, classes)


@dataclass
class RepeatFeatures:
    """Repeat-path features of the products in each customer's history, stored per basket row over
    its U distinct history products (padded with [PAD]): every other product's features are zero,
    so scoring never touches a (B, V, F) block."""

    products: torch.Tensor     # (B, U) token ids, [PAD] in unused slots
    values: torch.Tensor       # (B, U, F), zero in unused slots

    def logits(self, rows: torch.Tensor, gate: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """(M, V) scores sum_f gate[m, f] * features[rows[m], v, f] (zero off the history)."""
        per_slot = torch.einsum("mf,muf->mu", gate, self.values[rows])                # (M, U)
        return gate.new_zeros(len(rows), vocab_size).scatter_add(1, self.products[rows], per_slot)

    def at(self, rows: torch.Tensor, candidates: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """(M, C, F) features of ``candidates`` (C,) for the basket rows ``rows`` (M,)."""
        b, u = self.products.shape
        values = torch.cat([self.values, self.values.new_zeros(b, 1, self.values.shape[2])], dim=1)  # slot u: zeros
        slot = torch.full((b, vocab_size), u, dtype=torch.long, device=values.device)
        slot.scatter_(1, self.products, torch.arange(u, device=values.device).expand(b, -1))
        slot[:, PAD] = u
        return values[rows[:, None], slot[rows[:, None], candidates[None, :]]]

    def dense(self, vocab_size: int) -> torch.Tensor:
        """(B, V, F), for inspection and tests."""
        b, _, f = self.values.shape
        out = self.values.new_zeros(b, vocab_size, f)
        out.scatter_(1, self.products[..., None].expand(-1, -1, f), self.values)
        out[:, PAD] = 0.0
        return out


def repeat_features(history_tokens: torch.Tensor, history_mask: torch.Tensor, days_before: torch.Tensor,
                    history_focus: torch.Tensor | None = None) -> RepeatFeatures:
    """(B, H, K) history tokens -> per-product purchase statistics of the distinct products of
    each row, computed over the real history entries only (one unique over (row, product) keys
    and scatter-adds, no loops; most of the (B, H, K) block is padding). A product counts once
    per trip. ``history_focus`` (B, H): each trip's mission-focus code (1-based), for the
    per-focus counts."""
    b, device = history_tokens.shape[0], history_tokens.device
    real = (history_tokens != PAD) & history_mask[..., None]                         # (B, H, K)
    row, trip, _ = real.nonzero(as_tuple=True)                                        # (P,) in row order
    tokens = history_tokens[real].long()
    span = int(tokens.max()) + 1 if len(tokens) else 1
    keys, inverse = torch.unique(row * span + tokens, sorted=True, return_inverse=True)   # (Q,) distinct (row, product)
    key_row, product = keys // span, keys % span
    per_row = torch.bincount(key_row, minlength=b)                                    # (B,)
    slot = torch.arange(len(keys), device=device) - (torch.cumsum(per_row, 0) - per_row)[key_row]
    days = days_before.float().clamp(min=0)[row, trip]                                # (P,)
    if history_focus is None:
        history_focus = torch.zeros_like(history_mask, dtype=torch.long)
    focus = history_focus[row, trip]
    weights = torch.stack([torch.ones_like(days), *[torch.exp(-days / tau) for tau in _DECAY_DAYS],
                           *[(focus == code).float() for code in range(1, len(FOCUS_COUNTS) + 1)]], dim=-1)  # (P, W)
    sums = weights.new_zeros(len(keys), weights.shape[1]).scatter_add_(0, inverse[:, None].expand_as(weights), weights)
    last = days.new_full((len(keys),), 1e4).scatter_reduce_(0, inverse, days, reduce="amin")
    count = sums[:, 0]
    trips = history_mask.sum(1).clamp(min=1).float()[key_row]
    n_decay = len(_DECAY_DAYS)
    feats = torch.stack([torch.log1p(count), count / trips, *sums[:, 1:1 + n_decay].unbind(-1),
                         torch.exp(-last / 30.0), torch.ones_like(count),
                         *torch.log1p(sums[:, 1 + n_decay:]).unbind(-1)], dim=-1)   # (Q, F)
    u = max(int(per_row.max()), 1) if b else 1
    values = feats.new_zeros(b, u, feats.shape[1])
    values[key_row, slot] = feats
    products = torch.zeros(b, u, dtype=torch.long, device=device)
    products[key_row, slot] = product
    return RepeatFeatures(products, values)                                           # (B, U), (B, U, F)


class TripEncoder(nn.Module):
    """History trips -> Mamba states (spec §3.5, §5.3). A trip is the mean GraphSAGE row of its
    products, its mission codes and the (log) days before the basket. (B, H, K) -> (B, H, D), (B, D)."""

    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        d = cfg.d_model
        self.items = nn.Linear(cfg.product_dim, d)
        self.trip_type, self.trip_focus = nn.Embedding(5, d, padding_idx=0), nn.Embedding(6, d, padding_idx=0)
        self.gap = nn.Linear(2, d)
        mamba = MambaConfig(d_model=d, d_state=cfg.d_state, d_conv=cfg.d_conv)
        self.blocks = nn.ModuleList(MambaBlock(mamba) for _ in range(cfg.encoder_layers))
        self.norm = nn.LayerNorm(d)
        self.empty = nn.Parameter(torch.zeros(d))                # history vector of a customer with no trips
        self.scan = cfg.scan

    def forward(self, product_table: torch.Tensor, batch: dict[str, torch.Tensor]):
        tokens, mask = batch["history_tokens"], batch["history_mask"]              # (B, H, K), (B, H)
        b, h, k = tokens.shape
        # The mean over a trip's products commutes with the linear map, so the (V, G) table is
        # projected once and embedding_bag averages D-wide rows: no (B*H, G) block, no (B*H) x G x D
        # product. An empty trip gives the bias alone, as items(0) would.
        projected = product_table @ self.items.weight.T                              # (V, D)
        bags = F.embedding_bag(tokens.reshape(b * h, k).long(), projected, mode="mean", padding_idx=PAD)
        days = batch["history_days_before"].float().clamp(min=0)[..., None]          # (B, H, 1)
        ctx = batch["history_context"]
        x = ((bags + self.items.bias).reshape(b, h, -1) + self.trip_type(ctx[..., 0]) + self.trip_focus(ctx[..., 1])
             + self.gap(torch.cat([torch.log1p(days), days / 365.0], dim=-1)))    # (B, H, D)
        x = x * mask[..., None]
        for block in self.blocks:
            x = block(x, mask, scan=self.scan)
        states = self.norm(x) * mask[..., None]                                      # (B, H, D)
        n = mask.sum(1)                                                              # (B,)
        last = states[torch.arange(b, device=x.device), (n - 1).clamp(min=0)]        # most recent trip
        summary = torch.where((n > 0)[:, None], last, self.empty.expand(b, -1))      # (B, D)
        return states, summary


class BasketDecoder(nn.Module):
    """Pre-norm Transformer decoder layers without a causal mask (D34): every basket position
    attends to the whole (partly masked) basket and to the encoder states. A learned memory
    token keeps cross-attention defined for customers with no history."""

    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        layer = lambda: nn.TransformerDecoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ffn, cfg.dropout,  # noqa: E731
                                                   activation="gelu", batch_first=True, norm_first=True)
        self.layers = nn.ModuleList(layer() for _ in range(cfg.decoder_layers))
        self.memory_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.norm = nn.LayerNorm(cfg.d_model)

    def forward(self, seq, seq_pad, states, states_mask):
        b = seq.shape[0]
        memory = torch.cat([self.memory_token.expand(b, -1, -1), states], dim=1)    # (B, H + 1, D)
        memory_pad = torch.cat([torch.zeros_like(states_mask[:, :1]), ~states_mask], dim=1)
        for layer in self.layers:
            seq = layer(seq, memory, tgt_key_padding_mask=seq_pad, memory_key_padding_mask=memory_pad)
        return self.norm(seq)                                                        # (B, L + 1, D)


class PriceResponse(nn.Module):
    """Candidate-side price scores (decisions D39, D45). Features f of candidate c: its shelf log
    relative price, discount depth and available flag, and the mean discount depth of c's
    substitutes (product-graph edges). The step-shaped promo flag is left out: its derivative is
    0, so a response learned on it would be invisible to autograd elasticities. Score:

        sum_s f[c, s] * w_s(h)  +  exp(k(h)) * sum_p f[c, p] * a[c, p]
        s in (log relative price, available),  p in (depth, substitutes' depth)

    w(h): how this context reacts to the price level and to availability; a[c]: the product's own
    response to its promotions and to its substitutes' (its elasticities), scaled per context by
    exp(k(h)) (price-sensitive trips react more). Promotions act only through a[c]: a context-wide
    promotion weight would absorb the average response and leave a[c] the small deviations, so
    every product would get about the same elasticity. a is sign-constrained (softplus): a product's own
    promotion never lowers its score (law of demand) and a substitute's never raises it (what a
    substitute is); only the magnitudes are learned, so sparse, noisy promotion weeks cannot flip
    a sign. The regular price level gets no per-product weight: it barely moves within a product,
    so such a weight would only fit noise. With a softmax alone every cross-price effect is
    proportional to market share (IIA); the substitute feature lets a substitute's promotion take
    share from c. w and k start at zero, a_own at softplus(0) = 0.69 (a mild promotion lift), a_sub
    near zero."""

    def __init__(self, d_model: int, vocab_size: int, substitutes: torch.Tensor):
        super().__init__()
        self.register_buffer("substitute_edges", substitutes.long().reshape(2, -1))   # (2, E) src -> dst
        degree = torch.zeros(vocab_size).index_add_(0, self.substitute_edges[1], torch.ones(self.substitute_edges.shape[1]))
        self.register_buffer("inverse_degree", 1.0 / degree.clamp(min=1.0), persistent=False)   # (V,)
        # index_select (~3x a list index) with an index tensor built once, not per batch
        self.register_buffer("response_columns", torch.tensor(_RESPONSE_COLUMNS), persistent=False)
        self.context_weights = nn.Linear(d_model, len(RESPONSE_SHELF_FEATURES[_CONTEXT_RESPONSE_COLUMNS]))
        self.scale = nn.Linear(d_model, 1)
        for layer in (self.context_weights, self.scale):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
        # Raw values; softplus(0) = 0.69, softplus(-4) = 0.018 (near zero with a usable gradient under Adam).
        self.raw_product_weights = nn.Parameter(torch.tensor([0.0, -4.0]).repeat(vocab_size, 1))   # (V, 2)
        self.register_buffer("product_signs", torch.tensor([1.0, -1.0]), persistent=False)

    @property
    def product_weights(self) -> torch.Tensor:
        """(V, 2) a[c]: >= 0 on the own depth, <= 0 on the substitutes' depth."""
        return F.softplus(self.raw_product_weights) * self.product_signs

    def features(self, shelf: torch.Tensor) -> torch.Tensor:
        """(B, V, S) shelf -> (B, V, R + 1) response features: R shelf columns + substitutes' depth."""
        src, dst = self.substitute_edges
        depth = shelf[..., SHELF_FEATURES.index("discount_depth")]                  # (B, V)
        sub = torch.zeros_like(depth).index_add(1, dst, depth[:, src]) * self.inverse_degree
        return torch.cat([shelf.index_select(-1, self.response_columns), sub[..., None]], dim=-1)

    def forward(self, h: torch.Tensor, feats: torch.Tensor, rows: torch.Tensor,
                candidates: torch.Tensor | None) -> torch.Tensor:
        """h (M, D) states of positions in basket rows ``rows`` (M,); feats (B, V, R + 1) -> (M, C)
        score offsets over ``candidates`` (C,) or the vocabulary."""
        context, product = feats[..., _CONTEXT_RESPONSE_COLUMNS], feats[..., _PRODUCT_RESPONSE_COLUMNS]
        if candidates is None:  # (M, V) gathers of single columns, never an (M, V, R + 1) block
            own = (product * self.product_weights).sum(-1)                           # (B, V)
            out = torch.exp(self.scale(h)) * own[rows]                               # (M, V)
            for s, w in enumerate(self.context_weights(h).unbind(-1)):              # over the 2 features
                out = out.addcmul(w[:, None], context[..., s][rows])
            return out
        own = self.product_weights[candidates]                                       # (C, 2)
        at = (rows[:, None], candidates[None, :])                                    # (M, C) cells
        general = torch.einsum("ms,mcs->mc", self.context_weights(h), context[at])
        return general + torch.exp(self.scale(h)) * torch.einsum("cp,mcp->mc", own, product[at])


class WorldModel(nn.Module):
    def __init__(self, cfg: WorldModelConfig, product_table: torch.Tensor, n_t1_numeric: int,
                 substitutes: torch.Tensor | None = None):
        super().__init__()
        self.cfg, self.vocab_size = cfg, product_table.shape[0]
        inputs = InputConfig(d_model=cfg.d_model, product_dim=cfg.product_dim, max_len=cfg.max_items + 2,
                             freeze_product_embeddings=cfg.freeze_product_embeddings)
        self.products = ProductFusion(inputs, product_table)
        self.encoder = TripEncoder(cfg)
        self.context = ContextFusion(inputs, n_t1_numeric, history_dim=cfg.d_model)
        self.decoder = BasketDecoder(cfg)
        self.item_out = nn.Linear(cfg.product_dim, cfg.d_model)      # output embeddings tied to the product table
        self.item_bias = nn.Parameter(torch.zeros(self.vocab_size))
        self.query = nn.Linear(cfg.d_model, cfg.d_model)
        self.price_response = PriceResponse(cfg.d_model, self.vocab_size,
                                            substitutes if substitutes is not None else torch.zeros(2, 0, dtype=torch.long))
        self.repeat_gate = nn.Linear(cfg.d_model, len(REPEAT_FEATURES))
        nn.init.zeros_(self.repeat_gate.weight)      # start from the generative path; learn how much to copy
        nn.init.zeros_(self.repeat_gate.bias)
        self.aux = nn.ModuleDict({name: nn.Linear(cfg.d_model, n) for name, (_, n) in AUX_HEADS.items()})

    @property
    def product_table(self) -> torch.Tensor:
        return self.products.products.weight                                        # (V, G)

    def forward(self, batch: dict[str, torch.Tensor], tokens: torch.Tensor, hidden: torch.Tensor | None = None,
                hide_t6: torch.Tensor | None = None) -> ModelOutput:
        """``tokens`` (B, L) decoder inputs (corrupted by the caller); ``hidden`` (B, L) the positions
        to predict (their prices are zeroed); ``hide_t6`` (B,) rows whose T6 codes are withheld."""
        if hide_t6 is not None:
            batch = {**batch, "t6": batch["t6"].masked_fill(hide_t6[:, None], 0)}
        states, summary = self.encoder(self.product_table, batch)                   # (B, H, D), (B, D)
        context = self.context(batch, summary)                                       # (B, D)
        seq = self.products(tokens, batch["t4_prices"], context, hidden)             # (B, L + 1, D)
        pad = torch.cat([torch.zeros_like(tokens[:, :1], dtype=torch.bool), tokens == PAD], dim=1)
        out = self.decoder(seq, pad, states, batch["history_mask"])
        feats = (repeat_features(batch["history_tokens"], batch["history_mask"], batch["history_days_before"],
                                 batch["history_context"][..., 1]) if self.cfg.repeat_path else None)
        shelf = batch.get("shelf") if self.cfg.shelf_prices else None
        shelf = self.price_response.features(shelf) if shelf is not None else None   # (B, V, R + 1)
        return ModelOutput(hidden=out, repeat_features=feats, shelf=shelf,
                           aux_logits={name: head(out[:, 0]) for name, head in self.aux.items()})

    def next_basket(self, batch: dict[str, torch.Tensor], hide_t6: torch.Tensor | None = None
                    ) -> tuple[ModelOutput, torch.Tensor]:
        """The next-basket query (decision D34): the context token and one [MASK] slot whose price is
        hidden. Returns the decoder output and (B, V) product scores of that slot, [EOS] excluded."""
        b = len(batch["t6"])
        query = torch.full((b, 1), self.vocab_size - 2, dtype=torch.long, device=batch["t6"].device)
        prices = batch["t4_prices"].new_zeros(b, 1, batch["t4_prices"].shape[-1])
        out = self({**batch, "t4_prices": prices}, query, hidden=torch.ones_like(query, dtype=torch.bool), hide_t6=hide_t6)
        logits = self.product_logits(out, torch.arange(b), torch.zeros(b, dtype=torch.long))
        logits[:, self.vocab_size - 1] = -torch.inf
        return out, logits

    def output_embeddings(self, candidates: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(C, D) output vectors and (C,) biases of ``candidates`` (default: the whole vocabulary)."""
        table, bias = self.product_table, self.item_bias
        if candidates is not None:
            table, bias = table[candidates], bias[candidates]
        return self.item_out(table), bias

    def product_logits(self, out: ModelOutput, rows: torch.Tensor, cols: torch.Tensor,
                       candidates: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of the positions (rows, cols) (basket coordinates; +1 for the context token)
        over ``candidates`` (C,) or the vocabulary: generative dot product + repeat path. (M, C)"""
        states = out.hidden[rows, cols + 1]                                          # (M, D)
        emb, bias = self.output_embeddings(candidates)
        logits = self.query(states) @ emb.T / self.cfg.d_model ** 0.5 + bias         # (M, C)
        if out.repeat_features is not None:
            gate = self.repeat_gate(states)                                          # (M, F)
            if candidates is None:
                logits = logits + out.repeat_features.logits(rows, gate, self.vocab_size)
            else:
                logits = logits + torch.einsum("mf,mcf->mc", gate, out.repeat_features.at(rows, candidates, self.vocab_size))
        if out.shelf is not None:
            logits = logits + self.price_response(states, out.shelf, rows, candidates)
        if candidates is None:  # [PAD] and [MASK] are never predictions
            logits[:, PAD] = -torch.inf
            logits[:, self.vocab_size - 2] = -torch.inf
        return logits


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

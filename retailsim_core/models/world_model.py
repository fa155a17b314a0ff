"""The RetailSim world model (design §5): Mamba trip encoder + Transformer basket decoder + heads.

Glossary of dimensions:
    B  batch, L  basket length incl. [EOS] (the decoder sees L + 1 with the context token),
    H  history trips the encoder reads, U  distinct products of a basket's whole history,
    F  history features (``history_features.HISTORY_FEATURES``), D  d_model,
    G  product embedding width, V  vocabulary (PAD, N products, MASK, EOS), M  scored slots,
    S  shelf features (``shelf.py``), R  shelf features the price response reads.

Data flow: history trips -> ``TripEncoder`` (trip = mean product row + trip context + time gap,
then Mamba blocks, chronological) -> encoder states (B, H, D) and a history vector (B, D);
T1+T3+T5+T6 + history vector -> ``ContextFusion`` -> context token; T2+T4 -> ``ProductFusion``;
``BasketDecoder`` = bidirectional self-attention over the basket + cross-attention to the encoder
states (decisions D34, D35). A slot's distribution over products is the repeat/explore mixture
of ``heads.py`` (D51); from position 0, the auxiliary heads (mission, price sensitivity, size
class) and the basket-size head (1..max_items products) that simulation samples from.

What a prediction sees (D52): the customer's trips before the basket's week, the trip's store,
date and hour, shelf prices, and the basket's mission only where ``given_mission`` says so.
A basket's price-sensitivity and size codes are labels of its contents: never inputs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.tensors import (
    BASKET_TYPES,
    MISSIONS,
    PRICE_SENSITIVITY_CODES,
    SIZES,
)
from retailsim_core.datasets.tokens import MAX_ITEMS, PAD, eos_token, mask_token
from retailsim_core.models.dropout import swap_dropout
from retailsim_core.models.heads.products import (
    CopurchaseResponse,
    PriceResponse,
    RepeatHead,
    mixture_log_probs,
)
from retailsim_core.models.heads.size import SizeHead
from retailsim_core.models.inputs import ContextFusion, InputConfig, ProductFusion, visible_labels
from retailsim_core.models.outputs import Encoded, ModelOutput
from retailsim_core.models.sequence.mamba import MambaBlock, MambaConfig
from retailsim_core.models.weight_cache import WeightCache

# Auxiliary heads: name -> (column of the T6 codes, number of classes). Codes are 1-based, 0
# missing; LGSR's "XX" (unknown, always the last code) is no class: those rows carry no loss.
AUX_HEADS = {
    "mission_type": (0, len(BASKET_TYPES) - 1),
    "mission_focus": (1, len(MISSIONS) - 1),
    "price_sensitivity": (2, len(PRICE_SENSITIVITY_CODES) - 1),
    "basket_size": (3, len(SIZES)),
}


@dataclass(frozen=True)
class WorldModelConfig:
    d_model: int = 512  # D (design §5: 512)
    encoder_layers: int = 4  # Mamba blocks over the trip history
    d_state: int = 64  # Mamba state N
    d_conv: int = 4  # Mamba causal conv kernel
    decoder_layers: int = 2  # Transformer decoder layers
    n_heads: int = 8
    d_ffn: int = 2048
    dropout: float = 0.1
    product_dim: int = 256  # G, GraphSAGE width (T2)
    max_items: int = MAX_ITEMS  # basket products; + [EOS] + context token = positions
    freeze_product_embeddings: bool = False
    repeat_path: bool = True  # the repeat distribution over the customer's history (D51)
    repeat_hidden: int = 64  # width of the repeat head's product encoding
    repeat_rank: int = 16  # rank of the slot-state x product interaction in the repeat head
    shelf_prices: bool = True  # candidate-side shelf prices in the product scores (D39)
    seasons: bool = True  # every customer's demand a year before in the explore scores (D69)
    scan: str = "auto"  # Mamba scan: auto | reference | fast | cuda

    @classmethod
    def preset(cls, name: str) -> WorldModelConfig:
        if name not in MODEL_PRESETS:
            raise ValueError(f"unknown model preset {name!r} ({' | '.join(MODEL_PRESETS)})")
        return MODEL_PRESETS[name]

    def to_dict(self) -> dict:
        return asdict(self)


MODEL_PRESETS: dict[str, WorldModelConfig] = {
    "paper": WorldModelConfig(),  # design §5
    # the CPU demo: trains on the default data in minutes
    "small": WorldModelConfig(
        d_model=64, encoder_layers=2, d_state=16, decoder_layers=2, n_heads=4, d_ffn=256
    ),
    # tests
    "tiny": WorldModelConfig(
        d_model=32,
        encoder_layers=1,
        d_state=8,
        decoder_layers=1,
        n_heads=2,
        d_ffn=64,
        repeat_hidden=16,
        repeat_rank=4,
    ),
}


class TripEncoder(nn.Module):
    """History trips -> Mamba states (design §3.5, §5.3). A trip is the mean embedding of all its
    products, its mission codes and the (log) days before the basket. -> (B, H, D), (B, D)."""

    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        d = cfg.d_model
        self.items = nn.Linear(cfg.product_dim, d)
        self.trip_type = nn.Embedding(5, d, padding_idx=0)
        self.trip_focus = nn.Embedding(6, d, padding_idx=0)
        self.gap = nn.Linear(2, d)
        mamba = MambaConfig(d_model=d, d_state=cfg.d_state, d_conv=cfg.d_conv)
        self.blocks = nn.ModuleList(MambaBlock(mamba) for _ in range(cfg.encoder_layers))
        self.norm = nn.LayerNorm(d)
        self.empty = nn.Parameter(torch.zeros(d))  # history vector of a customer with no trips
        self.scan = cfg.scan
        self.cache = WeightCache()

    def forward(self, product_table: torch.Tensor, batch: Batch):
        mask = batch["history_mask"]  # (B, H)
        b, h = mask.shape
        # The mean over a trip's products commutes with the linear map, so the (V, G) table is
        # projected once and embedding_bag averages D-wide rows over the flat item list (every
        # product of every trip; an empty bag gives the bias alone, as items(0) would).
        projected = self.cache.get(
            "projected",
            (product_table, self.items.weight),
            lambda: product_table @ self.items.weight.T,
        )  # (V, D)
        bags = F.embedding_bag(
            batch["history_items"],
            projected,
            batch["history_offsets"],
            mode="mean",
            padding_idx=PAD,
        )  # (B * H, D)
        days = batch["history_days_before"].float().clamp(min=0)[..., None]  # (B, H, 1)
        ctx = batch["history_context"]
        x = (
            (bags + self.items.bias).reshape(b, h, -1)
            + self.trip_type(ctx[..., 0])
            + self.trip_focus(ctx[..., 1])
            + self.gap(torch.cat([torch.log1p(days), days / 365.0], -1))
        )
        x = x * mask[..., None]  # (B, H, D)
        for block in self.blocks:
            x = block(x, mask, scan=self.scan)
        states = self.norm(x) * mask[..., None]  # (B, H, D)
        n = mask.sum(1)  # (B,)
        last = states[torch.arange(b, device=x.device), (n - 1).clamp(min=0)]  # most recent trip
        summary = torch.where((n > 0)[:, None], last, self.empty.expand(b, -1))  # (B, D)
        return states, summary


class BasketDecoder(nn.Module):
    """Pre-norm Transformer decoder layers without a causal mask (D34): every basket position
    attends to the whole (partly masked) basket and to the encoder states. A learned memory
    token keeps cross-attention defined for customers with no history."""

    def __init__(self, cfg: WorldModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            swap_dropout(
                nn.TransformerDecoderLayer(
                    cfg.d_model,
                    cfg.n_heads,
                    cfg.d_ffn,
                    cfg.dropout,
                    activation="gelu",
                    batch_first=True,
                    norm_first=True,
                )
            )
            for _ in range(cfg.decoder_layers)
        )
        self.memory_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.norm = nn.LayerNorm(cfg.d_model)

    def forward(self, seq, seq_pad, states, states_mask):
        b = seq.shape[0]
        memory = torch.cat([self.memory_token.expand(b, -1, -1), states], dim=1)  # (B, H + 1, D)
        memory_pad = torch.cat([torch.zeros_like(states_mask[:, :1]), ~states_mask], dim=1)
        for layer in self.layers:
            seq = layer(
                seq, memory, tgt_key_padding_mask=seq_pad, memory_key_padding_mask=memory_pad
            )
        return self.norm(seq)  # (B, L + 1, D)


class WorldModel(nn.Module):
    def __init__(
        self,
        cfg: WorldModelConfig,
        product_table: torch.Tensor,
        n_customer_numeric: int,
        substitutes: torch.Tensor | None = None,
        copurchase: tuple[torch.Tensor, torch.Tensor] | None = None,
        categories: torch.Tensor | None = None,  # (V,) category code per token (D87)
    ):
        super().__init__()
        self.cfg, self.vocab_size = cfg, product_table.shape[0]
        inputs = InputConfig(
            d_model=cfg.d_model,
            product_dim=cfg.product_dim,
            max_len=cfg.max_items + 2,
            freeze_product_embeddings=cfg.freeze_product_embeddings,
        )
        self.products = ProductFusion(inputs, product_table)
        self.encoder = TripEncoder(cfg)
        self.context = ContextFusion(inputs, n_customer_numeric, history_dim=cfg.d_model)
        self.decoder = BasketDecoder(cfg)
        self.item_out = nn.Linear(cfg.product_dim, cfg.d_model)  # tied to the product table
        self.item_bias = nn.Parameter(torch.zeros(self.vocab_size))
        self.query = nn.Linear(cfg.d_model, cfg.d_model)
        if substitutes is None:
            substitutes = torch.zeros(2, 0, dtype=torch.long)
        self.price_response = PriceResponse(cfg.d_model, self.vocab_size, substitutes, categories)
        if copurchase is None:
            copurchase = (torch.zeros(2, 0, dtype=torch.long), torch.zeros(0))
        self.copurchase = CopurchaseResponse(cfg.d_model, self.vocab_size, *copurchase)
        self.repeat_head = RepeatHead(
            cfg.d_model, cfg.product_dim, cfg.repeat_hidden, cfg.repeat_rank
        )
        self.repeat_share = nn.Linear(cfg.d_model, 1)  # logit of pi, the share of repeats
        # How much a context follows the time of year (0 at the start: the plain explore path).
        self.season_weights = nn.Linear(cfg.d_model, 2)
        nn.init.zeros_(self.season_weights.weight)
        nn.init.zeros_(self.season_weights.bias)
        self.aux = nn.ModuleDict(
            {name: nn.Linear(cfg.d_model, n) for name, (_, n) in AUX_HEADS.items()}
        )
        self.size_head = SizeHead(cfg.d_model, cfg.max_items)  # calibrated after training
        self.cache = WeightCache()

    @property
    def product_table(self) -> torch.Tensor:
        return self.products.products.weight  # (V, G)

    @property
    def mask_token(self) -> int:
        return mask_token(self.vocab_size)

    def forward(
        self,
        batch: Batch,
        tokens: torch.Tensor,
        hidden: torch.Tensor | None = None,
        given_mission: torch.Tensor | None = None,
    ) -> ModelOutput:
        """``tokens`` (B, L) decoder inputs (corrupted by the caller); ``hidden`` (B, L) the
        positions to predict (their prices are zeroed); ``given_mission`` (B,) rows whose true
        mission type and focus the model is told (default: none, the honest next-basket setting)."""
        return self.decode(self.encode(batch, given_mission), tokens, batch["item_prices"], hidden)

    def encode(self, batch: Batch, given_mission: torch.Tensor | None = None) -> Encoded:
        """The part of the forward pass every slot of a context's basket shares: generation
        fills a basket slot by slot and computes it once."""
        batch = {**batch, "basket_labels": visible_labels(batch["basket_labels"], given_mission)}
        states, summary = self.encoder(self.product_table, batch)  # (B, H, D), (B, D)
        repeat = products = None
        if self.cfg.repeat_path:
            products = batch["repeat_products"]  # (B, U)
            raw = self.repeat_head.raw_features(
                batch["repeat_values"],
                products,
                batch["basket_labels"],
                self.price_response.substitute_edges,
                self.vocab_size,
            )
            repeat = self.repeat_head.encode(raw, products, self.product_table)
        shelf = batch.get("shelf") if self.cfg.shelf_prices else None
        return Encoded(
            states=states,
            history_mask=batch["history_mask"],
            context=self.context(batch, summary),  # (B, D)
            repeat=repeat,
            repeat_products=products,
            shelf=self.price_response.features(shelf) if shelf is not None else None,
            season=batch.get("season") if self.cfg.seasons else None,
        )

    def decode(
        self,
        enc: Encoded,
        tokens: torch.Tensor,
        item_prices: torch.Tensor,
        hidden: torch.Tensor | None = None,
        rows: torch.Tensor | None = None,
    ) -> ModelOutput:
        """The decoder over ``tokens`` (B, L) with their ``item_prices`` (B, L, P) in the encoded
        contexts. ``rows`` (M,): decode those contexts only (``tokens`` etc. are then (M, ...));
        the other rows' states are zeros, for baskets generation has finished."""
        pick = (lambda x: x) if rows is None else (lambda x: x[rows])
        seq = self.products(tokens, item_prices, pick(enc.context), hidden)  # (., L + 1, D)
        pad = torch.cat([torch.zeros_like(tokens[:, :1], dtype=torch.bool), tokens == PAD], dim=1)
        out = self.decoder(seq, pad, pick(enc.states), pick(enc.history_mask))
        if rows is not None:  # (B, L + 1, D)
            out = out.new_zeros(enc.context.shape[0], *out.shape[1:]).index_copy(0, rows, out)
        return ModelOutput(
            hidden=out,
            repeat=enc.repeat,
            repeat_products=enc.repeat_products,
            shelf=enc.shelf,
            season=enc.season,
            has_history=enc.history_mask.any(1),
            aux_logits={name: head(out[:, 0]) for name, head in self.aux.items()},
            size_logits=self.size_head(out[:, 0]),
        )

    def query_inputs(self, batch: Batch) -> tuple[Batch, torch.Tensor]:
        """The next-basket query (D34): one [MASK] slot after the context token, its price
        hidden.
        """
        b = batch["basket_labels"].shape[0]  # a symbolic size under torch.export, not a constant
        query = torch.full(
            (b, 1), self.mask_token, dtype=torch.long, device=batch["basket_labels"].device
        )
        prices = batch["item_prices"].new_zeros(b, 1, batch["item_prices"].shape[-1])
        return {**batch, "item_prices": prices}, query

    def next_basket(
        self, batch: Batch, given_mission: torch.Tensor | None = None
    ) -> tuple[ModelOutput, torch.Tensor]:
        """Decoder output and (B, V) log-probabilities of the next-basket query slot: the ranking
        of what the basket holds, from what is known before the trip."""
        out = self.query_pass(batch, given_mission)
        b = out.hidden.shape[0]
        return out, self.slot_log_probs(out, torch.arange(b), torch.zeros(b, dtype=torch.long))

    def query_pass(self, batch: Batch, given_mission: torch.Tensor | None = None) -> ModelOutput:
        """The forward pass of the next-basket query (its slot is position 1): the heads of
        position 0 and the slot's state, before any vocabulary-wide scoring."""
        inputs, query = self.query_inputs(batch)
        hidden = torch.ones_like(query, dtype=torch.bool)
        return self(inputs, query, hidden=hidden, given_mission=given_mission)

    def excluded(self, n: int, shown: torch.Tensor | None = None, device=None) -> torch.Tensor:
        """(n, V) bool: [PAD], [MASK] and [EOS] are never a slot's product, nor ``shown`` ones."""
        out = torch.zeros(n, self.vocab_size, dtype=torch.bool, device=device)
        out[:, [PAD, mask_token(self.vocab_size), eos_token(self.vocab_size)]] = True
        return out if shown is None else out | shown

    def slot_log_probs(
        self,
        out: ModelOutput,
        rows: torch.Tensor,
        cols: torch.Tensor,
        shown: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(M, V) log p(product) of the slots (rows, cols) (basket coordinates; +1 for the context
        token); ``shown`` (M, V) products that cannot fill them. Excluded entries are ``NEG``."""
        return mixture_log_probs(*self.slot_terms(out, rows, cols, shown))

    def slot_terms(
        self,
        out: ModelOutput,
        rows: torch.Tensor,
        cols: torch.Tensor,
        shown: torch.Tensor | None = None,
    ) -> tuple:
        """What ``slot_log_probs`` mixes: explore logits (M, V) and repeat logits (M, U) with
        their price terms, the repeat products (M, U), the repeat share's logit (M,), the
        excluded products (M, V); the repeat terms None without a repeat path."""
        h = out.hidden[rows, cols + 1]  # (M, D)
        table = self.product_table
        emb = self.cache.get(
            "item_out",
            (table, self.item_out.weight, self.item_out.bias),
            lambda: self.item_out(table),
        )  # (V, D)
        explore = self.query(h) @ emb.T / self.cfg.d_model**0.5 + self.item_bias  # (M, V)
        price = self.price_response(h, out.shelf, rows) if out.shelf is not None else None
        if price is not None:
            explore = explore + price
        if out.season is not None:  # (M, 2) x (M, V, 2)
            explore = explore + torch.einsum("ms,mvs->mv", self.season_weights(h), out.season[rows])
        if shown is not None and shown.any():
            offset = self.copurchase(h, shown)  # (M, V)
            price = offset if price is None else price + offset
            explore = explore + offset
        excluded = self.excluded(rows.shape[0], shown, h.device)
        if out.repeat is None:
            return explore, None, None, None, excluded
        products = out.repeat_products[rows]  # (M, U)
        repeat = self.repeat_head(out.repeat, rows, h)  # (M, U)
        if price is not None:
            repeat = repeat + price.gather(1, products)
        share = self.repeat_share(h)[:, 0].masked_fill(~out.has_history[rows], -30.0)
        return explore, repeat, products, share, excluded


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

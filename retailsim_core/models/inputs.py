"""Layer 0 of the world model (design §5.2): price encoding, context fusion, product fusion.

Glossary: B batch, L basket length incl. [EOS], D d_model, V vocabulary (PAD, N products,
MASK, EOS), G GraphSAGE width (256), P = 9 raw T4 inputs (``tensors.PRICE_COLUMNS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch
import torch.nn as nn

from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.tokens import PAD, ProductVocab

MISSION_COLUMNS = (0, 1)  # trip-label columns a "given mission" reveals: mission type and focus


def visible_labels(labels: torch.Tensor, given_mission: torch.Tensor | None) -> torch.Tensor:
    """The trip's labels as the model may see them: mission type and focus where
    ``given_mission`` (B,) is True, everything else 0 (unknown). Price sensitivity and size are
    never visible."""
    keep = torch.zeros_like(labels, dtype=torch.bool)
    if given_mission is not None:
        keep[:, list(MISSION_COLUMNS)] = given_mission[:, None]
    return labels.masked_fill(~keep, 0)


@dataclass(frozen=True)
class InputConfig:
    d_model: int = 512  # D (spec `paper`)
    product_dim: int = 256  # GraphSAGE width (T2)
    n_frequencies: int = 8  # learned Fourier frequencies (design §3.3: 8)
    freeze_product_embeddings: bool = False  # fine-tune the GraphSAGE rows by default
    max_len: int = 64  # positions, context token included


class FourierPriceEncoder(nn.Module):
    """Design §3.3, T4 (64-d): Fourier features of the price with *learned* frequencies (16 -> 24),
    log price (16), relative price (16), dynamics [velocity, acceleration, momentum, depth,
    promo, imputed] (8). (B, L, P) -> (B, L, 64)."""

    def __init__(self, n_frequencies: int = 8):
        super().__init__()
        # Initial periods from 10p to 10 pounds, log-spaced; learned from there.
        self.frequencies = nn.Parameter(torch.logspace(-1, 1, n_frequencies))
        self.fourier = nn.Linear(2 * n_frequencies, 24)
        self.log_price = nn.Linear(1, 16)
        self.relative = nn.Linear(1, 16)
        self.dynamics = nn.Linear(6, 8)

    def forward(self, prices: torch.Tensor) -> torch.Tensor:
        price = prices[..., 0:1]  # (B, L, 1)
        angle = 2 * math.pi * price * self.frequencies  # (B, L, F)
        return torch.cat(
            [
                self.fourier(torch.cat([angle.sin(), angle.cos()], dim=-1)),
                self.log_price(prices[..., 1:2]),
                self.relative(prices[..., 2:3]),
                self.dynamics(prices[..., 3:9]),
            ],
            dim=-1,
        )  # (B, L, 64)


def graphsage_rows(
    vocab: ProductVocab, vectors: torch.Tensor, id_map: pl.DataFrame, seed: int = 0
) -> torch.Tensor:
    """(V, G) initial product table aligned to the T2 vocabulary: row 0 ([PAD]) zero, row
    token(p) = GraphSAGE vector of p scaled to unit length (GraphSAGE is trained on cosine
    scores, so only directions carry meaning, and raw norms reach 1e4), [MASK]/[EOS] small random
    vectors. Products missing from the embeddings (should not happen: novel products get their
    sub-commodity's mean) stay zero."""
    vectors = torch.nn.functional.normalize(vectors.float(), dim=1)
    table = torch.zeros(vocab.size, vectors.shape[1])
    rows = vocab.frame().join(id_map.select("product_id", "row"), on="product_id", how="inner")
    table[torch.tensor(rows["token"].to_numpy(), dtype=torch.long)] = vectors[
        torch.tensor(rows["row"].to_numpy(), dtype=torch.long)
    ]
    g = torch.Generator().manual_seed(seed)
    table[[vocab.mask, vocab.eos]] = 0.02 * torch.randn(2, vectors.shape[1], generator=g)
    return table


class ProductFusion(nn.Module):
    """T2 + T4 -> D with positions, the context vector as token 0 (design §5.2.2).

    ``hidden`` marks the positions chosen for the masked-item loss: their price inputs are zeroed
    so neither the token (already [MASK] or random) nor the price can reveal the true product.
    """

    def __init__(self, cfg: InputConfig, product_table: torch.Tensor):
        super().__init__()
        self.products = nn.Embedding.from_pretrained(
            product_table.clone(), freeze=cfg.freeze_product_embeddings, padding_idx=PAD
        )
        self.prices = FourierPriceEncoder(cfg.n_frequencies)
        self.project = nn.Linear(product_table.shape[1] + 64, cfg.d_model)
        self.position = nn.Embedding(cfg.max_len, cfg.d_model)

    def forward(
        self,
        tokens: torch.Tensor,
        prices: torch.Tensor,
        context: torch.Tensor,
        hidden: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """tokens (B, L), prices (B, L, P), context (B, D), hidden (B, L) bool -> (B, L + 1, D)."""
        if hidden is not None:
            prices = prices.masked_fill(hidden[..., None], 0.0)
        items = self.project(
            torch.cat([self.products(tokens), self.prices(prices)], dim=-1)
        )  # (B, L, D)
        # The context is added to every slot too: measured, a slot reached only through attention
        # to token 0 ignored the mission (decision D35).
        items = items + context[:, None, :]
        items = items.masked_fill((tokens == PAD)[..., None], 0.0)  # PAD stays zero
        seq = torch.cat([context[:, None, :], items], dim=1)  # (B, L + 1, D)
        positions = torch.arange(seq.shape[1], device=seq.device)
        return (
            seq
            + self.position(positions)[None]
            * (torch.cat([torch.ones_like(tokens[:, :1]), tokens != PAD], dim=1)[..., None])
        )


class ContextFusion(nn.Module):
    """T1 + T3 + T5 + T6 -> D with LayerNorm + GELU (design §5.2.1). Categorical codes are
    embedded, continuous values projected; the history vector comes from the encoder."""

    def __init__(
        self, cfg: InputConfig, n_customer_numeric: int, history_dim: int, n_stores: int = 100_000
    ):
        super().__init__()

        def e(n, d):
            return nn.Embedding(n, d, padding_idx=0)  # code 0 = missing

        self.segments = nn.ModuleList([e(8, 32), e(9, 32)])  # price sensitivity, lifestage
        self.customer_numeric = nn.Linear(n_customer_numeric, 32)
        # Codes are shifted by one where 0 is a real value (hour 0, no holiday, winter).
        self.week, self.weekday, self.hour, self.holiday, self.season = (
            e(54, 16),
            e(8, 8),
            e(25, 8),
            e(3, 8),
            e(5, 8),
        )
        self.time_numeric = nn.Linear(2, 16)  # trend, recency (log days)
        self.store = nn.ModuleList([e(5, 24), e(13, 24), e(n_stores, 16)])  # format, region, id
        self.store_numeric = nn.Linear(4, 32)
        self.trip = nn.ModuleList(
            [e(5, 16), e(6, 16), e(5, 8), e(4, 8)]
        )  # type, focus, price mode, size
        customer_width, time_width, store_width, trip_width = (
            64 + 32 + history_dim,
            16 + 8 + 8 + 8 + 8 + 16,
            24 + 24 + 16 + 32,
            48,
        )
        width = customer_width + time_width + store_width + trip_width
        self.project = nn.Sequential(
            nn.Linear(width, cfg.d_model), nn.LayerNorm(cfg.d_model), nn.GELU()
        )

    def forward(self, batch: Batch, history: torch.Tensor) -> torch.Tensor:
        """``batch`` from ``TrainingSet``; ``history`` (B, H_dim) from the encoder -> (B, D)."""
        customer_codes, time, store_codes, labels = (
            batch["customer_codes"],
            batch["calendar"],
            batch["store_codes"],
            batch["basket_labels"],
        )
        segment = torch.cat(
            [emb(customer_codes[:, i]) for i, emb in enumerate(self.segments)], dim=-1
        )  # (B, 64)
        alpha = batch["history_alpha"][:, None]
        behaviour = torch.cat([self.customer_numeric(batch["customer_numeric"]), history], dim=-1)
        # Design §4.2.1's cold-start blend: segments weigh more when the history is short.
        customer = torch.cat([alpha * segment, (1 - alpha) * behaviour], dim=-1)
        recency = torch.log1p(time[:, 6].clamp(min=0))[:, None]
        time_vec = torch.cat(
            [
                self.week(time[:, 0].long()),
                self.weekday(time[:, 1].long()),
                self.hour(time[:, 2].long() + 1),
                self.holiday(time[:, 3].long() + 1),
                self.season(time[:, 4].long() + 1),
                self.time_numeric(torch.cat([time[:, 5:6], recency], dim=-1)),
            ],
            dim=-1,
        )
        store_vec = torch.cat(
            [emb(store_codes[:, i]) for i, emb in enumerate(self.store)]
            + [self.store_numeric(batch["store_numeric"])],
            dim=-1,
        )
        trip_vec = torch.cat([emb(labels[:, i]) for i, emb in enumerate(self.trip)], dim=-1)
        return self.project(torch.cat([customer, time_vec, store_vec, trip_vec], dim=-1))  # (B, D)


def vocab_rows_of(vocab: ProductVocab, products: list[str]) -> np.ndarray:
    """Tokens of the given product ids (for end-to-end vocabulary checks)."""
    lookup = dict(zip(vocab.products, range(1, vocab.n_products + 1), strict=True))
    return np.array([lookup[p] for p in products])


def substitute_token_pairs(edges: pl.DataFrame, vocab: ProductVocab) -> torch.Tensor:
    """(2, E) token pairs (src, dst) of the product graph's substitution edges, both directions."""
    sub = edges.filter(pl.col("edge_type") == "substitution").select("src", "dst")
    both = pl.concat([sub, sub.select(src="dst", dst="src")]).unique()
    tok = vocab.frame()
    pairs = (
        both.join(tok.rename({"product_id": "src", "token": "s"}), on="src", how="inner")
        .join(tok.rename({"product_id": "dst", "token": "d"}), on="dst", how="inner")
        .sort("s", "d")
    )
    return torch.as_tensor(
        np.stack([pairs["s"].to_numpy(), pairs["d"].to_numpy()]).astype(np.int64).reshape(2, -1)
    )


def copurchase_token_pairs(
    edges: pl.DataFrame, vocab: ProductVocab
) -> tuple[torch.Tensor, torch.Tensor]:
    """(2, E) token pairs (src, dst) of the product graph's co-purchase edges, both directions,
    and (E,) their lifts."""
    cop = edges.filter(pl.col("edge_type") == "copurchase").select("src", "dst", "lift")
    both = pl.concat([cop, cop.select(src="dst", dst="src", lift="lift")]).unique(
        ["src", "dst"], keep="first"
    )
    tok = vocab.frame()
    pairs = (
        both.join(tok.rename({"product_id": "src", "token": "s"}), on="src", how="inner")
        .join(tok.rename({"product_id": "dst", "token": "d"}), on="dst", how="inner")
        .sort("s", "d")
    )
    index = np.stack([pairs["s"].to_numpy(), pairs["d"].to_numpy()]).astype(np.int64).reshape(2, -1)
    return torch.as_tensor(index), torch.as_tensor(pairs["lift"].to_numpy().astype(np.float32))

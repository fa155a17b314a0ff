"""SASRec (Kang & McAuley 2018; seeds/001) and BERT4Rec (Sun et al. 2019; seeds/004) baselines.

Both read a customer's purchases as one item sequence (history trips in time order, each trip's
products in token order), the last ``max_len`` items. SASRec: causal self-attention trained to
predict the next item at every position; scores the next basket from the last position.
BERT4Rec: bidirectional, trained with the cloze task (mask a share of the items); scores a
[MASK] appended after the history. Training sequences come from training weeks only; the size
and the number of epochs are tuned on validation R@20 (early stopping, small grid).

Glossary: B batch, L max_len, D d_model, V vocabulary (shared with the world model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from retailsim_core.evaluation.baselines import pool_bounds
from retailsim_core.tensors import TrainingSet, ragged
from retailsim_core.tokens import PAD


@dataclass(frozen=True)
class SequentialConfig:
    kind: str = "sasrec"       # sasrec | bert4rec
    d_model: int = 64
    layers: int = 2
    heads: int = 2
    dropout: float = 0.2
    max_len: int = 100
    mask_rate: float = 0.2     # BERT4Rec cloze share
    lr: float = 1e-3
    batch_size: int = 64
    max_epochs: int = 6
    patience: int = 1
    windows_per_epoch: int | None = 4_000    # sampled training windows per epoch (None = all)
    seed: int = 0

    def grid(self) -> list[SequentialConfig]:
        return [replace(self, d_model=d) for d in (32, 64)]


class SequentialRecommender(nn.Module):
    def __init__(self, cfg: SequentialConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        self.items = nn.Embedding(vocab_size, cfg.d_model, padding_idx=PAD)
        self.position = nn.Embedding(cfg.max_len + 1, cfg.d_model)
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.heads, 4 * cfg.d_model, cfg.dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(cfg.d_model)
        # Small initial embeddings: the output logits start near 0 (loss ~ log V), as in BERT/SASRec.
        nn.init.normal_(self.items.weight, std=0.02)
        nn.init.normal_(self.position.weight, std=0.02)
        with torch.no_grad():
            self.items.weight[PAD] = 0.0

    def forward(self, seq: torch.Tensor) -> torch.Tensor:
        """seq (B, L) right-padded item tokens -> (B, L, V) logits."""
        length = seq.shape[1]
        x = self.items(seq) + self.position(torch.arange(length))[None]
        causal = (torch.triu(torch.ones(length, length, dtype=torch.bool), 1) if self.cfg.kind == "sasrec" else None)
        h = self.norm(self.encoder(x, mask=causal, src_key_padding_mask=seq == PAD))
        return h @ self.items.weight.T                                              # (B, L, V)


def item_sequences(data: TrainingSet, start: np.ndarray, end: np.ndarray, max_len: int) -> np.ndarray:
    """(S, <= max_len) the last items of trips [start, end) of each row, right-padded."""
    lo, hi = data.trip_offsets[start], data.trip_offsets[end]
    first = np.maximum(lo, hi - max_len)
    return ragged(data.trip_tokens, first, hi - first, max(int((hi - first).max(initial=1)), 1))


def training_windows(data: TrainingSet, last_day: int, max_len: int) -> np.ndarray:
    """Each customer's trips up to ``last_day`` as items, cut into windows of max_len + 1."""
    first, end = pool_bounds(data, last_day + 1)
    lo, hi = data.trip_offsets[first], data.trip_offsets[end]
    n = np.ceil((hi - lo) / max_len).astype(np.int64)                               # windows per customer
    w_end = np.repeat(hi, n) - max_len * (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    w_start = np.maximum(np.repeat(lo, n), w_end - max_len - 1)
    keep = w_end - w_start >= 2
    return ragged(data.trip_tokens, w_start[keep], (w_end - w_start)[keep], max_len + 1)


def _train_epoch(model, windows, vocab, cfg, opt, rng) -> float:
    model.train()
    total = 0.0
    order = rng.permutation(len(windows))
    if cfg.windows_per_epoch is not None:
        order = order[:cfg.windows_per_epoch]
    for i in range(0, len(order), cfg.batch_size):
        batch = torch.from_numpy(windows[order[i:i + cfg.batch_size]].astype(np.int64))
        if cfg.kind == "sasrec":
            inputs, targets = batch[:, :-1], batch[:, 1:]
        else:
            chosen = (torch.from_numpy(rng.random(batch.shape)) < cfg.mask_rate) & (batch != PAD)
            inputs, targets = batch.masked_fill(chosen, vocab.mask), batch.masked_fill(~chosen, PAD)
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        total += loss.item()
    return total / max(1, int(np.ceil(len(order) / cfg.batch_size)))


@torch.no_grad()
def sequential_scores(model: SequentialRecommender, data: TrainingSet, rows: np.ndarray) -> torch.Tensor:
    """(S, V) next-item scores after each sample's history (full history, last max_len items)."""
    model.train(False)
    cfg, vocab = model.cfg, data.vocab
    take = cfg.max_len if cfg.kind == "sasrec" else cfg.max_len - 1
    seq = torch.from_numpy(item_sequences(data, data.full_hist_start[rows], data.hist_end[rows], take).astype(np.int64))
    lengths = (seq != PAD).sum(1)
    if cfg.kind == "bert4rec":
        seq = torch.cat([seq, torch.zeros(len(seq), 1, dtype=torch.long)], dim=1)
        seq[torch.arange(len(seq)), lengths] = vocab.mask
        pos = lengths
    else:
        seq[lengths == 0, 0] = vocab.mask                                             # no history: a neutral token
        pos = (lengths - 1).clamp(min=0)
    out = []
    for i in range(0, len(seq), 512):
        logits = model(seq[i:i + 512])
        out.append(logits[torch.arange(len(logits)), pos[i:i + 512]])
    scores = torch.cat(out).double()
    scores[:, PAD] = -torch.inf
    scores[:, vocab.size - 2:] = -torch.inf
    return scores


def fit_sequential(data: TrainingSet, train_last_day: int, valid_rows: np.ndarray, valid_score: Callable,
                   cfg: SequentialConfig, log: Callable[[str], None] = lambda _: None) -> tuple[SequentialRecommender, dict]:
    """Train each grid point with early stopping on ``valid_score(scores, rows) -> R@20``; keep the best."""
    windows = training_windows(data, train_last_day, cfg.max_len)
    best_model, best = None, {"valid_R@20": -1.0}
    for point in cfg.grid():
        torch.manual_seed(point.seed)
        rng = np.random.default_rng(point.seed)
        model = SequentialRecommender(point, data.vocab.size)
        opt = torch.optim.AdamW(model.parameters(), lr=point.lr, weight_decay=0.01)
        top, bad, state = -1.0, 0, None
        for epoch in range(1, point.max_epochs + 1):
            loss = _train_epoch(model, windows, data.vocab, point, opt, rng)
            r20 = valid_score(sequential_scores(model, data, valid_rows), valid_rows)
            log(f"{point.kind} d={point.d_model} epoch {epoch}: loss {loss:.3f} valid R@20 {r20:.4f}")
            if r20 > top:
                top, bad, state = r20, 0, {k: v.clone() for k, v in model.state_dict().items()}
                chosen = {"valid_R@20": r20, "d_model": point.d_model, "epochs": epoch}
            else:
                bad += 1
                if bad >= point.patience:
                    break
        model.load_state_dict(state)
        if top > best["valid_R@20"]:
            best_model, best = model, chosen
    return best_model, best

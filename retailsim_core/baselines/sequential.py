"""SASRec (Kang & McAuley 2018) and BERT4Rec (Sun et al. 2019) baselines, basket-aware.

A customer's purchases are one token sequence: trips in time order, each trip's products in a
random order (reshuffled every epoch: a basket is a set, and product-id order would make most
next-item targets "the next larger id"), and a [SEP] token after every trip (the vocabulary's
[EOS]). The last ``max_len`` tokens are read.

- SASRec: causal self-attention, full-softmax cross-entropy on the next token at every position.
  The next basket is scored from the final [SEP]: its next token is a random product of the
  next trip, so its distribution ranks what the next basket holds.
- BERT4Rec: bidirectional, cloze task on products (``mask_rate``), plus windows that end in
  "[SEP] [MASK]" with the next trip's first product as target (the paper's "mask the last
  item" samples), which is exactly how the next basket is scored.

Training uses a sampled softmax: each batch's targets plus ``negatives`` products shared by the
batch, drawn from the training unigram distribution to the power 0.75, with the log-Q correction
(each candidate's logit minus the log of its sampling probability), so the estimate of the full
softmax stays unbiased in rank while a step costs a fraction of it (scoring uses the full
vocabulary). Training sequences come from training weeks only; early stopping on validation R@20
with ``patience`` epochs once ``min_epochs`` have run, within a CPU time budget (``max_seconds``:
an epoch starts only if one of the mean epoch length still fits in it); the epochs trained, the
best epoch, the validation curve and whether the budget ended training are reported.

Glossary: B batch, L max_len, D d_model, V vocabulary (shared with the world model).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from retailsim_core.baselines.neighbour_baselines import pool_bounds
from retailsim_core.datasets.tensors import TrainingSet, ragged
from retailsim_core.datasets.tokens import PAD, mask_token
from retailsim_core.models.dropout import swap_dropout
from retailsim_core.training.run.param_groups import adamw


@dataclass(frozen=True)
class SequentialConfig:
    kind: str = "sasrec"  # sasrec | bert4rec
    d_model: int = 64
    layers: int = 2
    heads: int = 2
    dropout: float = 0.2
    max_len: int = 100  # tokens read: products and [SEP]s (about 15 trips)
    mask_rate: float = 0.2  # BERT4Rec cloze share
    last_item_share: float = 0.3  # BERT4Rec windows ending in "[SEP] [MASK]"
    # Measured: 1e-3 learns copying too slowly for a CPU budget; 6e-3 and 1e-2 never leave
    # popularity before patience ends them (synthetic, docs/benchmarks.md).
    lr: float = 3e-3
    batch_size: int = 128
    max_epochs: int = 40
    patience: int = 3  # epochs without a better validation R@20
    # Patience counts from this epoch on: both models can sit at popularity for several epochs
    # before they learn to copy (SASRec on real LGSR: flat for 8 epochs, then climbing; D135).
    min_epochs: int = 10
    windows_per_epoch: int | None = 4_000  # sampled training windows per epoch (None = all)
    negatives: int = 512  # shared sampled-softmax negatives per batch (log-Q corrected)
    # Training budget per model: an epoch starts only if it should end within it. The pipeline
    # passes RETAILSIM_SEQUENTIAL_SECONDS (the world model's 600 s, D123); on the synthetic
    # default the validation curves are about flat after the first epochs and patience ends them.
    max_seconds: float | None = 600.0
    seed: int = 0


class SequentialRecommender(nn.Module):
    def __init__(self, cfg: SequentialConfig, vocab_size: int):
        super().__init__()
        self.cfg = cfg
        self.items = nn.Embedding(vocab_size, cfg.d_model, padding_idx=PAD)
        self.position = nn.Embedding(cfg.max_len + 1, cfg.d_model)
        layer = nn.TransformerEncoderLayer(
            cfg.d_model,
            cfg.heads,
            4 * cfg.d_model,
            cfg.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = swap_dropout(
            nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        )
        self.norm = nn.LayerNorm(cfg.d_model)
        # Small initial embeddings: the output logits start near 0 (loss ~ log V), as in
        # BERT/SASRec.
        nn.init.normal_(self.items.weight, std=0.02)
        nn.init.normal_(self.position.weight, std=0.02)
        with torch.no_grad():
            self.items.weight[PAD] = 0.0

    def hidden(self, seq: torch.Tensor) -> torch.Tensor:
        """seq (B, L) right-padded tokens -> (B, L, D) states."""
        length = seq.shape[1]
        x = self.items(seq) + self.position(torch.arange(length))[None]  # (B, L, D)
        causal = (
            torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
            if self.cfg.kind == "sasrec"
            else None
        )
        return self.norm(self.encoder(x, mask=causal, src_key_padding_mask=seq == PAD))

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        return states @ self.items.weight.T  # (..., V)


def _flat_sequences(
    data: TrainingSet, start: np.ndarray, end: np.ndarray, rng: np.random.Generator
):
    """Flat tokens of trips [start, end) of each row (each trip's products in a random order, then
    [SEP] = ``vocab.eos``), with each row's first token and token count."""
    n = end - start
    trip = np.repeat(start, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    n_items = data.trip_offsets[trip + 1] - data.trip_offsets[trip]
    length = n_items + 1  # products + [SEP]
    tokens = np.full(length.sum(), data.vocab.eos, dtype=np.int64)
    pos = np.arange(length.sum()) - np.repeat(np.cumsum(length) - length, length)
    within = np.arange(n_items.sum()) - np.repeat(np.cumsum(n_items) - n_items, n_items)
    items = data.trip_tokens[np.repeat(data.trip_offsets[trip], n_items) + within]
    order = np.argsort(
        np.repeat(np.arange(len(trip)), n_items) + rng.random(n_items.sum()), kind="stable"
    )
    tokens[pos < np.repeat(n_items, length)] = items[order]  # shuffled within each trip
    per_row = np.bincount(
        np.repeat(np.arange(len(start)), n), weights=length, minlength=len(start)
    ).astype(np.int64)
    return tokens, np.cumsum(per_row) - per_row, per_row


def customer_sequences(
    data: TrainingSet, start: np.ndarray, end: np.ndarray, max_len: int, rng: np.random.Generator
) -> np.ndarray:
    """(S, <= max_len) the last tokens of trips [start, end) of each row, right-padded."""
    tokens, row_start, per_row = _flat_sequences(data, start, end, rng)
    keep = np.minimum(per_row, max_len)
    return ragged(tokens, row_start + per_row - keep, keep, max(int(keep.max(initial=1)), 1))


def training_windows(
    data: TrainingSet, last_day: int, max_len: int, rng: np.random.Generator
) -> np.ndarray:
    """Each customer's tokens up to ``last_day`` (trips in time order, products shuffled), cut
    from the end into windows of max_len + 1 (input + next-token target)."""
    first, end = pool_bounds(data, last_day + 1)
    tokens, row_start, lengths = _flat_sequences(data, first, end, rng)
    n = np.ceil(lengths / max_len).astype(np.int64)
    w_end = np.repeat(lengths, n) - max_len * (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    w_start = np.maximum(0, w_end - max_len - 1)
    keep = w_end - w_start >= 2
    offset = np.repeat(row_start, n)[keep]
    return ragged(tokens, offset + w_start[keep], (w_end - w_start)[keep], max_len + 1)


def _bert_inputs(batch: torch.Tensor, cfg: SequentialConfig, vocab, rng: np.random.Generator):
    """Cloze corruption, and for ``last_item_share`` of the windows a cut right after a [SEP] + 1
    product, that product masked (the inference layout "[SEP] [MASK]")."""
    is_item = (batch != PAD) & (batch != vocab.eos)
    chosen = torch.from_numpy(rng.random(batch.shape) < cfg.mask_rate) & is_item
    inputs, targets = batch.masked_fill(chosen, vocab.mask), batch.masked_fill(~chosen, PAD)
    after_sep = torch.zeros_like(is_item)
    after_sep[:, 1:] = (batch[:, :-1] == vocab.eos) & is_item[:, 1:]
    last = torch.from_numpy(rng.random(len(batch)) < cfg.last_item_share) & after_sep.any(1)
    for r in torch.nonzero(last)[:, 0].tolist():  # one cut per chosen window (a few per batch)
        cols = torch.nonzero(after_sep[r])[:, 0]
        c = int(cols[int(rng.integers(len(cols)))])
        inputs[r, c + 1 :], targets[r] = PAD, PAD
        inputs[r, c], targets[r, c] = vocab.mask, batch[r, c]
    return inputs, targets


def sampled_softmax_loss(
    states: torch.Tensor,
    targets: torch.Tensor,
    table: torch.Tensor,
    q: torch.Tensor,
    n_negatives: int,
    rng: np.random.Generator,
) -> torch.Tensor:
    """Cross-entropy over the batch's targets + ``n_negatives`` products drawn from ``q`` (V,),
    every candidate's logit corrected by -log q (log-Q), duplicates merged. states (N, D),
    targets (N,) -> scalar."""
    negatives = torch.from_numpy(rng.choice(len(q), n_negatives, p=q.numpy()))
    candidates, inverse = torch.unique(torch.cat([targets, negatives]), return_inverse=True)
    # The log-Q term as the product's bias: one fused op, no (N, C) temporary and its backward.
    log_q = torch.log(q[candidates].clamp(min=1e-12)).to(states.dtype)
    logits = torch.addmm(-log_q, states, table[candidates].T)  # (N, C)
    return F.cross_entropy(logits, inverse[: len(targets)])


def unigram(windows: np.ndarray, vocab_size: int, power: float = 0.75) -> torch.Tensor:
    """(V,) sampling distribution of negatives: token counts of the windows ** power; specials 0."""
    counts = np.bincount(windows.ravel(), minlength=vocab_size).astype(np.float64) ** power
    counts[PAD] = 0.0
    counts[mask_token(vocab_size)] = 0.0  # [MASK] is never a target
    return torch.as_tensor(counts / counts.sum())


def _train_epoch(model, windows, vocab, cfg, opt, rng) -> float:
    model.train()
    total, steps = 0.0, 0
    q = unigram(windows, vocab.size)
    order = rng.permutation(len(windows))[: cfg.windows_per_epoch]
    for i in range(0, len(order), cfg.batch_size):
        batch = torch.from_numpy(windows[order[i : i + cfg.batch_size]].astype(np.int64))
        if cfg.kind == "sasrec":
            inputs, targets = batch[:, :-1], batch[:, 1:]
        else:
            inputs, targets = _bert_inputs(batch, cfg, vocab, rng)
        states = model.hidden(inputs)
        where = targets != PAD
        loss = sampled_softmax_loss(
            states[where], targets[where], model.items.weight, q, cfg.negatives, rng
        )
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        total, steps = total + loss.item(), steps + 1
    return total / max(steps, 1)


@torch.no_grad()
def sequential_scores(
    model: SequentialRecommender, data: TrainingSet, rows: np.ndarray, seed: int = 0
) -> torch.Tensor:
    """(S, V) scores of the next basket after each sample's whole history (last max_len tokens)."""
    model.train(False)
    cfg, vocab = model.cfg, data.vocab
    take = cfg.max_len if cfg.kind == "sasrec" else cfg.max_len - 1
    seq = customer_sequences(
        data, data.full_hist_start[rows], data.hist_end[rows], take, np.random.default_rng(seed)
    )
    seq = torch.from_numpy(seq)
    lengths = (seq != PAD).sum(1)
    seq = torch.cat([seq, torch.zeros(len(seq), 1, dtype=torch.long)], dim=1)
    if cfg.kind == "bert4rec":
        seq[torch.arange(len(seq)), lengths] = vocab.mask
        pos = lengths
    else:
        seq[lengths == 0, 0] = vocab.eos  # no history: a lone [SEP]
        pos = (lengths - 1).clamp(min=0)
    out = []
    for i in range(0, len(seq), 512):
        states = model.hidden(seq[i : i + 512])
        out.append(model.logits(states[torch.arange(len(states)), pos[i : i + 512]]))
    scores = torch.cat(out).double()
    # A NaN score would rank first in topk and zero in the masked-item ranks: never a
    # recommendation.
    scores = torch.nan_to_num(scores, nan=-torch.inf)
    scores[:, PAD] = -torch.inf
    scores[:, vocab.mask :] = -torch.inf  # [MASK], [EOS]
    return scores


def fit_sequential(
    data: TrainingSet,
    train_last_day: int,
    valid_rows: np.ndarray,
    valid_score: Callable,
    cfg: SequentialConfig,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[SequentialRecommender, dict]:
    """Train with early stopping on ``valid_score(scores, rows) -> R@20``; keep the best epoch."""
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model = SequentialRecommender(cfg, data.vocab.size)
    opt = adamw(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    best, bad, state, curve, start, stopped_by = (
        -1.0,
        0,
        None,
        [],
        time.perf_counter(),
        "max_epochs",
    )
    curve_seconds = []  # seconds from the start to each epoch's validation
    for epoch in range(1, cfg.max_epochs + 1):
        windows = training_windows(data, train_last_day, cfg.max_len, rng)  # reshuffled products
        loss = _train_epoch(model, windows, data.vocab, cfg, opt, rng)
        r20 = valid_score(sequential_scores(model, data, valid_rows, cfg.seed), valid_rows)
        curve.append(round(r20, 4))
        elapsed = time.perf_counter() - start
        curve_seconds.append(round(elapsed, 1))
        log(f"{cfg.kind} epoch {epoch}: loss {loss:.3f} valid R@20 {r20:.4f}")
        if r20 > best:
            best, bad, best_epoch = r20, 0, epoch
            state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
            if bad >= cfg.patience and epoch >= cfg.min_epochs:
                stopped_by = "patience"
                break
        if cfg.max_seconds is not None and elapsed * (epoch + 1) / epoch > cfg.max_seconds:
            stopped_by = "time budget"  # another epoch of the mean length would overrun it
            break
    model.load_state_dict(state)
    return model, {
        "valid_R@20": best,
        "best_epoch": best_epoch,
        "epochs": len(curve),
        "valid_curve": curve,
        "curve_seconds": curve_seconds,
        "windows": len(windows),
        "stopped_by": stopped_by,
        "seconds": round(time.perf_counter() - start, 1),
        **asdict(cfg),
    }

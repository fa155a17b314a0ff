"""The evaluation protocol (spec §4.7.4, issue 7): every method on exactly the same test samples.

Test baskets of carded customers (weeks after ``valid_end``) are scored in chunks; for each chunk
every method returns an (S, V) score matrix from information before the basket's week only:
the world model (its history slice + week-W context, T6 true or sampled from the customer's
mission snapshot), G/P/GP-TopFreq, TIFU-KNN and SASRec/BERT4Rec (tuned on validation weeks),
and on synthetic data the generator's oracle. Masked-item ranks use one shared mask per chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import torch

from retailsim_core.evaluation.baselines import TifuConfig
from retailsim_core.evaluation.metrics import masked_item_summary, next_basket_metrics, summarise, truth_matrix
from retailsim_core.evaluation.sequential import SequentialConfig
from retailsim_core.lgsr import STORE_FORMAT_CODES
from retailsim_core.models.losses import shown_products
from retailsim_core.models.world_model import AUX_HEADS, WorldModel
from retailsim_core.simulation import sample_missions
from retailsim_core.tensors import TrainingSet
from retailsim_core.tokens import PAD
from retailsim_core.training.corruption import evaluation_mask
from retailsim_core.training.validation import shuffled

Scorer = Callable[[np.ndarray, dict], torch.Tensor]     # (rows, batch) -> (S, V)


@dataclass(frozen=True)
class EvalConfig:
    max_test_samples: int | None = 6_000
    max_valid_samples: int = 1_500
    mask_rate: float = 0.2
    chunk: int = 512
    seed: int = 0
    sequential: SequentialConfig = field(default_factory=SequentialConfig)
    tifu: TifuConfig = field(default_factory=TifuConfig)


def subsample(rows: np.ndarray, n: int | None, seed: int) -> np.ndarray:
    if n is None or len(rows) <= n:
        return rows
    return np.sort(np.random.default_rng(seed).choice(rows, n, replace=False))


def world_model_scorer(model: WorldModel, t6: str, t1_names: tuple[str, ...] = (), rng_seed: int = 0) -> Scorer:
    """Next-basket scores: the decoder sees the context token and one [MASK] slot. ``t6``: "true"
    (the basket's codes), "sampled" (type/focus drawn from the week-W mission snapshot) or "hidden"."""
    @torch.no_grad()
    def score(rows: np.ndarray, batch: dict) -> torch.Tensor:
        b = dict(batch)
        if t6 == "sampled":
            b["t6"] = sample_missions(batch, t1_names, np.random.default_rng([rng_seed, int(rows[0])]))
        _, logits = model.next_basket(b, hide_t6=torch.ones(len(rows), dtype=torch.bool) if t6 == "hidden" else None)
        return logits.double()
    return score


def masked_ranks(position_scores: torch.Tensor, r: np.ndarray, c: np.ndarray, inputs: np.ndarray,
                 targets: np.ndarray) -> np.ndarray:
    """Rank of each masked product (positions (r, c), scores (M, V)) among all products not shown
    unmasked in its basket."""
    shown = shown_products(torch.from_numpy(inputs), torch.from_numpy(targets), position_scores.shape[1])
    s = position_scores.masked_fill(shown[torch.as_tensor(r)], -torch.inf)
    s[:, position_scores.shape[1] - 1] = -torch.inf                                  # [EOS]
    true = s.gather(1, torch.as_tensor(targets[r, c].astype(np.int64))[:, None])
    return (s >= true).sum(1).numpy()


@dataclass
class MethodResults:
    rows: np.ndarray                                                              # samples, in scoring order
    next_basket: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)   # method -> metric -> (S,)
    masked_ranks: dict[str, np.ndarray] = field(default_factory=dict)             # method -> (M,)
    masked_position: np.ndarray | None = None                                     # (M,) index into ``rows``


def score_rows(data: TrainingSet, rows: np.ndarray, scorers: dict[str, Scorer], model: WorldModel | None,
               context: dict, cfg: EvalConfig, log: Callable[[str], None]) -> MethodResults:
    """Run every scorer on ``rows`` in chunks (history-length order, little padding)."""
    order = rows[np.argsort(data.hist_end[rows] - data.hist_start[rows], kind="stable")]
    parts: dict[str, list[dict]] = {m: [] for m in scorers}
    ranks: dict[str, list[np.ndarray]] = {m: [] for m in scorers}
    positions = []
    for i in range(0, len(order), cfg.chunk):
        chunk = order[i:i + cfg.chunk]
        batch = data[chunk]
        truth = truth_matrix(data.item_tokens, data.item_starts[chunk], np.minimum(data.item_counts[chunk], 50),
                             data.vocab.size)
        masked_batch = shuffled(batch, data.vocab, cfg.seed + i)                      # baskets are sets (D34)
        m_in, m_tg = evaluation_mask(masked_batch["tokens"].numpy(), data.vocab, cfg.mask_rate, cfg.seed + i)
        r, c = np.nonzero(m_tg != PAD)
        positions.append(i + r)
        for name, scorer in scorers.items():
            scores = scorer(chunk, batch)
            parts[name].append(next_basket_metrics(
                scores, truth, repeat=context["repeat_of"](chunk), basket_len=context["basket_len"][chunk],
                categories=context["categories"], prices=context["prices_of"](chunk), spend=context["spend"][chunk]))
            pos_scores = (_model_position_scores(model, masked_batch, m_in, m_tg) if name.startswith("world_model")
                          else scores[torch.as_tensor(r)])
            ranks[name].append(masked_ranks(pos_scores, r, c, m_in, m_tg))
        log(f"evaluated {min(i + cfg.chunk, len(order)):,}/{len(order):,} samples")
    return MethodResults(rows=order,
                         next_basket={m: {k: np.concatenate([p[k] for p in ps]) for k in ps[0]} for m, ps in parts.items()},
                         masked_ranks={m: np.concatenate(rs) for m, rs in ranks.items()},
                         masked_position=np.concatenate(positions))


@torch.no_grad()
def _model_position_scores(model: WorldModel, batch: dict, m_in: np.ndarray, m_tg: np.ndarray) -> torch.Tensor:
    """Full-vocabulary scores at every masked position (T6 withheld: the masked-item task)."""
    inputs, targets = torch.from_numpy(m_in), torch.from_numpy(m_tg)
    out = model(batch, inputs, hidden=targets != PAD, hide_t6=torch.ones(len(inputs), dtype=torch.bool))
    r, c = torch.nonzero(targets != PAD, as_tuple=True)
    return model.product_logits(out, r, c).double()


def slices(samples: pl.DataFrame, data: TrainingSet, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Slice name -> positions into ``rows``: all, cold start (< 5 prior baskets), baskets with novel
    products, each history bucket, each store format."""
    s = samples[rows]
    out = {"all": np.arange(len(rows)), "cold_start": np.flatnonzero(s["is_cold_start"].to_numpy()),
           "novel_products": np.flatnonzero(s["is_novel_products"].to_numpy())}
    for b in sorted(s["bucket"].unique().to_list()):
        out[f"bucket_{b}"] = np.flatnonzero(s["bucket"].to_numpy() == b)
    codes = data.t5_codes[rows, 0]
    for i, fmt in enumerate(STORE_FORMAT_CODES, 1):
        out[f"format_{fmt}"] = np.flatnonzero(codes == i)
    return {k: v for k, v in out.items() if len(v)}


def aux_calibration(model: WorldModel, data: TrainingSet, rows: np.ndarray, chunk: int = 512) -> pl.DataFrame:
    """Accuracy, majority-class accuracy and expected calibration error of each auxiliary head
    (T6 withheld), plus the reliability curve in 10 confidence bins."""
    probs: dict[str, list] = {k: [] for k in AUX_HEADS}
    labels: dict[str, list] = {k: [] for k in AUX_HEADS}
    with torch.no_grad():
        for i in range(0, len(rows), chunk):
            batch = data[rows[i:i + chunk]]
            out, _ = model.next_basket(batch, hide_t6=torch.ones(len(batch["t6"]), dtype=torch.bool))
            for name, (col, n) in AUX_HEADS.items():
                probs[name].append(out.aux_logits[name].softmax(-1))
                labels[name].append(batch["t6"][:, col] - 1)
    rows_out = []
    for name, (_, n) in AUX_HEADS.items():
        p, y = torch.cat(probs[name]), torch.cat(labels[name])
        ok = (y >= 0) & (y < n)
        p, y = p[ok], y[ok]
        conf, pred = p.max(1)
        correct = (pred == y).double()
        bins = torch.clamp((conf * 10).long(), max=9)
        ece = sum(float((bins == k).double().mean() * (correct[bins == k].mean() - conf[bins == k].double().mean()).abs())
                  for k in range(10) if (bins == k).any())
        for k in range(10):
            sel = bins == k
            rows_out.append({"head": name, "bin": k, "samples": int(sel.sum()),
                             "confidence": float(conf[sel].mean()) if sel.any() else None,
                             "accuracy": float(correct[sel].mean()) if sel.any() else None,
                             "head_accuracy": float(correct.mean()), "majority_accuracy": float(torch.bincount(y, minlength=n).max() / len(y)),
                             "ece": ece})
    return pl.DataFrame(rows_out)


def nested_metrics(results: MethodResults, slice_rows: dict[str, np.ndarray]) -> dict:
    """{task: {slice: {method: {metric: value}}}}; ``slice_rows`` index ``results.rows``."""
    nb = {s: {m: summarise(v, idx) for m, v in results.next_basket.items()} for s, idx in slice_rows.items()}
    mi = {}
    for s, idx in slice_rows.items():
        sel = np.flatnonzero(np.isin(results.masked_position, idx))
        mi[s] = {m: masked_item_summary(r, sel) for m, r in results.masked_ranks.items()}
    return {"next_basket": nb, "masked_item": mi}



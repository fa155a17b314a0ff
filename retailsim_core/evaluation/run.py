"""The evaluation protocol (design §4.7.4, decisions D42, D52): every method on the same baskets.

Test baskets of carded customers (weeks after ``valid_end``) are scored in chunks; for each chunk
every method returns an (S, V) score matrix from what it may know (``METHOD_INPUTS``): never the
basket's products, size, spend or labels, except the conditional row, which is told the
basket's mission and is compared with a counting baseline told the same. Masked-item ranks use
one shared mask per chunk; methods that read the shown products have a masked scorer of their
own, the others rank with their next-basket scores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import torch

from retailsim_core.evaluation.baselines import TifuConfig, UpcfConfig
from retailsim_core.evaluation.bootstrap import interval, resample_weights
from retailsim_core.evaluation.metrics import (
    masked_item_summary,
    next_basket_metrics,
    summarise,
    truth_matrix,
)
from retailsim_core.evaluation.sequential import SequentialConfig
from retailsim_core.lgsr import STORE_FORMAT_CODES
from retailsim_core.models.losses import shown_products
from retailsim_core.models.world_model import AUX_HEADS, WorldModel
from retailsim_core.tensors import TrainingSet
from retailsim_core.tokens import PAD
from retailsim_core.training.corruption import evaluation_mask
from retailsim_core.training.validation import shuffled

Scorer = Callable[[np.ndarray, dict], torch.Tensor]  # (rows, batch) -> (S, V)
MaskedScorer = Callable[[np.ndarray, dict, np.ndarray, np.ndarray], torch.Tensor]  # -> (M, V)

HISTORY = "the customer's trips before the basket's week"
POPULARITY = "product counts of weeks before the evaluated period"
CONTEXT = "the trip's store, date and hour; shelf prices (D45)"
METHOD_INPUTS = {
    "world_model": f"{HISTORY}; {CONTEXT}; customer snapshots as of the week. No basket labels.",
    "world_model | given mission": "as world_model, plus the basket's true mission type and focus "
    "(the simulation use; compare with Mission-P-TopFreq)",
    "G-TopFreq": POPULARITY,
    "P-TopFreq": f"{HISTORY} (ties in product order)",
    "GP-TopFreq": f"{HISTORY}; {POPULARITY}",
    "Store-P-TopFreq": f"{HISTORY}; the trip's store; {POPULARITY}",
    "Mission-P-TopFreq": f"{HISTORY}; the basket's true mission type and focus; {POPULARITY}",
    "TIFU-KNN": f"{HISTORY}; other customers' trips before the evaluated period",
    "UP-CF@r": f"{HISTORY}; other customers' trips before the evaluated period",
    "SASRec": f"{HISTORY} (trained on training weeks)",
    "BERT4Rec": f"{HISTORY} (trained on training weeks)",
    "P-TopFreq + co-purchase": f"masked items only: {HISTORY}, the basket's shown products, "
    "co-purchase rates of training weeks",
    "oracle": "synthetic only: the generator's planted probabilities given the basket's "
    "planted mission",
    "oracle (no mission)": "synthetic only: the planted probabilities averaged over the "
    "missions the shopper might be on, given the planted customer, the store and the hour",
}
CONDITIONAL = (
    "world_model | given mission",
    "Mission-P-TopFreq",
    "oracle",
)  # told the basket's mission


@dataclass(frozen=True)
class EvalConfig:
    max_test_samples: int | None = 6_000
    max_valid_samples: int = 1_500
    mask_rate: float = 0.2
    chunk: int = 512
    seed: int = 0
    week_slices: tuple[tuple[int, int], ...] = ((96, 104), (105, 117))  # test-period slices
    bootstrap: int = 1_000  # customer-cluster resamples for the 95% intervals
    copurchase_weights: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)  # tuned on validation
    sequential: SequentialConfig = field(default_factory=SequentialConfig)
    tifu: TifuConfig = field(default_factory=TifuConfig)
    upcf: UpcfConfig = field(default_factory=UpcfConfig)


def subsample(rows: np.ndarray, n: int | None, seed: int) -> np.ndarray:
    if n is None or len(rows) <= n:
        return rows
    return np.sort(np.random.default_rng(seed).choice(rows, n, replace=False))


def world_model_scorer(model: WorldModel, given_mission: bool = False) -> Scorer:
    """Next-basket log-probabilities of the single-[MASK] query; ``given_mission``: the model is
    told the basket's true mission type and focus (the conditional row)."""

    @torch.no_grad()
    def score(rows: np.ndarray, batch: dict) -> torch.Tensor:
        given = torch.full((len(rows),), given_mission, dtype=torch.bool)
        _, log_p = model.next_basket(batch, given_mission=given)
        return log_p.double().masked_fill(model.excluded(len(rows)), -torch.inf)

    return score


@torch.no_grad()
def world_model_masked_scorer(model: WorldModel) -> MaskedScorer:
    """Full-vocabulary scores at every masked position (no mission given)."""

    def score(rows, batch, m_in, m_tg) -> torch.Tensor:
        inputs, targets = torch.from_numpy(m_in), torch.from_numpy(m_tg)
        with torch.no_grad():
            out = model(batch, inputs, hidden=targets != PAD)
            r, c = torch.nonzero(targets != PAD, as_tuple=True)
            return model.slot_log_probs(
                out, r, c, shown_products(inputs, targets, model.vocab_size)[r]
            ).double()

    return score


def masked_ranks(
    position_scores: torch.Tensor,
    r: np.ndarray,
    c: np.ndarray,
    inputs: np.ndarray,
    targets: np.ndarray,
) -> np.ndarray:
    """Rank of each masked product (positions (r, c), scores (M, V)) among all products not shown
    unmasked in its basket."""
    shown = shown_products(
        torch.from_numpy(inputs), torch.from_numpy(targets), position_scores.shape[1]
    )
    s = position_scores.masked_fill(shown[torch.as_tensor(r)], -torch.inf)
    s[:, position_scores.shape[1] - 1] = -torch.inf  # [EOS]
    true = s.gather(1, torch.as_tensor(targets[r, c].astype(np.int64))[:, None])
    return (s >= true).sum(1).numpy()


@dataclass
class MethodResults:
    rows: np.ndarray  # samples, in scoring order
    next_basket: dict[str, dict[str, np.ndarray]] = field(
        default_factory=dict
    )  # method -> metric -> (S,)
    masked_ranks: dict[str, np.ndarray] = field(default_factory=dict)  # method -> (M,)
    masked_position: np.ndarray | None = None  # (M,) index into ``rows``


def score_rows(
    data: TrainingSet,
    rows: np.ndarray,
    scorers: dict[str, Scorer],
    masked_scorers: dict[str, MaskedScorer],
    context: dict,
    cfg: EvalConfig,
    log: Callable[[str], None],
) -> MethodResults:
    """Run every scorer on ``rows`` in chunks (history-length order, little padding)."""
    order = rows[np.argsort(data.hist_end[rows] - data.hist_start[rows], kind="stable")]
    parts: dict[str, list[dict]] = {m: [] for m in scorers}
    ranks: dict[str, list[np.ndarray]] = {m: [] for m in (*scorers, *masked_scorers)}
    positions = []
    for i in range(0, len(order), cfg.chunk):
        chunk = order[i : i + cfg.chunk]
        batch = data[chunk]
        truth = truth_matrix(
            data.item_tokens, data.item_starts[chunk], data.item_counts[chunk], data.vocab.size
        )
        masked_batch = shuffled(batch, data.vocab, cfg.seed + i)  # baskets are sets (D34)
        m_in, m_tg = evaluation_mask(
            masked_batch["tokens"].numpy(), data.vocab, cfg.mask_rate, cfg.seed + i
        )
        r, c = np.nonzero(m_tg != PAD)
        positions.append(i + r)
        for name, scorer in scorers.items():
            scores = scorer(chunk, batch)
            parts[name].append(
                next_basket_metrics(
                    scores,
                    truth,
                    repeat=context["repeat_of"](chunk),
                    basket_len=context["basket_len"][chunk],
                    categories=context["categories"],
                    prices=context["prices_of"](chunk),
                    spend=context["spend"][chunk],
                    outside=data.item_oov[chunk],
                )
            )
            if name not in CONDITIONAL and name not in masked_scorers:
                ranks[name].append(masked_ranks(scores[torch.as_tensor(r)], r, c, m_in, m_tg))
        for name, scorer in masked_scorers.items():
            ranks[name].append(
                masked_ranks(scorer(chunk, masked_batch, m_in, m_tg), r, c, m_in, m_tg)
            )
        log(f"evaluated {min(i + cfg.chunk, len(order)):,}/{len(order):,} samples")
    return MethodResults(
        rows=order,
        next_basket={
            m: {k: np.concatenate([p[k] for p in ps]) for k in ps[0]} for m, ps in parts.items()
        },
        masked_ranks={m: np.concatenate(rs) for m, rs in ranks.items() if rs},
        masked_position=np.concatenate(positions),
    )


def slices(
    samples: pl.DataFrame,
    data: TrainingSet,
    rows: np.ndarray,
    week_slices: tuple[tuple[int, int], ...] = (),
) -> dict[str, np.ndarray]:
    """Slice name -> positions into ``rows``: all, test-week ranges, cold start (< 5 prior
    baskets), baskets with novel products, each history bucket, each store format."""
    s = samples[rows]
    week = s["week"].to_numpy()
    out = {"all": np.arange(len(rows))}
    for lo, hi in week_slices:
        out[f"test_{lo}_{hi}"] = np.flatnonzero((week >= lo) & (week <= hi))
    out |= {
        "cold_start": np.flatnonzero(s["is_cold_start"].to_numpy()),
        "novel_products": np.flatnonzero(s["is_novel_products"].to_numpy()),
    }
    for b in sorted(s["bucket"].unique().to_list()):
        out[f"bucket_{b}"] = np.flatnonzero(s["bucket"].to_numpy() == b)
    codes = data.t5_codes[rows, 0]
    for i, fmt in enumerate(STORE_FORMAT_CODES, 1):
        out[f"format_{fmt}"] = np.flatnonzero(codes == i)
    return {k: v for k, v in out.items() if len(v)}


def aux_calibration(
    model: WorldModel, data: TrainingSet, rows: np.ndarray, chunk: int = 512
) -> pl.DataFrame:
    """Accuracy, majority-class accuracy and expected calibration error of each auxiliary head
    (no mission given), plus the reliability curve in 10 confidence bins."""
    probs: dict[str, list] = {k: [] for k in AUX_HEADS}
    labels: dict[str, list] = {k: [] for k in AUX_HEADS}
    with torch.no_grad():
        for i in range(0, len(rows), chunk):
            batch = data[rows[i : i + chunk]]
            out, _ = model.next_basket(batch)
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
        ece = sum(
            float(
                (bins == k).double().mean()
                * (correct[bins == k].mean() - conf[bins == k].double().mean()).abs()
            )
            for k in range(10)
            if (bins == k).any()
        )
        majority = float(torch.bincount(y, minlength=n).max() / len(y))
        for k in range(10):
            sel = bins == k
            rows_out.append(
                {
                    "head": name,
                    "bin": k,
                    "samples": int(sel.sum()),
                    "confidence": float(conf[sel].mean()) if sel.any() else None,
                    "accuracy": float(correct[sel].mean()) if sel.any() else None,
                    "head_accuracy": float(correct.mean()),
                    "majority_accuracy": majority,
                    "ece": ece,
                }
            )
    return pl.DataFrame(rows_out)


def nested_metrics(results: MethodResults, slice_rows: dict[str, np.ndarray]) -> dict:
    """{task: {slice: {method: {metric: value}}}}; ``slice_rows`` index ``results.rows``."""
    nb = {
        s: {m: summarise(v, idx) for m, v in results.next_basket.items()}
        for s, idx in slice_rows.items()
    }
    mi = {}
    for s, idx in slice_rows.items():
        sel = np.flatnonzero(np.isin(results.masked_position, idx))
        mi[s] = {m: masked_item_summary(r, sel) for m, r in results.masked_ranks.items()}
    return {"next_basket": nb, "masked_item": mi}


def intervals(
    results: MethodResults,
    slice_rows: dict[str, np.ndarray],
    customers: np.ndarray,
    cfg: EvalConfig,
    reference: str = "world_model",
) -> dict:
    """95% customer-cluster bootstrap intervals of next-basket R@20 and NDCG@10 and masked-item
    Hit@10 per slice and method, and of each method's paired difference from ``reference``:
    {task: {slice: {method: {metric: [lo, hi], "diff_" + metric: [lo, hi]}}}}."""
    out: dict = {"next_basket": {}, "masked_item": {}}
    for s, idx in slice_rows.items():
        weights, index = resample_weights(customers[idx], cfg.bootstrap, cfg.seed)
        nb = results.next_basket
        out["next_basket"][s] = {
            m: {k: list(interval(v[k][idx], weights, index)) for k in ("R@20", "NDCG@10")}
            for m, v in nb.items()
        }
        if reference in nb:
            for m, v in nb.items():
                for k in ("R@20", "NDCG@10"):
                    diff = nb[reference][k][idx] - v[k][idx]
                    out["next_basket"][s][m][f"diff_{k}"] = list(interval(diff, weights, index))
        sel = np.flatnonzero(np.isin(results.masked_position, idx))
        pos = np.searchsorted(idx, results.masked_position[sel])  # masked slot -> basket in slice
        out["masked_item"][s] = {
            m: {"Hit@10": list(interval((r[sel] <= 10).astype(float), weights, index[pos]))}
            for m, r in results.masked_ranks.items()
        }
    return out

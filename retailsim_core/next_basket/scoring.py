"""The scoring stage: every scorer on the same test baskets, in chunks.

Each chunk is scored by every method; masked-item ranks use one shared, seeded mask per chunk.
Methods that read the shown products have a masked scorer of their own, the others rank with
their next-basket scores; conditional rows have no masked-item rank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.datasets.tokens import PAD
from retailsim_core.models.losses import visible_products
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.next_basket.methods import CONDITIONAL
from retailsim_core.serving.scorer import MaskedScorer, Scorer
from retailsim_core.storage.heap import release_free_heap
from retailsim_core.training.run.corruption import evaluation_mask
from retailsim_core.training.scoring.metrics import next_basket_metrics, truth_matrix
from retailsim_core.training.scoring.validation import shuffled


def masked_ranks(
    scores: torch.Tensor,
    r: np.ndarray,
    c: np.ndarray,
    inputs: np.ndarray,
    targets: np.ndarray,
    *,
    basket_scores: bool = False,
) -> np.ndarray:
    """Rank of each masked product (positions (r, c)) among all products not shown unmasked in
    its basket (``visible_products``) and not [EOS]. ``scores``: (M, V), a row per masked
    position; ``basket_scores``: (B, V), the basket's row for all its positions (a next-basket
    scorer's, never copied per position). The products scoring at least as high, less the
    excluded ones among them, read at the shown products only: a masked (M, V) copy per method
    was a fifth of the scoring at 61,445 products (the oracle test keeps it). A masked product
    that is itself excluded, or scores -inf, ranks last (V). NumPy throughout: a basket's few
    positions are small operations, which a busy machine's thread pool slows tenfold."""
    m, v = len(r), scores.shape[1]
    s = scores.detach().cpu().numpy()
    rows, target = r.astype(np.int64), targets[r, c].astype(np.int64)  # (M,)
    at = rows if basket_scores else np.arange(m)  # (M,) each position's row of ``s``
    visible = visible_products(inputs, targets, v)  # (B, L)
    b, col = np.nonzero(visible)
    shown = np.unique(b.astype(np.int64) * v + inputs[b, col])  # sorted keys basket * V + token
    start, end = np.searchsorted(shown, rows * v), np.searchsorted(shown, (rows + 1) * v)
    n = end - start  # shown products of each masked position's basket
    pos = np.repeat(np.arange(m), n)  # (N,) masked position of each (position, shown product)
    within = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    tokens = shown[np.repeat(start, n) + within] - rows[pos] * v
    true = s[at, target]  # (M,)
    shown_above = np.bincount(pos, weights=s[at[pos], tokens] >= true[pos], minlength=m)
    eos_above = s[at, v - 1] >= true
    excluded = (target == v - 1) | np.isin(rows * v + target, shown) | (true == -np.inf)
    above = _at_least(s, at, true, basket_scores)
    ranks = above - shown_above.astype(np.int64) - eos_above.astype(np.int64)
    return np.where(excluded, v, ranks).astype(np.int64)


def _at_least(s: np.ndarray, at: np.ndarray, true: np.ndarray, basket_scores: bool) -> np.ndarray:
    """(M,) how many of row ``at[i]`` of ``s`` are >= ``true[i]``; a basket's row, shared by a
    run of its positions, is compared in place a run at a time."""
    if not basket_scores:
        return np.count_nonzero(s >= true[:, None], axis=1)
    out = np.empty(len(at), dtype=np.int64)
    change = np.flatnonzero(np.diff(at)) + 1
    for lo, hi in zip(np.r_[0, change], np.r_[change, len(at)], strict=True):
        if hi > lo:
            out[lo:hi] = np.count_nonzero(s[at[lo]] >= true[lo:hi, None], axis=1)
    return out


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
    step = cfg.chunk_for(data.vocab.size)
    for i in range(0, len(order), step):
        chunk = order[i : i + step]
        positions.append(
            i + _score_chunk(data, chunk, i, scorers, masked_scorers, context, cfg, parts, ranks)
        )
        release_free_heap()  # the chunk's freed buffers, before the next chunk's (D126)
        log(f"evaluated {min(i + step, len(order)):,}/{len(order):,} samples")
    return MethodResults(
        rows=order,
        next_basket={
            m: {k: np.concatenate([p[k] for p in ps]) for k in ps[0]} for m, ps in parts.items()
        },
        masked_ranks={m: np.concatenate(rs) for m, rs in ranks.items() if rs},
        masked_position=np.concatenate(positions),
    )


def _score_chunk(
    data: TrainingSet,
    chunk: np.ndarray,
    i: int,
    scorers: dict[str, Scorer],
    masked_scorers: dict[str, MaskedScorer],
    context: dict,
    cfg: EvalConfig,
    parts: dict[str, list[dict]],
    ranks: dict[str, list[np.ndarray]],
) -> np.ndarray:
    """Score ``chunk`` (the ``i``-th sample on) with every method into ``parts`` and ``ranks``;
    the masked positions' rows within the chunk. Its tensors die on return."""
    batch = data[chunk]
    truth = truth_matrix(
        data.item_tokens, data.item_starts[chunk], data.item_counts[chunk], data.vocab.size
    )
    masked_batch = shuffled(batch, data.vocab, cfg.seed + i)  # baskets are sets (D34)
    m_in, m_tg = evaluation_mask(
        masked_batch["tokens"].numpy(), data.vocab, cfg.mask_rate, cfg.seed + i
    )
    r, c = np.nonzero(m_tg != PAD)
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
            ranks[name].append(masked_ranks(scores, r, c, m_in, m_tg, basket_scores=True))
    for name, scorer in masked_scorers.items():
        ranks[name].append(masked_ranks(scorer(chunk, masked_batch, m_in, m_tg), r, c, m_in, m_tg))
    return r


def concat_results(first: MethodResults, second: MethodResults) -> MethodResults:
    """``first``'s rows then ``second``'s, as one result (masked positions re-indexed)."""
    return MethodResults(
        rows=np.concatenate([first.rows, second.rows]),
        next_basket={
            m: {k: np.concatenate([v[k], second.next_basket[m][k]]) for k in v}
            for m, v in first.next_basket.items()
        },
        masked_ranks={
            m: np.concatenate([r, second.masked_ranks[m]]) for m, r in first.masked_ranks.items()
        },
        masked_position=np.concatenate(
            [first.masked_position, second.masked_position + len(first.rows)]
        ),
    )

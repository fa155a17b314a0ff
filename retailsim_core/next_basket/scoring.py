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
from retailsim_core.models.losses import shown_products
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.next_basket.methods import CONDITIONAL
from retailsim_core.serving.scorer import MaskedScorer, Scorer
from retailsim_core.storage.heap import release_free_heap
from retailsim_core.training.run.corruption import evaluation_mask
from retailsim_core.training.scoring.metrics import next_basket_metrics, truth_matrix
from retailsim_core.training.scoring.validation import shuffled


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
            ranks[name].append(masked_ranks(scores[torch.as_tensor(r)], r, c, m_in, m_tg))
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

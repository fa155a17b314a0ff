"""The tuning stage: baselines tuned on validation weeks — the TIFU-KNN and UP-CF@r grids, the
SASRec/BERT4Rec early stopping, and the weight of the masked-item co-purchase baseline. Each is
chosen on validation weeks, then set up on the test period."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace

import numpy as np
import scipy.sparse as sp
import torch

from retailsim_core.evaluation import baselines as bl
from retailsim_core.evaluation.eval_config import EvalConfig
from retailsim_core.evaluation.metrics import masked_item_summary
from retailsim_core.evaluation.scoring import masked_ranks
from retailsim_core.evaluation.sequential import fit_sequential, sequential_scores
from retailsim_core.evaluation.tasks import EvalTasks
from retailsim_core.tensors import TrainingSet
from retailsim_core.tokens import PAD
from retailsim_core.training.corruption import evaluation_mask
from retailsim_core.training.validation import shuffled


def tune_baselines(tasks: EvalTasks, cfg: EvalConfig, log: Callable[[str], None]) -> dict:
    """Every tunable baseline chosen on validation weeks (neighbour pools as of the validation
    start), then set up on the test period (pools as of the test start): {"scorers": next-basket
    scorers by method, "copurchase": the masked-item scorer, "info": what was chosen}."""
    data, trips, pop = tasks.data, tasks.trips, tasks.popularity
    valid_rows, valid_day, test_day = tasks.valid_rows, tasks.valid_day, tasks.test_day
    valid_r20 = tasks.validation_recall
    pools = {
        "valid": (bl.tifu_pool(data, trips, valid_day), bl.upcf_pool(data, trips, valid_day)),
        "test": (bl.tifu_pool(data, trips, test_day), bl.upcf_pool(data, trips, test_day)),
    }

    def tifu(c, rows, period):
        vectors, customers = pools[period][0]
        return bl.tifu_knn(
            bl.tifu_vectors(data, rows, trips, c),
            vectors(c),
            c,
            bl.sample_customers(data, rows),
            customers,
        )

    def upcf(c, rows, period):
        recent, sets, customers = pools[period][1]
        start, end, n = bl.sample_history(data, rows)
        return bl.upcf(
            bl.recent_popularity(start, end, n, trips, c.recency),
            bl.history_weights(start, end, n) @ trips,
            recent(c),
            sets,
            c,
            bl.sample_customers(data, rows),
            customers,
            pop[period],
        )

    def grid(f, points):
        return max(
            (
                (valid_r20(f(c, valid_rows, "valid"), valid_rows), -i, c)
                for i, c in enumerate(points)
            ),
            key=lambda t: t[:2],
        )

    tifu_r20, _, tifu_best = grid(tifu, cfg.tifu.grid())
    upcf_r20, _, upcf_best = grid(upcf, cfg.upcf.grid())
    log(
        f"tuned on validation: TIFU-KNN {tifu_best} (R@20 {tifu_r20:.4f}); UP-CF@r {upcf_best} "
        f"(R@20 {upcf_r20:.4f})"
    )
    train_last_day = valid_day - 1
    sasrec, sas_info = fit_sequential(
        data, train_last_day, valid_rows, valid_r20, cfg.sequential, log
    )
    bert, bert_info = fit_sequential(
        data, train_last_day, valid_rows, valid_r20, replace(cfg.sequential, kind="bert4rec"), log
    )
    copurchase = bl.copurchase_matrix(trips[data.trip_day < valid_day])
    weight, co_hits = tune_copurchase(data, trips, copurchase, valid_rows, cfg)
    log(f"co-purchase weight {weight} (validation masked Hit@10 {co_hits:.4f})")
    return {
        "scorers": {
            "TIFU-KNN": lambda rows, b: tifu(tifu_best, rows, "test"),
            "UP-CF@r": lambda rows, b: upcf(upcf_best, rows, "test"),
            "SASRec": lambda rows, b: sequential_scores(sasrec, data, rows, cfg.seed),
            "BERT4Rec": lambda rows, b: sequential_scores(bert, data, rows, cfg.seed),
        },
        "copurchase": copurchase_scorer(data, trips, copurchase, weight),
        "info": {
            "TIFU-KNN": {**asdict(tifu_best), "valid_R@20": tifu_r20},
            "UP-CF@r": {**asdict(upcf_best), "valid_R@20": upcf_r20},
            "SASRec": sas_info,
            "BERT4Rec": bert_info,
            "P-TopFreq + co-purchase": {"weight": weight, "valid_Hit@10": co_hits},
        },
    }


def copurchase_scorer(data: TrainingSet, trips, copurchase, weight: float):
    """Masked-item scores from personal frequency and co-purchase with the shown products."""

    def score(rows, batch, m_in, m_tg) -> torch.Tensor:
        r, _ = np.nonzero(m_tg != PAD)
        shown = np.where((m_tg == PAD) & (m_in >= 1) & (m_in <= data.vocab.n_products), m_in, PAD)
        rr, cc = np.nonzero(shown[r] != PAD)
        shown_m = sp.csr_matrix(
            (np.ones(len(rr)), (rr, shown[r][rr, cc])), shape=(len(r), data.vocab.size)
        )
        return bl.copurchase_scores(
            bl.personal_counts(data, rows[r], trips), shown_m, copurchase, weight
        )

    return score


def tune_copurchase(
    data: TrainingSet, trips, copurchase, rows: np.ndarray, cfg: EvalConfig
) -> tuple[float, float]:
    """The co-purchase weight with the best validation masked-item Hit@10 (the test's masking)."""
    hits = {w: [] for w in cfg.copurchase_weights}
    for i in range(0, len(rows), cfg.chunk):
        chunk = rows[i : i + cfg.chunk]
        batch = shuffled(data[chunk], data.vocab, cfg.seed + i)
        m_in, m_tg = evaluation_mask(
            batch["tokens"].numpy(), data.vocab, cfg.mask_rate, cfg.seed + i
        )
        r, c = np.nonzero(m_tg != PAD)
        for w in cfg.copurchase_weights:
            ranks = masked_ranks(
                copurchase_scorer(data, trips, copurchase, w)(chunk, batch, m_in, m_tg),
                r,
                c,
                m_in,
                m_tg,
            )
            hits[w].append(ranks)
    scores = {w: masked_item_summary(np.concatenate(v))["Hit@10"] for w, v in hits.items()}
    best = max(scores, key=lambda w: (scores[w], -w))
    return best, scores[best]

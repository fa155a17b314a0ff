"""The tuning stage: baselines tuned on validation weeks — the TIFU-KNN and UP-CF@r grids, the
SASRec/BERT4Rec early stopping, and the weight of the masked-item co-purchase baseline. Each is
chosen on validation weeks (``tune_baselines``), then set up on the test period
(``baseline_scorers``). The choice is an asset of its own, ``tuned_baselines``: it does not
depend on the world model, so a new checkpoint is evaluated without tuning them again."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace

import numpy as np
import scipy.sparse as sp
import torch

from retailsim_core.baselines import counting as bl
from retailsim_core.baselines import neighbour_baselines as nb
from retailsim_core.baselines.sequential import (
    SequentialRecommender,
    fit_sequential,
    sequential_scores,
)
from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.datasets.tokens import PAD
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.next_basket.scoring import masked_ranks
from retailsim_core.next_basket.tasks import EvalTasks
from retailsim_core.training.run.corruption import evaluation_mask
from retailsim_core.training.scoring.metrics import masked_item_summary
from retailsim_core.training.scoring.validation import shuffled


@dataclass(frozen=True)
class TunedBaselines:
    """What the tuning stage chose on validation weeks; ``baseline_scorers`` sets it up on the
    test period. Saved by ``pipeline/baseline_fitting.py`` as the ``tuned_baselines`` asset."""

    tifu: nb.TifuConfig
    upcf: nb.UpcfConfig
    copurchase_weight: float
    sasrec: SequentialRecommender
    bert4rec: SequentialRecommender
    info: dict  # per method: what was chosen and its validation figures


def tifu_scores(tasks: EvalTasks, pool, c: nb.TifuConfig, rows: np.ndarray) -> torch.Tensor:
    """TIFU-KNN scores (S, V) of ``rows`` against a neighbour ``pool``
    (``neighbour_baselines.tifu_pool``)."""
    return next(tifu_grid_scores(tasks, pool, [c], rows))[1]


def tifu_grid_scores(
    tasks: EvalTasks, pool, configs: list[nb.TifuConfig], rows: np.ndarray
) -> Iterator[tuple[nb.TifuConfig, torch.Tensor]]:
    """(config, ``tifu_scores``) of every config: configs with the same decays share their
    vectors and similarities (``neighbour_baselines.tifu_knn_grid``)."""
    vectors, customers = pool
    data = tasks.data
    shared: dict[tuple, list[nb.TifuConfig]] = {}
    for c in configs:
        shared.setdefault((c.group_size, c.within_decay, c.group_decay), []).append(c)
    for group in shared.values():
        own = nb.tifu_vectors(data, rows, tasks.trips, group[0])
        yield from nb.tifu_knn_grid(
            own, vectors(group[0]), group, nb.sample_customers(data, rows), customers
        )


def upcf_scores(
    tasks: EvalTasks, pool, popularity, c: nb.UpcfConfig, rows: np.ndarray
) -> torch.Tensor:
    """UP-CF@r scores (S, V) of ``rows`` against a ``pool`` (``neighbour_baselines.upcf_pool``)."""
    recent, sets, customers = pool
    data, trips = tasks.data, tasks.trips
    start, end, n = bl.sample_history(data, rows)
    return nb.upcf(
        nb.recent_popularity(start, end, n, trips, c.recency),
        bl.history_weights(start, end, n) @ trips,
        recent(c),
        sets,
        c,
        nb.sample_customers(data, rows),
        customers,
        popularity,
    )


def tune_baselines(tasks: EvalTasks, cfg: EvalConfig, log: Callable[[str], None]) -> TunedBaselines:
    """Every tunable baseline chosen on validation weeks, neighbour pools as of the validation
    start; the sequence models trained on training weeks, early-stopped on validation R@20."""
    data, trips, rows, day = tasks.data, tasks.trips, tasks.valid_rows, tasks.valid_day
    valid_r20 = tasks.validation_recall
    tifu_pool, upcf_pool = nb.tifu_pool(data, trips, day), nb.upcf_pool(data, trips, day)
    pop = tasks.popularity["valid"]

    def grid(scored, points):  # the best R@20, the first of the grid on a tie
        recall = {c: valid_r20(scores, rows) for c, scores in scored}
        return max(((recall[c], -i, c) for i, c in enumerate(points)), key=lambda t: t[:2])

    tifu_points, upcf_points = cfg.tifu.grid(), cfg.upcf.grid()
    tifu_r20, _, tifu_best = grid(
        tifu_grid_scores(tasks, tifu_pool, tifu_points, rows), tifu_points
    )
    upcf_r20, _, upcf_best = grid(
        ((c, upcf_scores(tasks, upcf_pool, pop, c, rows)) for c in upcf_points), upcf_points
    )
    log(
        f"tuned on validation: TIFU-KNN {tifu_best} (R@20 {tifu_r20:.4f}); UP-CF@r {upcf_best} "
        f"(R@20 {upcf_r20:.4f})"
    )
    sasrec, sas_info = fit_sequential(data, day - 1, rows, valid_r20, cfg.sequential, log)
    bert, bert_info = fit_sequential(
        data, day - 1, rows, valid_r20, replace(cfg.sequential, kind="bert4rec"), log
    )
    copurchase = bl.copurchase_matrix(trips[data.trip_day < day])
    weight, co_hits = tune_copurchase(data, trips, copurchase, rows, cfg)
    log(f"co-purchase weight {weight} (validation masked Hit@10 {co_hits:.4f})")
    return TunedBaselines(
        tifu=tifu_best,
        upcf=upcf_best,
        copurchase_weight=weight,
        sasrec=sasrec,
        bert4rec=bert,
        info={
            "TIFU-KNN": {**asdict(tifu_best), "valid_R@20": tifu_r20},
            "UP-CF@r": {**asdict(upcf_best), "valid_R@20": upcf_r20},
            "SASRec": sas_info,
            "BERT4Rec": bert_info,
            "P-TopFreq + co-purchase": {"weight": weight, "valid_Hit@10": co_hits},
        },
    )


def baseline_scorers(tasks: EvalTasks, tuned: TunedBaselines, cfg: EvalConfig) -> dict:
    """The tuned baselines set up on the test period (neighbour pools and co-purchase rates as of
    the test start): {"scorers": next-basket scorers by method, "copurchase": the masked-item
    scorer}."""
    data, trips, day = tasks.data, tasks.trips, tasks.test_day
    tifu_pool, upcf_pool = nb.tifu_pool(data, trips, day), nb.upcf_pool(data, trips, day)
    pop = tasks.popularity["test"]
    copurchase = bl.copurchase_matrix(trips[data.trip_day < tasks.valid_day])
    return {
        "scorers": {
            "TIFU-KNN": lambda rows, b: tifu_scores(tasks, tifu_pool, tuned.tifu, rows),
            "UP-CF@r": lambda rows, b: upcf_scores(tasks, upcf_pool, pop, tuned.upcf, rows),
            "SASRec": lambda rows, b: sequential_scores(tuned.sasrec, data, rows, cfg.seed),
            "BERT4Rec": lambda rows, b: sequential_scores(tuned.bert4rec, data, rows, cfg.seed),
        },
        "copurchase": copurchase_scorer(data, trips, copurchase, tuned.copurchase_weight),
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

"""Validation each epoch. Masked items (BERT4Rec protocol, design §4.7.4): mask a share of each
basket's products (baskets in a seeded random order, as in training), rank the whole vocabulary at
each masked position, score Hit@10, NDCG@10 and MRR — for the model and, on exactly the same
positions, for popularity (training-week purchase counts). Next basket: R@20 and NDCG@10 of the
single-[MASK] query against the whole basket, with no mission given (what is known before the
trip) — the early-stopping metric (decisions D37, D52).

Products shown unmasked in the basket are excluded from every ranking (baskets list distinct
products), for the model and the baseline alike.
"""

from __future__ import annotations

import numpy as np
import torch

from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.datasets.tokens import PAD
from retailsim_core.models.losses import shown_products
from retailsim_core.models.world_model import WorldModel
from retailsim_core.training.run.corruption import evaluation_mask, shuffle_items
from retailsim_core.training.scoring.metrics import ndcg_at, recall_at


def ranks_of(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """1-based rank of ``target`` (M,) in each row of ``scores`` (M, V); ties count against it."""
    true = scores.gather(1, target[:, None])
    return (scores >= true).sum(1)


def rank_metrics(ranks: torch.Tensor, k: int = 10) -> dict[str, float]:
    ranks = ranks.double()
    hit = (ranks <= k).double()
    return {
        f"Hit@{k}": float(hit.mean()),
        f"NDCG@{k}": float((hit / torch.log2(ranks + 1)).mean()),
        "MRR": float((1.0 / ranks).mean()),
    }


def eval_batches(data: TrainingSet, rows: np.ndarray, batch_size: int = 256):
    """Batches of ``rows`` ordered by history length, then basket size, each with its row indices:
    little padding on either axis (most histories reach the length cap, so without the second key
    the decoder would mostly attend over padded basket slots)."""
    order = rows[np.lexsort((data.item_counts[rows], data.hist_end[rows] - data.hist_start[rows]))]
    for i in range(0, len(order), batch_size):
        yield order[i : i + batch_size], data[order[i : i + batch_size]]


@torch.no_grad()
def masked_item_ranks(
    model: WorldModel,
    data: TrainingSet,
    rows: np.ndarray,
    popularity: np.ndarray | None,
    mask_rate: float,
    seed: int,
) -> dict[str, np.ndarray]:
    """Per masked position: its sample row and the rank of the true product under the model and
    popularity (left out when ``popularity`` is None)."""
    model.train(False)
    pop = None if popularity is None else torch.as_tensor(popularity, dtype=torch.float32)
    out_rows, model_ranks, pop_ranks = [], [], []
    for batch_rows, batch in eval_batches(data, rows):
        batch = shuffled(batch, data.vocab, seed + int(batch_rows[0]))
        inputs, targets = evaluation_mask(
            batch["tokens"].numpy(), data.vocab, mask_rate, seed + int(batch_rows[0])
        )
        inputs, targets = torch.from_numpy(inputs), torch.from_numpy(targets)
        r, c = torch.nonzero(targets != PAD, as_tuple=True)
        true = targets[r, c].long()
        out = model(batch, inputs, hidden=targets != PAD)
        shown = shown_products(inputs, targets, data.vocab.size)[
            r
        ]  # (M, V), once for both rankings
        logits = model.slot_log_probs(out, r, c, shown)
        model_ranks.append(
            ranks_of(logits.masked_fill(model.excluded(len(r), shown), -torch.inf), true)
        )
        if pop is not None:
            pop_ranks.append(ranks_of(pop[None, :].masked_fill(shown, -torch.inf), true))
        out_rows.append(torch.as_tensor(batch_rows)[r])

    def cat(xs):
        return torch.cat(xs).numpy() if xs else np.zeros(0, dtype=np.int64)

    return {"row": cat(out_rows), "model": cat(model_ranks)} | (
        {} if pop is None else {"popularity": cat(pop_ranks)}
    )


def shuffled(batch: Batch, vocab, seed: int) -> Batch:
    """The batch with each basket in a seeded random order, as in training (baskets are sets)."""
    tokens, prices = shuffle_items(
        batch["tokens"].numpy(), batch["item_prices"].numpy(), vocab, np.random.default_rng(seed)
    )
    return {**batch, "tokens": torch.from_numpy(tokens), "item_prices": torch.from_numpy(prices)}


@torch.no_grad()
def next_basket_metrics_of(
    model: WorldModel, data: TrainingSet, rows: np.ndarray, k: int = 20
) -> dict[str, float]:
    """Validation next-basket R@20 and NDCG@10 from the single-[MASK] query, no mission given,
    by the evaluation's own metric functions. The truth is the whole basket, products outside
    the vocabulary included (never hits)."""
    model.train(False)
    recall, ndcg = [], []
    for batch_rows, batch in eval_batches(data, rows):
        n = len(batch_rows)
        _, scores = model.next_basket(batch)
        truth = torch.zeros(n, model.vocab_size, dtype=torch.bool)
        truth.scatter_(1, batch["tokens"].long(), True)
        truth[:, [PAD, data.vocab.eos]] = False
        hits = truth.gather(1, scores.topk(k, dim=1).indices).numpy()  # (n, k)
        n_true = truth.sum(1).numpy() + data.item_oov[batch_rows]
        recall.append(recall_at(hits, n_true, k))
        ndcg.append(ndcg_at(hits, np.maximum(n_true, 1), 10))
    return {
        "valid_next_R@20": float(np.concatenate(recall).mean()),
        "valid_next_NDCG@10": float(np.concatenate(ndcg).mean()),
    }


def masked_item_metrics(
    model: WorldModel,
    data: TrainingSet,
    rows: np.ndarray,
    popularity: np.ndarray,
    mask_rate: float = 0.2,
    seed: int = 0,
) -> dict[str, float]:
    ranks = masked_item_ranks(model, data, rows, popularity, mask_rate, seed)
    out = {f"valid_{k}": v for k, v in rank_metrics(torch.as_tensor(ranks["model"])).items()}
    out.update(
        {
            f"valid_popularity_{k}": v
            for k, v in rank_metrics(torch.as_tensor(ranks["popularity"])).items()
        }
    )
    return out


POPULARITY_CHUNK = 100_000  # samples a pass: the item index of all 3M baskets at ``large`` was
# a ~0.8 GB transient beside the trip store, the step's peak


def popularity_scores(data: TrainingSet, rows: np.ndarray) -> np.ndarray:
    """(V,) purchase counts of each token over the given (training) samples' baskets; specials 0.
    Ties are broken by a tiny token-order term so rankings are deterministic. Counted
    ``POPULARITY_CHUNK`` samples at a time (integer counts: the same in any grouping)."""
    counts = np.zeros(data.vocab.size, dtype=np.int64)
    for lo in range(0, len(rows), POPULARITY_CHUNK):
        chunk = rows[lo : lo + POPULARITY_CHUNK]
        starts, lengths = data.item_starts[chunk], data.item_counts[chunk]
        idx = np.repeat(starts, lengths) + (
            np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        )
        counts += np.bincount(data.item_tokens[idx], minlength=data.vocab.size)
    scores = counts.astype(np.float64)
    scores[[PAD, data.vocab.mask, data.vocab.eos]] = -1.0
    return scores - 1e-6 * np.arange(data.vocab.size) / data.vocab.size


def masked_item_metrics_of_weights(
    model: WorldModel,
    weights: dict[str, torch.Tensor],
    data: TrainingSet,
    rows: np.ndarray,
    popularity: np.ndarray,
    mask_rate: float,
    seed: int,
) -> dict[str, float]:
    """``masked_item_metrics`` of ``model`` with ``weights`` loaded; the model's own weights are
    restored. Training selects on next-basket NDCG@10 only, so the masked-item figures are taken
    once, for the weights it keeps (the figures their epoch would have had: same rows, masks)."""
    own = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(weights)
    try:
        return masked_item_metrics(model, data, rows, popularity, mask_rate, seed)
    finally:
        model.load_state_dict(own)

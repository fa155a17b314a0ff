"""How well the auxiliary heads' predicted distributions are calibrated (no mission given)."""

from __future__ import annotations

import numpy as np
import polars as pl
import torch

from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.models.world_model import AUX_HEADS, WorldModel


def aux_calibration(
    model: WorldModel, data: TrainingSet, rows: np.ndarray, chunk: int = 512
) -> pl.DataFrame:
    """Accuracy, majority-class accuracy and expected calibration error of each auxiliary head
    (no mission given), plus the reliability curve in 10 confidence bins. A source without the
    labels (The Complete Journey) gets empty bins without running the model."""
    labels = {
        name: torch.as_tensor(data.basket_labels[rows, col], dtype=torch.long) - 1
        for name, (col, _) in AUX_HEADS.items()
    }
    labelled = any(((y >= 0) & (y < AUX_HEADS[k][1])).any() for k, y in labels.items())
    probs = _aux_probs(model, data, rows, chunk) if labelled else None
    rows_out = []
    for name, (_, n) in AUX_HEADS.items():
        y = labels[name]
        p = probs[name] if probs is not None else torch.zeros(len(y), n)
        ok = (y >= 0) & (y < n)
        p, y = p[ok], y[ok]
        conf, pred = p.max(1)
        correct = (pred == y).double()
        bins = torch.clamp((conf * 10).long(), max=9)
        ece = (
            sum(
                float(
                    (bins == k).double().mean()
                    * (correct[bins == k].mean() - conf[bins == k].double().mean()).abs()
                )
                for k in range(10)
                if (bins == k).any()
            )
            if len(y)
            else None
        )  # no labelled basket: no figure
        majority = float(torch.bincount(y, minlength=n).max() / len(y)) if len(y) else None
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
    figures = ("confidence", "accuracy", "head_accuracy", "majority_accuracy", "ece")
    return pl.DataFrame(rows_out, schema_overrides=dict.fromkeys(figures, pl.Float64))


@torch.no_grad()
def _aux_probs(
    model: WorldModel, data: TrainingSet, rows: np.ndarray, chunk: int
) -> dict[str, torch.Tensor]:
    """(N, classes) each head's distribution at the next-basket query: the decoder's context
    token alone, so no vocabulary-wide slot is scored."""
    model.train(False)
    probs: dict[str, list] = {k: [] for k in AUX_HEADS}
    for i in range(0, len(rows), chunk):
        out = model.query_pass(data[rows[i : i + chunk]])
        for name in AUX_HEADS:
            probs[name].append(out.aux_logits[name].softmax(-1))
    return {k: torch.cat(v) for k, v in probs.items()}

"""How well the auxiliary heads' predicted distributions are calibrated (no mission given)."""

from __future__ import annotations

import numpy as np
import polars as pl
import torch

from retailsim_core.models.world_model import AUX_HEADS, WorldModel
from retailsim_core.training_data.tensors import TrainingSet


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
            for name, (col, _) in AUX_HEADS.items():
                probs[name].append(out.aux_logits[name].softmax(-1))
                labels[name].append(batch["basket_labels"][:, col] - 1)
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

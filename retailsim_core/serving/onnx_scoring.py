"""The next-basket scoring graph in ONNX: encoder, decoder, repeat/explore heads and the shelf
price response of ``WorldModel.next_basket``, from a serving batch to (B, V) log-probabilities.

What ONNX holds and what stays in PyTorch (decision D63):
- exported: everything between the batch tensors and the log-probabilities, with the Mamba
  scan in its sequential reference form (``selective_scan_ref``) unrolled over a fixed number
  of history trips H = ``max_history_trips`` (serving batches are padded to it; padded trips
  are masked, so the scores do not change). The batch (B), the flat history items and the
  customer's distinct history products (U) are dynamic axes.
- in PyTorch / NumPy: building the batch (``ServingData.batch``), basket simulation (a loop of
  slot draws with a seeded generator) and elasticities (autograd through the model).

Parity with PyTorch on real batches is tested (max abs difference <= 1e-4).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from retailsim_core.datasets.batch import Batch
from retailsim_core.models.world_model import WorldModel
from retailsim_core.storage.io import atomic_write
from retailsim_core.training.checkpoints.checkpoint import (
    MANIFEST,
    check_manifest,
    read_json,
    write_manifest,
)

GRAPH_FILE = "scoring.onnx"
PARITY_TOLERANCE = 1e-4  # max abs difference of log-probabilities from PyTorch

ONNX_INPUTS = (
    "history_context",
    "history_days_before",
    "history_items",
    "history_mask",
    "history_offsets",
    "repeat_products",
    "repeat_values",
    "season",
    "shelf",
    "history_alpha",
    "customer_codes",
    "customer_numeric",
    "calendar",
    "item_prices",
    "store_codes",
    "store_is_new",
    "store_numeric",
    "basket_labels",
)


class _NextBasket(torch.nn.Module):
    """``WorldModel.next_basket`` with positional inputs (ONNX graphs take a flat list)."""

    def __init__(self, model: WorldModel):
        super().__init__()
        self.model = model

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        _, log_p = self.model.next_basket(dict(zip(ONNX_INPUTS, inputs, strict=True)))
        return log_p  # (B, V)


def _dynamic_shapes() -> tuple:
    from torch.export import Dim

    batch, items, products = Dim("B", min=1, max=65_536), Dim("I"), Dim("U")
    per_row = {name: {0: batch} for name in ONNX_INPUTS}
    per_row |= {
        "history_items": {0: items},
        "history_offsets": {0: Dim.AUTO},
        "repeat_products": {0: batch, 1: products},
        "repeat_values": {0: batch, 1: products},
    }
    return (tuple(per_row[name] for name in ONNX_INPUTS),)


def export_onnx(model: WorldModel, batch: Batch, path: Path) -> Path:
    """Write the scoring graph of ``model`` to ``path`` (atomically). ``batch``: an example
    serving batch with history padded to ``max_history_trips`` trips."""
    previous = model.encoder.scan
    model.encoder.scan = "reference"  # a plain loop over trips: expressible in ONNX
    model.train(False)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                _NextBasket(model),
                tuple(batch[name] for name in ONNX_INPUTS),
                input_names=list(ONNX_INPUTS),
                output_names=["log_probs"],
                dynamo=True,
                dynamic_shapes=_dynamic_shapes(),
                # onnxruntime folds and fuses the graph when it loads it; onnxscript's rewrite
                # passes before the save were ~30% of the export and the export ran beside the
                # evaluation in `make demo` (D100).
                optimize=False,
                verbose=False,
            )
        atomic_write(path, lambda tmp: program.save(str(tmp)))
    finally:
        model.encoder.scan = previous
    return path


class OnnxScorer:
    """onnxruntime inference of an exported scoring graph (CPU)."""

    def __init__(self, path: Path, threads: int | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = tuple(i.name for i in self.session.get_inputs())

    def __call__(self, batch: Batch) -> torch.Tensor:
        """(B, V) log-probabilities, as ``WorldModel.next_basket`` returns them."""
        feed = {name: np.ascontiguousarray(batch[name].numpy()) for name in self.inputs}
        return torch.from_numpy(self.session.run(None, feed)[0])


def write_scoring_graph(folder: Path, model: WorldModel, batch: Batch, checkpoint_id: str) -> dict:
    """``folder``/scoring.onnx and its manifest: the graph's checksum and size (a reader serves
    it only when they match; D113), the checkpoint it was exported from, and the parity of the
    export on ``batch`` against PyTorch."""
    path = export_onnx(model, batch, folder / GRAPH_FILE)
    with torch.no_grad():
        _, expected = model.next_basket(batch)
    difference = float((OnnxScorer(path)(batch) - expected).abs().max())
    extra = {
        "exported_from": checkpoint_id,
        "max_abs_difference": difference,
        "example_contexts": int(batch["basket_labels"].shape[0]),
    }
    write_manifest(folder, (GRAPH_FILE,), extra)
    return read_json(folder / MANIFEST)


def scoring_graph_for(folder: Path, checkpoint_id: str) -> tuple[Path | None, str]:
    """(the exported graph of ``checkpoint_id``, "") when its manifest vouches for the file and
    names that checkpoint; else (None, why not)."""
    verdict = check_manifest(folder, (GRAPH_FILE,))
    if verdict.checkpoint_id is None:
        return None, f"{folder / GRAPH_FILE} is not trusted ({verdict.reason})"
    exported_from = read_json(folder / MANIFEST).get("exported_from")
    if exported_from != checkpoint_id:
        return None, f"{folder / GRAPH_FILE} was exported from {exported_from}, not {checkpoint_id}"
    return folder / GRAPH_FILE, ""

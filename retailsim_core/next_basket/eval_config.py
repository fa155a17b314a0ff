"""How the evaluation runs: sample counts, masking, slices, bootstrap and the baselines' grids."""

from __future__ import annotations

from dataclasses import dataclass, field

from retailsim_core.baselines.neighbour_baselines import TifuConfig, UpcfConfig
from retailsim_core.baselines.sequential import SequentialConfig


@dataclass(frozen=True)
class EvalConfig:
    max_test_samples: int | None = 6_000  # test baskets every method scores (None = all)
    # Also score every cold-start test basket outside that sample, for the cold-start slice only:
    # about 1% of baskets, too few in a sample to tell methods apart (D72).
    every_cold_start: bool = True
    max_valid_samples: int = 1_500  # validation baskets the baselines are tuned on
    mask_rate: float = 0.2  # share of a basket's products hidden in the masked-item task
    chunk: int = 512  # baskets scored per forward (fewer with a large vocabulary: chunk_for)
    # Most basket x product cells of a chunk: its dense matrices (the shelf alone is chunk x V x
    # 9 floats, then every method's scores and the metrics' masks) grow with the vocabulary, so
    # a chunk holds fewer baskets where V is large (The Complete Journey: 61,445 products).
    chunk_cells: int = 1 << 23
    # The same for a chunk differentiated (the price checks' Jacobians): its graph holds every
    # (chunk, V) activation of the forward until the backward passes end, about twice what a
    # forward holds at once (D126).
    grad_chunk_cells: int = 1 << 22
    seed: int = 0
    week_slices: tuple[tuple[int, int], ...] = ((96, 104), (105, 117))  # test-period slices
    bootstrap: int = 1_000  # customer-cluster resamples for the 95% intervals
    copurchase_weights: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)  # tuned on validation
    sequential: SequentialConfig = field(default_factory=SequentialConfig)
    tifu: TifuConfig = field(default_factory=TifuConfig)
    upcf: UpcfConfig = field(default_factory=UpcfConfig)

    def chunk_for(self, vocab_size: int) -> int:
        """Baskets per chunk over a vocabulary of ``vocab_size`` tokens: ``chunk``, or fewer so
        that a chunk's (baskets, V) matrices hold at most ``chunk_cells`` cells (16 at least)."""
        return min(self.chunk, max(16, self.chunk_cells // max(vocab_size, 1)))

    def grad_chunk_for(self, vocab_size: int) -> int:
        """Contexts per backward pass over ``vocab_size`` tokens (``grad_chunk_cells``)."""
        return min(self.chunk, max(16, self.grad_chunk_cells // max(vocab_size, 1)))

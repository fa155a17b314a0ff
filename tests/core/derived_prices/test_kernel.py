"""The compiled week fold against the NumPy reference: bitwise equal tables and states, and the
fallback when the kernel cannot be built."""

import shutil

import numpy as np
import pytest

from retailsim_core.derived_prices import PriceConfig
from retailsim_core.derived_prices import kernel as price_kernel
from retailsim_core.derived_prices.cells import advance
from retailsim_core.derived_prices.fold import fold_week_numpy
from retailsim_core.derived_prices.state import CellState
from tests.core.derived_prices.test_cells import observed_by_week, random_raw

needs_kernel = pytest.mark.skipif(
    shutil.which("cc") is None, reason="no C compiler on this machine"
)


def assert_states_equal(a: CellState, b: CellState) -> None:
    assert (a.week, a.head, a.n, a.slot.capacity) == (b.week, b.head, b.n, b.slot.capacity)
    for group_a, group_b in ((a.slot, b.slot), (a.product, b.product)):
        for name in group_a.arrays:  # the live entries (spare capacity is uninitialised)
            np.testing.assert_array_equal(group_a[name], group_b[name], err_msg=name)


# The default windows (26 = the whole ring) and short ones (the reference window a subset of
# the ring rows, the level-2 window leaving before it).
@needs_kernel
@pytest.mark.parametrize(
    "cfg",
    [
        PriceConfig(),
        PriceConfig(reference_window=6, store_mean_window=4, min_own_observations=2, max_cv=0.2),
    ],
)
def test_compiled_fold_is_bitwise_the_numpy_fold(cfg):
    weeks = range(1, 45)  # cells arrive every week, so the arrays grow and the ring stride changes
    raw = random_raw(3, len(weeks), products=12, stores=15, lines=40, regular_share=0.5)
    observed = observed_by_week(raw, weeks)
    compiled, numpy = CellState(cfg), CellState(cfg)
    for w in weeks:
        got = advance(compiled, observed[w], w, fold=price_kernel.fold_week_compiled)
        want = advance(numpy, observed[w], w, fold=fold_week_numpy)
        assert got.equals(want), w
        assert_states_equal(compiled, numpy)
    assert got["validation_flags"].n_unique() > 2 and got["imputation_method"].n_unique() == 4


@needs_kernel
def test_the_kernel_refuses_arrays_of_the_wrong_type():
    observed = observed_by_week(random_raw(4, 3), range(1, 4))
    state = CellState(PriceConfig())
    advance(state, observed[1], 1, fold=price_kernel.fold_week_compiled)
    state.slot.arrays["n_obs"] = state.slot.arrays["n_obs"].astype(
        np.int64
    )  # the kernel reads int32
    with pytest.raises(TypeError, match="n_obs must be a C-contiguous int32"):
        advance(state, observed[2], 2, fold=price_kernel.fold_week_compiled)


def test_falls_back_to_numpy_when_disabled(monkeypatch):
    observed = observed_by_week(random_raw(5, 4), range(1, 5))
    try:
        monkeypatch.setenv("RETAILSIM_COMPILED_PRICES", "0")
        price_kernel._library.cache_clear()
        assert not price_kernel.available()
        with pytest.raises(RuntimeError, match="not available"):
            advance(CellState(PriceConfig()), observed[1], 1, fold=price_kernel.fold_week_compiled)
        default, reference = CellState(PriceConfig()), CellState(PriceConfig())
        for w in range(1, 5):  # the default fold is the reference
            assert advance(default, observed[w], w).equals(
                advance(reference, observed[w], w, fold=fold_week_numpy)
            )
    finally:
        monkeypatch.undo()
        price_kernel._library.cache_clear()

"""The week fold compiled (D50): :func:`fold_week_compiled` runs the steps of the NumPy
reference (``fold.py``), in the same order of floating-point operations, as four loops in C
(``price_week.c``), so its results are bitwise equal (tested). It is built on first use
(``native.load``); without a compiler, or with ``RETAILSIM_COMPILED_PRICES=0``,
:func:`fold_week` uses the reference.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from retailsim_core import native
from retailsim_core.derived_prices import BASE_WINDOW, VALIDATION_FLAG_BITS
from retailsim_core.derived_prices.fold import COLUMNS, WeekInput, fold_week_numpy
from retailsim_core.derived_prices.state import CellState

SOURCE = Path(__file__).parent / "price_week.c"
# No -ffast-math: NaN tests and fmax's NaN rule are the semantics; no fused multiply-adds, so
# every product and sum rounds as NumPy's does. -fno-trapping-math only lets the compiler
# evaluate both sides of a select (FP exceptions are masked anyway), so the loops vectorise.
COMPILE_FLAGS = (
    "-O3",
    "-march=native",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-fPIC",
)
LINK_FLAGS = ("-shared", "-lm")
_C_FLAG_ORDER = (
    "price_nonpositive",
    "price_over_max",
    "depth_over_max",
    "base_price_decrease",
    "low_coverage",
    "high_volatility",
)  # the enum in price_week.c
assert [VALIDATION_FLAG_BITS[name] for name in _C_FLAG_ORDER] == [1, 2, 4, 8, 16, 32]
assert BASE_WINDOW - 1 == 3  # price_week.c reads the three last-price rows by name


_I64, _F64, _PTR = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
_SCALARS = (
    ("n", _I64),
    ("stride", _I64),
    ("k", _I64),
    ("week", _I64),
    ("n_products", _I64),
    ("this_row", _I64),
    ("own_leave_row", _I64),
    ("l2_leave_row", _I64),
    ("new_head", _I64),
    ("n_own_rows", _I64),
    ("min_own", _I64),
    ("promo_threshold", _F64),
    ("max_price", _F64),
    ("max_depth", _F64),
    ("max_missing_share", _F64),
    ("max_cv", _F64),
)
# The pointer fields of price_week.c's PriceWeek, in order, with the dtype each must have.
_POINTERS = (
    ("own_rows", np.int64),
    ("obs_slot", np.int64),
    ("obs_price", np.float64),
    ("obs_lines", np.uint32),
    ("obs_units", np.int64),
    ("regular", np.float64),
    ("history", np.float64),
    ("prev_price", np.float64),
    ("prev_base", np.float64),
    ("price_sum", np.float64),
    ("price_sumsq", np.float64),
    ("own_n", np.int32),
    ("l2_n", np.int32),
    ("l2_sum", np.int64),
    ("n_obs", np.int32),
    ("first_week", np.int16),
    ("product", np.int64),
    ("zone", np.int64),
    ("product_region", np.int64),
    ("product_first_week", np.int16),
    ("product_obs_weeks", np.int32),
    ("l3", np.float64),
    ("l4_sum", np.float64),
    ("l4_count", np.float64),
    ("zone_max", np.float64),
    ("actual", np.float64),
    ("base", np.float64),
    ("reference", np.float64),
    ("depth", np.float64),
    ("base_depth", np.float64),
    ("quality", np.float64),
    ("observed_price", np.float64),
    ("missing_share", np.float64),
    ("cv", np.float64),
    ("price_sum_out", np.float64),
    ("price_sumsq_out", np.float64),
    ("promo", np.bool_),
    ("flags", np.uint8),
    ("method", np.uint8),
    ("first_week_out", np.int16),
    ("product_first_week_out", np.int16),
    ("n_obs_out", np.int32),
    ("product_obs_weeks_out", np.int32),
    ("lines", np.uint32),
    ("units", np.int64),
)
_OUTPUT_FIELD = {
    "actual_price": "actual",
    "base_price": "base",
    "reference_price": "reference",
    "discount_depth": "depth",
    "base_discount_depth": "base_depth",
    "quality_score": "quality",
    "price_cv": "cv",
    "price_sum_to_date": "price_sum_out",
    "price_sumsq_to_date": "price_sumsq_out",
    "promo_flag": "promo",
    "validation_flags": "flags",
    "first_week": "first_week_out",
    "product_first_week": "product_first_week_out",
    "n_obs_to_date": "n_obs_out",
    "product_obs_weeks": "product_obs_weeks_out",
    "n_lines": "lines",
}


class _PriceWeek(ctypes.Structure):
    _fields_ = [*_SCALARS, *((name, _PTR) for name, _ in _POINTERS)]


@functools.cache
def _library() -> ctypes.CDLL | None:
    lib = native.load(SOURCE, "compiled_prices", COMPILE_FLAGS, LINK_FLAGS)
    if lib is not None:
        lib.rs_price_week.argtypes = [ctypes.POINTER(_PriceWeek)]
        lib.rs_price_week.restype = None
        lib.rs_price_week_struct_size.restype = ctypes.c_int64
        if lib.rs_price_week_struct_size() != ctypes.sizeof(
            _PriceWeek
        ):  # the kernel reads raw fields
            raise RuntimeError("price_week.c's PriceWeek and prices.kernel._PriceWeek differ")
    return lib


def available() -> bool:
    return _library() is not None


def fold_week_compiled(state: CellState, week: int, obs: WeekInput) -> dict[str, np.ndarray]:
    """:func:`fold_week_numpy` as the four loops of ``price_week.c``; needs
    :func:`available`.
    """
    lib = _library()
    if lib is None:
        raise RuntimeError(
            "the compiled price kernel is not available here (see prices.kernel.available)"
        )
    cfg, h, n = state.cfg, state.cfg.history_weeks, state.n
    full = state.slot.arrays  # whole-capacity arrays: the ring rows are `stride` apart
    columns = {name: np.empty(n, dtype) for name, dtype in COLUMNS}
    arrays = {
        "own_rows": np.array([(week - k) % h for k in range(cfg.reference_window)], np.int64),
        "obs_slot": obs.slots,
        "obs_price": obs.price,
        "obs_lines": obs.n_lines,
        "obs_units": obs.units,
        "regular": _per_slot(obs.slots, obs.regular, n),
        "l3": obs.region_mean,
        "product_first_week": state.product["first_week"],
        "product_obs_weeks": state.product["obs_weeks"],
        "l4_sum": np.zeros(state.products.size),
        "l4_count": np.zeros(state.products.size),
        "zone_max": np.full(state.zones.size, np.nan),
        **{
            name: full[name]
            for name in (
                "history",
                "prev_price",
                "prev_base",
                "price_sum",
                "price_sumsq",
                "own_n",
                "l2_n",
                "l2_sum",
                "n_obs",
                "first_week",
                "product",
                "zone",
                "product_region",
            )
        },
        **{_OUTPUT_FIELD.get(name, name): column for name, column in columns.items()},
    }
    week_args = _PriceWeek(
        n=n,
        stride=state.slot.capacity,
        k=obs.slots.size,
        week=week,
        n_products=state.products.size,
        this_row=week % h,
        own_leave_row=(week - cfg.reference_window) % h,
        l2_leave_row=(week - cfg.store_mean_window) % h,
        new_head=obs.new_head,
        n_own_rows=cfg.reference_window,
        min_own=cfg.min_own_observations,
        promo_threshold=cfg.promo_threshold,
        max_price=cfg.max_price,
        max_depth=cfg.max_depth,
        max_missing_share=cfg.max_missing_share,
        max_cv=cfg.max_cv,
        **{name: _address(arrays[name], dtype, name) for name, dtype in _POINTERS},
    )
    lib.rs_price_week(ctypes.byref(week_args))
    return columns


def _per_slot(slots: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """(n,) ``values`` at ``slots``, NaN elsewhere: the kernel's cell loop reads by slot."""
    out = np.full(n, np.nan)
    out[slots] = values
    return out


def _address(array: np.ndarray, dtype, name: str) -> int:
    """The data address of a C-contiguous array of ``dtype``: the kernel reads raw pointers."""
    if array.dtype != dtype or not array.flags.c_contiguous:
        raise TypeError(
            f"price kernel: {name} must be a C-contiguous {np.dtype(dtype)} array, "
            f"got {array.dtype} {'' if array.flags.c_contiguous else 'non-contiguous'}"
        )
    return array.ctypes.data


def fold_week(state: CellState, week: int, obs: WeekInput) -> dict[str, np.ndarray]:
    """The compiled path where it is available, else the reference."""
    return (fold_week_compiled if available() else fold_week_numpy)(state, week, obs)

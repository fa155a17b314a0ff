"""Every ``RETAILSIM_*`` environment setting, and the check a run makes before any work.

A misspelt variable (``RETAILSIM_RAW_DIRS``) or a setting with an impossible value used to be
ignored, and the run went on with a default for minutes before failing somewhere else. Runs
now call :func:`check_environment` first (the Dagster resources do at set-up) and fail naming
the variable. ``docs/operations.md`` lists the same settings.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path

from retailsim_core.calendar import N_WEEKS

# name -> (what it sets, default). One place: the check and the docs table read it.
SETTINGS: dict[str, tuple[str, str]] = {
    "RETAILSIM_RAW_DIR": ("folder of LGSR week files", "data/raw"),
    "RETAILSIM_WAREHOUSE_DIR": ("root of the Parquet warehouse", "data/warehouse"),
    "RETAILSIM_TRUTH_DIR": (
        "the generator's planted truth; empty for real data",
        "data/ground_truth",
    ),
    "RETAILSIM_TRAIN_END": ("last training week", "the split's, 80"),
    "RETAILSIM_VALID_END": ("last validation week (test weeks follow)", "the split's, 95"),
    "RETAILSIM_COMPILED_SCAN": ("0 turns the compiled selective scan off", "1"),
    "RETAILSIM_COMPILED_PRICES": ("0 turns the compiled price fold off", "1"),
    "RETAILSIM_KERNEL_CACHE": ("folder of compiled kernels", "~/.cache/retailsim/kernels"),
    "RETAILSIM_SERVE_HOST": ("address the serving app binds", "127.0.0.1"),
    "RETAILSIM_SERVE_PORT": ("port of the serving app", "8000"),
    "RETAILSIM_SERVE_ONNX": ("1 scores next baskets with onnxruntime", "0"),
    "RETAILSIM_SERVE_MAX_K": ("most products one recommendation returns", "200"),
    "RETAILSIM_SERVE_MAX_BATCH": ("most contexts in one batch request", "5000"),
    "RETAILSIM_SERVE_MAX_BODY_BYTES": ("largest request body", "4000000"),
    "RETAILSIM_SERVE_MAX_SIMULATIONS": ("most baskets one simulation draws", "200"),
    "RETAILSIM_SERVE_MAX_PRODUCTS": ("most products of one elasticity request", "50"),
    "RETAILSIM_SERVE_RELOAD_SECONDS": ("how often the app looks for a new checkpoint", "10"),
    "RETAILSIM_SERVE_THREADS": (
        "PyTorch threads of the serving app (1 leaves a core to HTTP)",
        "1",
    ),
}
SWITCHES = ("RETAILSIM_COMPILED_SCAN", "RETAILSIM_COMPILED_PRICES", "RETAILSIM_SERVE_ONNX")
COUNTS = tuple(
    name
    for name in SETTINGS
    if name.startswith("RETAILSIM_SERVE_")
    and name not in SWITCHES
    and name != "RETAILSIM_SERVE_HOST"
)


class SettingsError(ValueError):
    """A setting that cannot be right; the message names it."""


def week_setting(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """A week-number setting (1..N_WEEKS), ``default`` when unset."""
    raw = (os.environ if environ is None else environ).get(name) or str(default)
    try:
        week = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a week number (1..{N_WEEKS})") from None
    if not 1 <= week <= N_WEEKS:
        raise SettingsError(f"{name}={week} is outside the calendar (1..{N_WEEKS})")
    return week


def count_setting(name: str, environ: Mapping[str, str] | None = None) -> int:
    """A positive whole-number setting (its default from ``SETTINGS`` when unset)."""
    raw = (os.environ if environ is None else environ).get(name) or SETTINGS[name][1]
    if not raw.isdigit() or int(raw) < 1:
        raise SettingsError(f"{name}={raw!r}: use a whole number of at least 1")
    return int(raw)


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`SettingsError` for an unknown ``RETAILSIM_*`` variable or a value that
    cannot be right; a folder that must exist is checked where it is used."""
    env = os.environ if environ is None else environ
    for name in sorted(k for k in env if k.startswith("RETAILSIM_")):
        if name not in SETTINGS:
            known = {k.removeprefix("RETAILSIM_"): k for k in SETTINGS}
            close = difflib.get_close_matches(name.removeprefix("RETAILSIM_"), known, n=1)
            hint = (
                f"; did you mean {known[close[0]]}?" if close else f"; known: {', '.join(SETTINGS)}"
            )
            raise SettingsError(f"unknown setting {name}{hint}")
    from retailsim_core.split import default_split  # split reads its weeks through this module

    try:
        default_split(env)
    except SettingsError:
        raise
    except ValueError as err:
        raise SettingsError(f"RETAILSIM_TRAIN_END / RETAILSIM_VALID_END: {err}") from None
    for name in SWITCHES:
        if env.get(name, "1") not in ("0", "1"):
            raise SettingsError(f"{name}={env[name]!r}: use 0 (off) or 1 (on)")
    for name in COUNTS:
        count_setting(name, env)
    truth = env.get("RETAILSIM_TRUTH_DIR")
    if truth and not Path(truth).is_dir():
        raise SettingsError(
            f"RETAILSIM_TRUTH_DIR={truth}: no such folder (set it empty for real "
            "data, which has no planted truth)"
        )
    root = env.get("RETAILSIM_WAREHOUSE_DIR")
    if root and Path(root).exists() and not Path(root).is_dir():
        raise SettingsError(f"RETAILSIM_WAREHOUSE_DIR={root} is a file, not a folder")

"""Every ``RETAILSIM_*`` environment setting, typed, in one place (pydantic-settings).

:class:`Settings` is the only reader of ``RETAILSIM_*`` variables; everything else asks
:func:`load_settings`. A misspelt variable (``RETAILSIM_RAW_DIRS``) or an impossible value used
to be ignored, and the run went on with a default for minutes before failing somewhere else:
:func:`check_environment` (which every Dagster resource and the serving app call first) fails
naming the variable. ``docs/operations.md`` lists the same settings; a test keeps them equal.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from retailsim_core.calendar import CALENDARS, N_WEEKS, SourceCalendar
from retailsim_core.split import TemporalSplit

PREFIX = "RETAILSIM_"
PROJECT_ROOT = Path(__file__).resolve().parents[1]  # the checkout (editable install)
WEEKS = ("train_end", "valid_end")
SWITCHES = ("compiled_scan", "compiled_prices", "compiled_pairs", "serve_onnx")
COUNTS = (
    "settle_seconds",
    "max_week_file_mib",
    "serve_port",
    "serve_max_k",
    "serve_max_batch",
    "serve_max_body_bytes",
    "serve_max_simulations",
    "serve_max_products",
    "serve_reload_seconds",
    "serve_threads",
    "serve_max_concurrent",
    "serve_max_queued",
    "sequential_seconds",
)

# Upper bounds (decision D77): past them a value is a typo or would break what reads it (a port
# beyond 65535 wraps, a reload interval beyond a timer's range kills the reload thread).
COUNT_LIMITS = {
    "settle_seconds": 3_600,
    "max_week_file_mib": 65_536,
    "serve_port": 65_535,
    "serve_reload_seconds": 86_400,  # a day
    "serve_threads": 256,
    "serve_max_body_bytes": 1 << 30,  # 1 GiB
    "serve_max_concurrent": 256,
    "serve_max_queued": 10_000,
    "sequential_seconds": 86_400,  # a day
}
HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


def _setting(default: Any, sets: str, shown: str | None = None) -> Any:
    """A field with what it sets and its default as the docs show it."""
    return Field(default, description=sets, json_schema_extra={"shown": shown or str(default)})


class SettingsError(ValueError):
    """A setting that cannot be right; the message names it."""


class Settings(BaseSettings):
    """The project's environment settings; field ``x`` is the variable ``RETAILSIM_X``."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, frozen=True)

    raw_dir: Path = _setting(PROJECT_ROOT / "data/raw", "folder of LGSR week files", "data/raw")
    warehouse_dir: Path = _setting(
        PROJECT_ROOT / "data/warehouse", "root of the Parquet warehouse", "data/warehouse"
    )
    # A string, not a path: empty means "no planted truth" (real data), unset the default.
    truth_dir: str = _setting(
        str(PROJECT_ROOT / "data/ground_truth"),
        "the generator's planted truth (oracles, planted-truth checks); empty for real data",
        "data/ground_truth",
    )
    settle_seconds: int = _setting(
        2, "a week file is read once unchanged this long; the sensor waits as long (D83)"
    )
    max_week_file_mib: int = _setting(
        1024, "most text (decompressed) of one week file; bounds ingestion memory (D83)"
    )
    source: str = _setting(
        "lgsr",
        "the data: lgsr (LGSR week files) or completejourney (The Complete Journey's tables; D85)",
    )
    # None: the source's default split (LGSR 80 / 95 of 117, The Complete Journey 36 / 43 of 53).
    train_end: int | None = _setting(None, "last training week", "80 (LGSR), 36 (Complete Journey)")
    valid_end: int | None = _setting(
        None, "last validation week; test weeks follow", "95 (LGSR), 43 (Complete Journey)"
    )
    # The world model's training budget (the small preset's 600 s): a baseline stopped after a
    # minute was below popularity on both real sources, and above it with this (D123).
    sequential_seconds: int = _setting(
        600,
        "seconds each of SASRec and BERT4Rec may train, the world model's budget; an epoch "
        "starts only within it, and after the first 10 epochs, 3 without a better validation "
        "R@20 end it first",
    )
    compiled_scan: bool = _setting(
        True, "0 runs the PyTorch selective scan instead of the compiled one", "1"
    )
    compiled_prices: bool = _setting(
        True, "0 runs the reference price fold instead of the compiled one", "1"
    )
    compiled_pairs: bool = _setting(
        True, "0 runs GraphSAGE's pair products with PyTorch's gathers, not the compiled ones", "1"
    )
    kernel_cache: Path | None = _setting(
        None, "folder of compiled kernels", "~/.cache/retailsim/kernels"
    )
    serve_host: str = _setting("127.0.0.1", "address the serving app (`make serve`) binds")
    serve_port: int = _setting(8000, "port of the serving app")
    serve_onnx: bool = _setting(
        False,
        "1 scores next baskets with onnxruntime (needs `onnx_scoring_graph` of the served "
        "checkpoint)",
        "0",
    )
    serve_max_k: int = _setting(200, "most products one recommendation returns")
    serve_max_batch: int = _setting(5000, "most contexts in one batch request (413 above)")
    serve_max_body_bytes: int = _setting(4_000_000, "largest request body (413 above)")
    serve_max_simulations: int = _setting(200, "most baskets one simulation draws")
    serve_max_products: int = _setting(50, "most products of one elasticity request")
    serve_reload_seconds: int = _setting(
        10, "how often the app looks for a newer published checkpoint"
    )
    serve_threads: int = _setting(1, "PyTorch threads of the serving app (D64)")
    serve_max_concurrent: int = _setting(
        2, "simulations, elasticities and batches computed at once (D82)"
    )
    serve_max_queued: int = _setting(
        16, "such requests waiting for a slot; past it 503 with Retry-After (D82)"
    )

    @field_validator(*WEEKS, mode="before")
    @classmethod
    def _week(cls, raw: Any, info: ValidationInfo) -> int | None:
        if raw == "" or raw is None:
            return None
        try:
            week = int(raw)
        except ValueError:
            raise ValueError(f"not a week number (1..{N_WEEKS})") from None
        if not 1 <= week <= N_WEEKS:
            raise ValueError(f"outside the calendar (1..{N_WEEKS})")
        return week

    @field_validator(*SWITCHES, mode="before")
    @classmethod
    def _switch(cls, raw: Any) -> bool:
        if isinstance(raw, bool) or raw in ("0", "1"):
            return bool(int(raw))
        raise ValueError("use 0 (off) or 1 (on)")

    @field_validator(*COUNTS, mode="before")
    @classmethod
    def _count(cls, raw: Any, info: ValidationInfo) -> int:
        if raw == "":
            return cls.model_fields[info.field_name].default
        top = COUNT_LIMITS.get(info.field_name)
        digits = isinstance(raw, str) and raw.isascii() and raw.isdigit()  # no Unicode digits
        if (isinstance(raw, int) and not isinstance(raw, bool)) or digits:
            if 1 <= int(raw) <= (top or int(raw)):
                return int(raw)
        bound = f"1..{top:,}" if top else "at least 1"
        raise ValueError(f"use a whole number in {bound} (ASCII digits)")

    @field_validator("raw_dir", "warehouse_dir", mode="before")
    @classmethod
    def _folder(cls, raw: Any) -> Any:
        if isinstance(raw, str) and not raw.strip():
            raise ValueError("empty: name a folder, or unset the variable for the default")
        return raw

    @field_validator("serve_host", mode="before")
    @classmethod
    def _host(cls, raw: Any) -> Any:
        """Empty is refused (uvicorn would listen on every address); anything else must be an
        IP address or a host name."""
        if not isinstance(raw, str) or not raw.strip():
            raise ValueError("empty: use 127.0.0.1 (loopback, the default) or an address")
        try:
            ipaddress.ip_address(raw)
        except ValueError:
            if not HOSTNAME.fullmatch(raw):
                raise ValueError("not an IP address or a host name") from None
        return raw

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, raw: Any) -> Any:
        if raw not in CALENDARS:
            raise ValueError(f"not a source; use one of {', '.join(CALENDARS)}")
        return raw

    @field_validator("kernel_cache", mode="before")
    @classmethod
    def _unset_when_empty(cls, raw: Any) -> Any:
        return raw or None

    @model_validator(mode="after")
    def _split_is_ordered(self) -> Settings:
        _ = self.split  # raises on train_end >= valid_end
        return self

    @property
    def calendar(self) -> SourceCalendar:
        """The weeks of the source (``RETAILSIM_SOURCE``)."""
        return CALENDARS[self.source]

    @property
    def split(self) -> TemporalSplit:
        """The split: the weeks set, else the source's default ones, within its calendar."""
        cal = self.calendar
        train = cal.train_end if self.train_end is None else self.train_end
        valid = cal.valid_end if self.valid_end is None else self.valid_end
        try:
            return TemporalSplit(train, valid, cal.n_weeks)
        except ValueError as err:
            raise ValueError(f"{PREFIX}TRAIN_END / {PREFIX}VALID_END: {err}") from None

    @property
    def truth(self) -> Path | None:
        """The planted-truth folder, None when set empty (real data)."""
        return Path(self.truth_dir) if self.truth_dir else None

    @property
    def kernel_folder(self) -> Path:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        return self.kernel_cache or Path(cache) / "retailsim" / "kernels"


def source_calendar(environ: Mapping[str, str] | None = None) -> SourceCalendar:
    """The calendar of ``RETAILSIM_SOURCE`` alone: Dagster builds its weekly partitions when the
    definitions load, before the other settings are checked (at resource setup), so one bad
    setting elsewhere does not stop the definitions from loading."""
    env = os.environ if environ is None else environ
    source = _given(env).get("source") or Settings.model_fields["source"].default
    if source not in CALENDARS:
        raise SettingsError(
            f"{variable('source')}={source!r}: not a source; use one of {', '.join(CALENDARS)}"
        )
    return CALENDARS[source]


def variable(field: str) -> str:
    return PREFIX + field.upper()


def documented() -> Iterator[tuple[str, str, str]]:
    """(variable, what it sets, default as shown) of every setting, in declaration order."""
    for name, info in Settings.model_fields.items():
        yield variable(name), info.description or "", info.json_schema_extra["shown"]


def _unknown_variables(env: Mapping[str, str]) -> None:
    known = {variable(name): name for name in Settings.model_fields}
    bare = {k.removeprefix(PREFIX): k for k in known}
    # Names are read in any letter case, as pydantic-settings reads the process environment.
    for name in sorted(k for k in env if k.upper().startswith(PREFIX) and k.upper() not in known):
        close = difflib.get_close_matches(name.upper().removeprefix(PREFIX), bare, n=1)
        hint = f"; did you mean {bare[close[0]]}?" if close else f"; known: {', '.join(known)}"
        raise SettingsError(f"unknown setting {name}{hint}")


def _given(env: Mapping[str, str]) -> dict[str, str]:
    """field -> value of every ``RETAILSIM_*`` variable of ``env``, its name in any letter case:
    the one reading of the environment that every setting goes through (D113), so the
    partitions' calendar and the run's settings can never read two sources. One setting given
    twice with different values (``RETAILSIM_SOURCE`` and ``retailsim_source``) is refused."""
    out: dict[str, str] = {}
    names: dict[str, str] = {}
    for name, value in sorted(env.items()):
        if not name.upper().startswith(PREFIX):
            continue
        field = name.upper().removeprefix(PREFIX).lower()
        if field in out and out[field] != value:
            raise SettingsError(
                f"{names[field]}={out[field]!r} and {name}={value!r}: one setting given twice "
                "(names are read in any letter case); unset one"
            )
        out[field], names[field] = value, name
    return out


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of ``environ`` (default: the process environment), validated; a bad value
    raises :class:`SettingsError` naming its variable. Unknown variables are not checked here
    (see :func:`check_environment`)."""
    given = _given(os.environ if environ is None else environ)
    try:
        return Settings.model_validate(
            {k: v for k, v in given.items() if k in Settings.model_fields}
        )
    except ValidationError as err:
        first = err.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        if not first["loc"]:  # the split, checked across fields, names both variables
            raise SettingsError(message) from None
        name = variable(str(first["loc"][0]))
        raise SettingsError(f"{name}={first['input']!r}: {message}") from None


def check_environment(environ: Mapping[str, str] | None = None) -> Settings:
    """Raise :class:`SettingsError` for an unknown ``RETAILSIM_*`` variable, a value that cannot
    be right or a folder setting that names no folder; else the settings.

    Folders are checked here, at the start of a run, and only when the variable is set: the
    defaults (``data/ground_truth`` …) may not exist yet, and code that only reads a setting
    (a kernel's switch) must not fail on a folder it never uses."""
    env = os.environ if environ is None else environ
    _unknown_variables(env)
    settings = load_settings(environ)
    truth = env.get(f"{PREFIX}TRUTH_DIR")
    if truth and not Path(truth).is_dir():
        raise SettingsError(
            f"{PREFIX}TRUTH_DIR={truth!r}: no such folder (set it empty for real data, which "
            "has no planted truth)"
        )
    root = env.get(f"{PREFIX}WAREHOUSE_DIR")
    if root and Path(root).exists() and not Path(root).is_dir():
        raise SettingsError(f"{PREFIX}WAREHOUSE_DIR={root!r}: a file, not a folder")
    return settings

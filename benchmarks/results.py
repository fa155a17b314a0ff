"""The one machine-written place of the project's measured figures: ``benchmarks/results/*.json``.

A benchmark script run with ``--record`` writes its area's file through :func:`record`; the
tables of ``docs/benchmarks.md`` and the dataset pages are generated from these files by
``benchmarks/docs_tables.py`` (a test fails when a page and a file disagree), so a figure is
written once, by the script that measured it, with the commit, date and machine it came from.

A file holds one area: ``{"area", "title", "command", "measured": {"commit", "date",
"machine"}, "tables": {name: {"columns": [...], "rows": [[...], ...], "formats": {...}}}}``.
Cells are numbers (formatted by the column's ``formats`` entry when rendered), text, or null.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RECORDS = "benchmarks/results"  # the records' folder in the checkout


def table(columns: list[str], rows: list[list], formats: dict[str, str] | None = None) -> dict:
    """One table of an area: ``formats`` maps a column to a format spec (``".4f"``, ``",.0f"``)."""
    width = len(columns)
    bad = [r for r in rows if len(r) != width]
    if bad:
        raise ValueError(f"{len(bad)} rows do not have the {width} columns {columns}: {bad[0]}")
    unknown = set(formats or {}) - set(columns)
    if unknown:
        raise ValueError(f"formats name columns the table lacks: {sorted(unknown)}")
    return {"columns": list(columns), "rows": [list(r) for r in rows], "formats": formats or {}}


def machine() -> str:
    """The machine in the words the docs use: cores and memory (what moves the figures)."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        memory = ""
    return f"{os.cpu_count()} cores{memory}"


def commit(repo: Path = RESULTS_DIR.parent.parent) -> str:
    """The checkout's short commit, ``+`` when it has uncommitted changes (other records do
    not count: two benchmarks run side by side would mark each other's)."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", f":(exclude){RECORDS}"],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (head or "unknown") + ("+" if dirty else "")


def measured_now(at_commit: str | None = None) -> dict:
    """Where a figure comes from: the commit (this checkout's unless the measured artifacts
    were made at another), today's date (UTC) and this machine."""
    return {
        "commit": at_commit or commit(),
        "date": dt.datetime.now(dt.timezone.utc).date().isoformat(),
        "machine": machine(),
    }


def record(
    area: str,
    *,
    title: str,
    command: str,
    tables: dict[str, dict],
    results_dir: Path = RESULTS_DIR,
    measured: dict | None = None,
) -> Path:
    """Write ``<results_dir>/<area>.json`` atomically (a temporary file renamed over it), keys
    sorted so the same figures give the same bytes; ``measured`` defaults to this checkout's
    commit, today's date (UTC) and this machine."""
    doc = {
        "area": area,
        "title": title,
        "command": command,
        "measured": measured or measured_now(),
        "tables": tables,
    }
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{area}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def load(results_dir: Path = RESULTS_DIR) -> dict[str, dict]:
    """Every area's file, by area; a file whose ``area`` is not its name is an error."""
    out = {}
    for path in sorted(results_dir.glob("*.json")):
        doc = json.loads(path.read_text())
        if doc.get("area") != path.stem:
            raise ValueError(f"{path}: area {doc.get('area')!r} is not the file's name")
        out[path.stem] = doc
    return out

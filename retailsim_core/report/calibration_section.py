"""The report's section on the auxiliary heads' calibration (where the source has their
labels): accuracy, majority class and ECE per head, and a reliability curve each."""

from __future__ import annotations

import html

import polars as pl


def _num(value: float | None) -> str:
    """A figure to 3 decimals; "—" for a head without labels (no samples: None or NaN)."""
    return "—" if value is None or value != value else f"{value:.3f}"


def calibration_section(calibration: pl.DataFrame) -> list[str]:
    """The auxiliary heads' calibration, where the source has their labels (none: no section)."""
    if calibration.is_empty() or calibration["head_accuracy"].drop_nans().drop_nulls().is_empty():
        return []
    return ["<h2>Auxiliary heads (no mission given): calibration</h2>", _reliability(calibration)]


def _reliability(calibration: pl.DataFrame) -> str:
    svgs = []
    for (head,), part in calibration.filter(pl.col("samples") > 0).group_by(
        "head", maintain_order=True
    ):
        pts = " ".join(
            f"{20 + 160 * c:.1f},{180 - 160 * a:.1f}"
            for c, a in zip(part["confidence"], part["accuracy"], strict=True)
        )
        svgs.append(
            f"<svg xmlns='http://www.w3.org/2000/svg' width='200' height='210'>"
            f"<text x='4' y='14' font-size='12'>{html.escape(head)}</text>"
            f"<line x1='20' y1='180' x2='180' y2='20' stroke='#bbb' stroke-dasharray='4'/>"
            f"<polyline fill='none' stroke='#4f43dd' stroke-width='2' points='{pts}'/>"
            f"<text x='20' y='200' font-size='10'>confidence → accuracy</text></svg>"
        )
    summary = calibration.group_by("head", maintain_order=True).agg(
        pl.col("head_accuracy", "majority_accuracy", "ece").first()
    )
    rows = "".join(
        f"<tr><th>{h}</th><td>{_num(a)}</td><td>{_num(m)}</td><td>{_num(e)}</td></tr>"
        for h, a, m, e in summary.iter_rows()
    )
    return (
        "<table><tr><th>head</th><th>accuracy</th><th>majority class</th><th>ECE</th></tr>"
        + rows
        + "</table>"
        + "".join(svgs)
    )

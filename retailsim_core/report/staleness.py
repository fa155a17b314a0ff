"""The staleness curve (D111): next-basket R@20 test week by test week, the frozen checkpoint
beside the model refreshed with every week before the predicted one and the strongest counting
baselines, which read every earlier week too."""

from __future__ import annotations

import html

STALENESS_METHODS = ("world_model", "world_model (refreshed)", "TIFU-KNN", "P-TopFreq")


def staleness_rows(next_basket: dict, train_end: int | None, counts: dict) -> list[list]:
    """[week, weeks after the training weeks, baskets, R@20 of each method present] per test
    week slice (``week_<W>``; ``counts``: baskets by slice), in week order."""
    weeks = sorted(int(s.split("_", 1)[1]) for s in next_basket if s.startswith("week_"))
    rows = []
    for week in weeks:
        by = next_basket[f"week_{week}"]
        shown = [m for m in STALENESS_METHODS if m in by]
        n = counts.get(f"week_{week}")
        ahead = None if train_end is None else week - train_end
        rows.append([week, ahead, n] + [by[m]["R@20"] for m in shown])
    return rows


def staleness_section(next_basket: dict, train_end: int | None, counts: dict) -> list[str]:
    """The section's HTML (none without week slices)."""
    rows = staleness_rows(next_basket, train_end, counts)
    if not rows:
        return []
    first = next_basket[f"week_{rows[0][0]}"]
    shown = [m for m in STALENESS_METHODS if m in first]
    head = ["test week", "weeks after training", "baskets", *(f"{m} R@20" for m in shown)]
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return [
        "<h2>Staleness: each test week</h2>",
        "<p>The trained checkpoint stops at its training weeks; the refreshed model of week W "
        "has read every week before W (model_refresh), as the counting baselines have.</p>",
        "<table><tr>"
        + "".join(f"<th>{html.escape(h)}</th>" for h in head)
        + "</tr>"
        + body
        + "</table>",
    ]


def _cell(value) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if isinstance(value, float) else html.escape(str(value))

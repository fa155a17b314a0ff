"""A self-contained HTML report (inline CSS and SVG, no scripts or downloads) and its Markdown
summary: what each method sees, tables and plots of metric by method (with 95% customer
bootstrap intervals), by test-week slice and by history bucket, the verdict in plain words
(every honest baseline, and the conditional row against its own baseline), simulated basket
sizes against real ones, and the calibration of the auxiliary heads."""

from __future__ import annotations

import html

import polars as pl

from retailsim_core.next_basket.methods import REFRESHED
from retailsim_core.report.calibration_section import calibration_section
from retailsim_core.report.intro import intro
from retailsim_core.report.price_sections import price_sections
from retailsim_core.report.staleness import staleness_section
from retailsim_core.report.svg_charts import bars
from retailsim_core.report.verdict import (
    CEILINGS,
    CONDITIONAL,
    headline_slice,
    verdict_notes,
    verdict_rows,
    verdict_table,
)

METHOD_ORDER = (
    "world_model",
    REFRESHED,
    "P-TopFreq",
    "GP-TopFreq",
    "Store-P-TopFreq",
    "TIFU-KNN",
    "UP-CF@r",
    "SASRec",
    "BERT4Rec",
    "G-TopFreq",
    "P-TopFreq + co-purchase",
    "oracle (no mission)",
    "world_model | given mission",
    "Mission-P-TopFreq",
    "oracle",
)
# Sections of tuning.json the report shows elsewhere, or that are not settings.
TUNING_NOT_SHOWN = frozenset(
    {
        "checkpoint",
        "scored_checkpoints",
        "method_inputs",
        "slice_baskets",
        "simulation",
        "simulated_sizes",
        "substitution",
        "observed_response",
        "price_events",
        "vocabulary_coverage",
    }
)
HEADLINE = (
    "R@20",
    "NDCG@10",
    "P@10",
    "R@10",
    "MRR",
    "F1",
    "top3_hit",
    "category_coverage",
    "revenue_correlation",
    "R@20_repeat",
    "R@20_explore",
)


def _methods(by_method: dict) -> list[str]:
    return [m for m in METHOD_ORDER if m in by_method] + sorted(set(by_method) - set(METHOD_ORDER))


def _slice_note(tuning: dict) -> str:
    """How many baskets each slice holds; the cold-start slice also holds every cold-start test
    basket outside the sample (too few in a sample to tell methods apart)."""
    sizes = tuning.get("slice_baskets", {})
    if not sizes:
        return ""
    counts = ", ".join(f"{html.escape(s)} {n:,}" for s, n in sizes.items())
    extra = tuning.get("cold_start_outside_sample", 0)
    cold = (
        f" The cold-start slice is every cold-start test basket: {extra:,} of them are outside "
        "the sample and count in that slice only."
        if extra
        else ""
    )
    return f"<p>Baskets per slice: {counts}.{cold}</p>"


def _table(by_method: dict, metrics: tuple[str, ...], bounds: dict | None = None) -> str:
    """Methods x metrics; the best honest value in bold; [lo, hi] = 95% interval where known."""
    methods = _methods(by_method)
    present = [k for k in metrics if any(k in by_method[m] for m in methods)]
    honest = [m for m in methods if m not in CONDITIONAL and m not in CEILINGS]
    best = {
        k: max((by_method[m].get(k, float("-inf")) for m in honest), default=None) for k in present
    }

    def cell(m, k):
        if k not in by_method[m]:
            return "<td>–</td>"
        ci = (bounds or {}).get(m, {}).get(k)
        text = f"{by_method[m][k]:.4f}" + (
            f" <small>[{ci[0]:.4f}, {ci[1]:.4f}]</small>" if ci else ""
        )
        cls = "best" if m in honest and by_method[m][k] == best[k] else ""
        return f"<td class='{cls}'>{text}</td>"

    head = "".join(f"<th>{html.escape(k)}</th>" for k in present)
    body = "".join(
        f"<tr><th>{html.escape(m)}</th>{''.join(cell(m, k) for k in present)}</tr>" for m in methods
    )
    return f"<table><tr><th>method</th>{head}</tr>{body}</table>"


def _tuning_section(tuning: dict) -> list[str]:
    """The checkpoint's training summary and each tuned baseline's settings, one row per
    setting; every detail is in ``tuning.json`` beside this page."""
    rows = []
    for what, values in [("world model", tuning.get("checkpoint") or {}), *tuning.items()]:
        if not isinstance(values, dict) or what in TUNING_NOT_SHOWN:
            continue
        for key, value in values.items():
            if isinstance(value, (int, float, str, bool)) and value is not None:
                shown = f"{value:.4g}" if isinstance(value, float) else str(value)
                rows.append(
                    f"<tr><th>{html.escape(what)}</th><td>{html.escape(str(key))}</td>"
                    f"<td>{html.escape(shown)}</td></tr>"
                )
    return [
        "<h2>Tuning and checkpoint</h2>",
        "<p>Every detail: <a href='tuning.json'>tuning.json</a>.</p>",
        "<table><tr><th>what</th><th>setting</th><th>value</th></tr>" + "".join(rows) + "</table>",
    ]


def _train_end(tuning: dict) -> int | None:
    return (tuning.get("split") or {}).get("train_end")


def _slice_parts(nb: dict, bounds: dict) -> tuple[str, str, list[str]]:
    """(R@20 of every method by slice, bars by history bucket, a table per test-week slice:
    none where the evaluation drew no week slices)."""
    slice_rows = {  # the week slices have their own section (staleness)
        s: {m: v.get("R@20", 0.0) for m, v in by.items()}
        for s, by in nb.items()
        if not s.startswith("week_")
    }
    slice_table = _table(
        {m: {s: slice_rows[s].get(m, 0.0) for s in slice_rows} for m in nb["all"]},
        tuple(slice_rows),
    )
    buckets = {s: v for s, v in nb.items() if s.startswith("bucket_")}
    bucket_svgs = "".join(
        bars({m: v.get("R@20", 0.0) for m, v in by.items()}, f"R@20, {s}")
        for s, by in sorted(buckets.items())
    )
    week_tables = [
        x
        for s in nb
        if s.startswith("test_")
        for x in (
            f"<h3>{html.escape(s)}</h3>",
            _table(nb[s], ("R@20", "NDCG@10", "MRR"), bounds.get("next_basket", {}).get(s)),
        )
    ]
    return slice_table, bucket_svgs, week_tables


def render_report(
    metrics: dict,
    calibration: pl.DataFrame,
    tuning: dict,
    response: dict | None = None,
    bounds: dict | None = None,
) -> str:
    nb, mi = metrics["next_basket"], metrics["masked_item"]
    bounds = bounds or {}
    head = headline_slice(metrics, tuning.get("source"))
    slice_table, bucket_svgs, week_tables = _slice_parts(nb, bounds)
    verdict_slices = [head] + (["all"] if head != "all" else [])
    notes = [
        n for name in verdict_slices for n in verdict_notes(metrics, name, tuning.get("source"))
    ]
    sections = [
        *intro(tuning),
        "<p>Rows told the basket's mission (the conditional use) are compared only with each "
        "other.</p>",
        "<h2>Verdict</h2>",
        verdict_table(metrics, bounds, verdict_slices),
        *(f"<p>{html.escape(n)}</p>" for n in notes),
        "<h2>Next basket (all test baskets)</h2>",
        _table(nb["all"], HEADLINE, bounds.get("next_basket", {}).get("all")),
        bars({m: v["R@20"] for m, v in nb["all"].items() if "R@20" in v}, "R@20 by method"),
        bars(
            {m: v["NDCG@10"] for m, v in nb["all"].items() if "NDCG@10" in v}, "NDCG@10 by method"
        ),
        *(["<h2>Next basket by test-week slice</h2>", *week_tables] if week_tables else []),
        *staleness_section(nb, _train_end(tuning), tuning.get("slice_baskets", {})),
        "<h2>Masked items (BERT4Rec protocol)</h2>",
        "<p>The world model and the co-purchase baseline see the basket's shown products; the "
        "other "
        "methods rank with their next-basket scores.</p>",
        _table(mi["all"], ("Hit@10", "NDCG@10", "MRR"), bounds.get("masked_item", {}).get("all")),
        bars(
            {m: v["Hit@10"] for m, v in mi["all"].items() if "Hit@10" in v},
            "masked-item Hit@10 by method",
        ),
        "<h2>R@20 by slice</h2>",
        slice_table,
        _slice_note(tuning),
        "<h2>By history bucket</h2>",
        bucket_svgs,
        *calibration_section(calibration),
        *(price_sections(response, tuning) if response is not None else []),
        *_tuning_section(tuning),
    ]
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
        "td,th{border:1px solid #ddd;padding:3px 7px;"
        "text-align:right}th:first-child{text-align:left}td.best{font-weight:bold;background:#eef}"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>RetailSim evaluation</title>"
        f"<style>{style}</style></head><body>{''.join(sections)}</body></html>"
    )


def markdown_summary(metrics: dict, source: str | None = None) -> str:
    """The methods' headline figures, the verdict and its notes, for the asset's metadata."""
    nb = metrics["next_basket"]["all"]
    head = headline_slice(metrics, source)
    lines = ["| method | R@20 | NDCG@10 | P@10 | MRR |", "|---|---|---|---|---|"]
    lines += [
        f"| {m} | {nb[m].get('R@20', 0):.4f} | {nb[m].get('NDCG@10', 0):.4f} | "
        f"{nb[m].get('P@10', 0):.4f} | "
        f"{nb[m].get('MRR', 0):.4f} |"
        for m in _methods(nb)
    ]
    return "\n".join(
        lines
        + [""]
        + [
            f"- [{sl}] {model} {k} {a:.4f} vs {rival} {b:.4f}: {word} ({rel:+.1%})"
            for sl, model, rival, k, a, b, rel, _, word in verdict_rows(metrics, None, head)
        ]
        + [f"- {note}" for note in verdict_notes(metrics, head, source)]
    )

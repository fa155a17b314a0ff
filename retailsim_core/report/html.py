"""A self-contained HTML report (inline CSS and SVG, no scripts or downloads) and its Markdown
summary: what each method sees, tables and plots of metric by method (with 95% customer
bootstrap intervals), by test-week slice and by history bucket, the verdict in plain words
(every honest baseline, and the conditional row against its own baseline), simulated basket
sizes against real ones, and the calibration of the auxiliary heads."""

from __future__ import annotations

import html

import polars as pl

from retailsim_core.next_basket.methods import REFRESHED
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


def _inputs_table(inputs: dict) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(m)}</th><td style='text-align:left'>{html.escape(v)}</td></tr>"
        for m, v in inputs.items()
    )
    head = "<tr><th>method</th><th>what it sees when it predicts a basket</th></tr>"
    return f"<table>{head}{rows}</table>"


def _num(value: float | None) -> str:
    """A figure to 3 decimals; "—" for a head without labels (no samples: None or NaN)."""
    return "—" if value is None or value != value else f"{value:.3f}"


def _calibration_section(calibration: pl.DataFrame) -> list[str]:
    """The auxiliary heads' calibration, where the source has their labels (none: no section)."""
    if calibration.is_empty() or calibration["head_accuracy"].drop_nans().drop_nulls().is_empty():
        return []
    return ["<h2>Auxiliary heads (no mission given): calibration</h2>", _reliability(calibration)]


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


def _intro(tuning: dict) -> list[str]:
    """The title, what was scored, notes of what was left out, and what each method sees."""
    note = tuning.get("oracle_note")
    return [
        "<h1>RetailSim evaluation report</h1>",
        f"<p>Test weeks, {tuning['test_samples']:,} baskets of carded customers; baselines tuned "
        f"on {tuning['validation_samples']:,} validation baskets. Every method is scored on the "
        "same samples. Intervals are 95% customer-cluster bootstrap intervals.</p>",
        *_coverage_line(tuning.get("vocabulary_coverage")),
        *_scored_line(tuning.get("scored_checkpoints")),
        *([f"<p><b>{html.escape(note)}</b></p>"] if note else []),
        "<h2>What each method sees</h2>",
        _inputs_table(tuning.get("method_inputs", {})),
        *_budget_line(tuning),
    ]


def _scored_line(scored: dict | None) -> list[str]:
    """The checkpoint ids of the models scored: the report is tied to the bytes it read."""
    if not scored:
        return []
    refreshed = scored.get("refreshed") or {}
    ids = sorted(set(refreshed.values()))
    more = (
        f"; refreshed (test weeks {min(map(int, refreshed))}–{max(map(int, refreshed))}): "
        + ", ".join(f"<code>{html.escape(i)}</code>" for i in ids)
        if ids
        else ""
    )
    return [
        f"<p>Models scored: trained checkpoint <code>{html.escape(scored['trained'])}</code>"
        f"{more}.</p>"
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
        *_intro(tuning),
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
        *_calibration_section(calibration),
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


def _coverage_line(coverage: dict | None) -> list[str]:
    if not coverage or not coverage.get("purchases"):
        return []
    return [
        f"<p>The vocabulary ({coverage['vocabulary']:,} products) names "
        f"{coverage['purchase_share']:.1%} of the test baskets' purchases and "
        f"{coverage['products_covered']:,} of the {coverage['products']:,} products they hold; "
        "no token-based method can predict the rest.</p>"
    ]


def _budget_line(tuning: dict) -> list[str]:
    """Whether SASRec and BERT4Rec stopped on their validation curve or on their CPU budget
    (RETAILSIM_SEQUENTIAL_SECONDS): a budget-limited baseline is not a converged one."""
    out = []
    for name in ("SASRec", "BERT4Rec"):
        info = tuning.get(name) or {}
        if info.get("stopped_by") == "time budget":
            out.append(
                f"{name} is budget-limited: {info.get('epochs')} epoch(s) in "
                f"{info.get('seconds', 0):.0f} s (best {info.get('best_epoch')}), stopped by its "
                "CPU budget, not by its validation curve"
            )
    if not out:
        return []
    return [
        "<p>" + html.escape("; ".join(out)) + ". RETAILSIM_SEQUENTIAL_SECONDS raises the budget "
        "(a large value trains to validation convergence).</p>"
    ]

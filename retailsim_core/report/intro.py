"""The report's opening: what was scored (baskets, vocabulary coverage, the checkpoint ids of
the models scored, notes of what was left out), what each method sees, and whether the
sequential baselines stopped on their budget."""

from __future__ import annotations

import html


def _inputs_table(inputs: dict) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(m)}</th><td style='text-align:left'>{html.escape(v)}</td></tr>"
        for m, v in inputs.items()
    )
    head = "<tr><th>method</th><th>what it sees when it predicts a basket</th></tr>"
    return f"<table>{head}{rows}</table>"


def intro(tuning: dict) -> list[str]:
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

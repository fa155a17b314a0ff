"""The price sections of the HTML report: own- and cross-price elasticities (autograd), their
checks against the planted elasticities and the test weeks' promotions (D61), and the simulated
basket sizes against real ones (D53)."""

from __future__ import annotations

import html

import polars as pl

from retailsim_core.report.svg_charts import scatter, size_bars


def frame_table(df: pl.DataFrame) -> str:
    def fmt(v):
        return f"{v:.4f}" if isinstance(v, float) else html.escape(str(v))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{fmt(v)}</td>" for v in row) + "</tr>" for row in df.iter_rows()
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def events_section(events: dict) -> list[str]:
    """The promotion-event check (D76): every method's response against held-out events whose
    promotion was known without their own sales, with the measurement's own ceiling."""
    if not events.get("events"):
        return []
    ceiling = events["ceiling"]
    rows = []
    for name, m in events["methods"].items():
        pair = events["world_model_vs"].get(name, {})
        rows.append(
            _metric_row(name, m)
            | {
                "world model − method, WAPE": _with_ci(
                    pair.get("wape_difference"), pair.get("wape_difference_ci", [None, None])
                ),
            }
        )
    best = ceiling.get("ceiling")
    return [
        "<h3>Promotion events known before the sales</h3>",
        f"<p>{events['events']:,} promoted product × store × week cells of weeks "
        f"{events['weeks'][0]}–{events['weeks'][1]} (promotions from: "
        f"{html.escape(events['source'])}); zero-sale weeks count. Every method predicts each "
        "event's units (evaluated baskets holding the product) with and without its promotion, "
        "every method told the same promotion (its kind and known depth); "
        "the lift is log((mean units with + 1) / (mean without + 1)) per product. Baselines are "
        f"fitted on weeks {events['fitted_weeks'][0]}–{events['fitted_weeks'][1]}. 95% intervals "
        "resample products. The observed lift's own reliability: split-half Spearman "
        f"{_num(ceiling.get('split_half'))}, so no model can correlate with it above about "
        f"<b>{_num(best)}</b>.</p>",
        frame_table(pl.DataFrame(rows)),
        event_verdict(events),
        *_calibration_plot(events.get("calibration_bins", {}).get("world_model") or []),
        *_planted_section(events.get("planted")),
    ] + ([STAND_IN_CAVEAT] if "leave-one-store-out" in events["source"] else [])


EVENT_TARGETS = {  # issue #36's, for the world model on the test weeks' events
    "spearman": 0.5,  # and the interval's lower end above "spearman_low"
    "spearman_low": 0.35,
    "slope": (0.8, 1.2),  # calibration slope
    "planted_mean_lift": (0.8, 1.2),  # mean-lift ratio against the planted lift (synthetic)
}


def event_verdict(events: dict) -> str:
    """The world model against the targets, each said met or NOT MET with its figure."""
    t, wm = EVENT_TARGETS, events["methods"]["world_model"]
    rho, (rho_lo, rho_hi) = wm.get("spearman"), wm["spearman_ci"]
    slope, (lo, hi) = wm.get("calibration_slope"), t["slope"]
    pair = events["world_model_vs"].get("hierarchical_loglog", {})
    diff, (d_lo, d_hi) = pair.get("wape_difference"), pair.get("wape_difference_ci", [None] * 2)
    checks = [
        (
            f"Spearman ≥ {t['spearman']} with the interval's lower end > {t['spearman_low']}",
            rho is not None and rho >= t["spearman"] and rho_lo > t["spearman_low"],
            f"{_num(rho)} [{_num(rho_lo)}, {_num(rho_hi)}]; the ceiling is "
            f"{_num(events['ceiling'].get('ceiling'))}",
        ),
        (
            f"calibration slope in [{lo}, {hi}]",
            slope is not None and lo <= slope <= hi,
            _num(slope),
        ),
        (
            "WAPE below the hierarchical baseline's, the paired interval excluding 0",
            d_hi is not None and d_hi < 0,
            f"difference {_num(diff)} [{_num(d_lo)}, {_num(d_hi)}]",
        ),
    ]
    planted = (events.get("planted") or {}).get("methods", {}).get("world_model")
    if planted:
        ratio, (lo, hi) = planted["mean_lift_ratio"], t["planted_mean_lift"]
        checks.append(("mean lift within ±20% of the planted", lo <= ratio <= hi, _num(ratio)))
    said = "; ".join(
        f"{name}: <b>{'met' if ok else 'NOT MET'}</b> ({figure})" for name, ok, figure in checks
    )
    return f"<p>World model against the targets: {said}.</p>"


def _metric_row(name: str, m: dict) -> dict:
    """One method's response metrics with their intervals, as a table row."""
    return {
        "method": name,
        "Spearman": _with_ci(m["spearman"], m["spearman_ci"]),
        "calibration slope": _with_ci(m["calibration_slope"], m["calibration_slope_ci"]),
        "mean-lift ratio": _with_ci(m["mean_lift_ratio"], m["mean_lift_ratio_ci"]),
        "WAPE": _with_ci(m["wape"], m["wape_ci"]),
    }


def _planted_section(planted: dict | None) -> list[str]:
    """The same events against the generator's planted demand (synthetic data only)."""
    if not planted:
        return []
    rows = [_metric_row(name, m) for name, m in planted["methods"].items()]
    return [
        "<p>Against the planted demand: the generator's expected units of each event with its "
        "planted cut and without it (the same baskets), so no draw's noise; the planted mean "
        f"lift is {_num(planted['mean_lift'])}. A mean-lift ratio of 1 is the planted uplift."
        "</p>",
        frame_table(pl.DataFrame(rows)),
    ]


def realism_section(response: dict, events: dict) -> list[str]:
    """Elasticity realism against the literature (Bijmolt, van Heerde & Pieters 2005): the
    model's own-price elasticities (autograd, regular prices) and the promotions' arc
    elasticities, observed and predicted."""
    own = response["own"]["model_elasticity"]
    promo = events.get("promotional_elasticity") or {}
    rows = [
        {"figure": "share of own elasticities < 0", "model": _num(float((own < 0).mean())),
         "observed": "n/a", "literature": "all"},
        {"figure": "median own elasticity, SKU level (autograd)", "model": _num(own.median()),
         "observed": "n/a", "literature": "-2.6"},
        {"figure": f"median promotional arc elasticity ({promo.get('products', 0)} products)",
         "model": _num(promo.get("world_model")), "observed": _num(promo.get("observed")),
         "literature": "-3.6"},
    ]  # fmt: skip
    return ["<h3>Elasticity realism</h3>", frame_table(pl.DataFrame(rows))]


def _calibration_plot(bins: list[dict]) -> list[str]:
    """The world model's binned calibration: products in ten groups of equal events by
    predicted lift; a calibrated model's points lie on the diagonal."""
    if not bins:
        return []
    return [
        "<p>Calibration: the world model's products in groups of equal events by predicted lift, "
        "each group's mean predicted (→) and observed (↑) lift.</p>",
        scatter(
            [b["predicted"] for b in bins], [b["observed"] for b in bins], "predicted", "observed"
        ),
    ]


STAND_IN_CAVEAT = (
    "<p><b>What this data cannot show.</b> It has no promotion table: an event is a cell another "
    "store of its region promoted that week, a stand-in for a calendar known before the sales, "
    "and a product sells a few units per store-week, so the observed lifts are noisy (see the "
    "ceiling). The table compares methods on the same events; it does not validate "
    "elasticities. That needs a source whose promotions are recorded whether or not anything "
    "sold (D76).</p>"
)


def _num(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _with_ci(value, ci) -> str:
    if value is None:
        return "n/a"
    lo, hi = ci if ci else (None, None)
    return f"{value:.3f}" + ("" if lo is None else f" [{lo:.3f}, {hi:.3f}]")


def price_sections(response: dict, tuning: dict) -> list[str]:
    """The elasticities, their checks against planted truth and held-out promotions, and the
    simulated basket sizes against real ones."""
    own = response["own"].sort("model_elasticity")
    cross = (
        response["elasticities"]
        .filter(pl.col("kind") != "own")
        .sort(pl.col("elasticity").abs(), descending=True)
        .head(20)
        .select("product_id", "other_id", "elasticity", "kind")
    )
    rho = response.get("planted_spearman")
    parts = [
        "<h2>Price elasticities (autograd Jacobian)</h2>",
        f"<p>Context: {html.escape(response['context'])} ({response['contexts']} baskets); the "
        f"{own.height} products with the most expected units. Own-price elasticity = d log "
        "E[units] / d log price.</p>",
    ]
    if rho is not None:
        neg = response["own_negative_share"]
        parts.append(
            f"<p>Against the generator's planted own-price elasticities: <b>{neg:.0%}</b> of the "
            "model's are "
            f"negative (target ≥ 80%); Spearman rank correlation <b>{rho:.3f}</b> (target ≥ 0.5; "
            "Pearson "
            f"{response['planted_correlation']:.3f}). "
            f"{'Both targets met.' if neg >= 0.8 and rho >= 0.5 else 'NOT MET.'} "
            "Each product's own promotion response is constrained to be non-negative (law of "
            "demand, "
            "decision D45), so the sign is partly structural; the ranking is learned.</p>"
        )
        parts.append(
            scatter(own["planted_elasticity"], own["model_elasticity"], "planted", "model")
        )
    sub = response.get("substitution")
    if sub and sub.get("substitute_pairs") and sub.get("random_pairs"):
        better = (
            sub["substitute_median"] > sub["random_median"]
            and sub["substitute_positive_share"] > sub["random_positive_share"]
        )
        parts += [
            "<h3>Substitutes (planted pairs) vs random same-category pairs</h3>",
            "<p>Cross-price elasticity d log E[a] / d log p[b], both directions of each pair. A "
            "substitute should gain when the other's price rises (positive); an unrelated pair "
            "should barely move. The substitute weight is sign-constrained (decision D45): "
            "positive shares are structural, the magnitudes (means, medians) are learned. "
            + (
                "Substitutes respond more than random pairs.</p>"
                if better
                else "NOT MET: substitutes do not respond more.</p>"
            ),
            frame_table(pl.DataFrame([{k: float(v) for k, v in sub.items() if v is not None}])),
        ]
    parts += events_section(response.get("events") or {})
    if response.get("events", {}).get("events"):
        parts += realism_section(response, response["events"])
    parts += [
        "<h3>Own-price</h3>",
        frame_table(own),
        "<h3>Strongest cross-price pairs</h3>",
        frame_table(cross),
    ]
    sim = tuning.get("simulation", {})
    if sim:
        sizes = tuning.get("simulated_sizes", {})
        parts += [
            "<h2>Simulated baskets vs real (test contexts, nothing of the basket given)</h2>",
            "<p>Sizes are drawn from the size head, then each slot from the model (decision D53). "
            f"Mean size ratio simulated / real: <b>{sim['mean_size_ratio']:.3f}</b> over the "
            f"drawn baskets{_expected_size(sim)} (target within 10%: "
            f"{'met' if abs(_size_ratio(sim) - 1) <= 0.1 else 'NOT met'}).</p>",
            frame_table(
                pl.DataFrame([{k: float(v) for k, v in sim.items() if not isinstance(v, list)}])
            ),
        ]
        if sizes:
            parts.append(size_bars(sizes["real"], sizes["simulated"]))
    return parts


def _size_ratio(sim: dict) -> float:
    """The ratio the size target reads: the size head's expectation over every scored context
    where the check has it (no draw noise, 12x the contexts: D131), else the drawn baskets'."""
    return sim.get("expected_size_ratio", sim["mean_size_ratio"])


def _expected_size(sim: dict) -> str:
    if "expected_size_ratio" not in sim:
        return ""
    low, high = (v if v is not None else float("nan") for v in sim["expected_size_ratio_interval"])
    return (
        f"; the size head's expected size over all {sim['expected_contexts']} scored contexts "
        f"against their real baskets: <b>{sim['expected_size_ratio']:.3f}</b> (95% interval "
        f"{low:.3f} … {high:.3f})"
    )

"""Record a materialized evaluation's figures in ``benchmarks/results/`` for the docs' tables.

Reads what ``evaluation_report`` and ``pricing_policy`` wrote (``metrics.json``,
``intervals.json``, ``tuning.json``, ``results.json``) and writes three areas named after
``--dataset``: ``<dataset>_next_basket`` (every method on the headline slice with the world
model's difference interval, and R@20 by slice), ``<dataset>_price_events`` (the promotion
events against the observed and, on synthetic data, the planted response) and
``<dataset>_pricing`` (each category's margin lift by policy on the held-out simulator), and
``<dataset>_demand`` (the demand forecast check's scores) where ``demand_forecast`` ran.

    python -m benchmarks.record_evaluation --warehouse data/warehouse --dataset synthetic
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.results import measured_now, record, table

METHODS_LAST = ("SASRec", "BERT4Rec", "G-TopFreq")
EVENT_METHODS = ("world_model", "hierarchical_loglog", "constant_elasticity", "no_response")
POLICIES = ("regular", "static", "myopic", "ppo")


def _span(ci) -> str | None:
    return None if not ci or ci[0] is None else f"{ci[0]:+.4f} … {ci[1]:+.4f}"


def next_basket_tables(metrics: dict, intervals: dict, slice_name: str) -> dict:
    """The headline slice (methods by R@20, the sequential baselines and popularity last) and
    R@20 of the world model and its two strongest counting rivals on every slice."""
    nb, diffs = metrics["next_basket"][slice_name], intervals["next_basket"].get(slice_name, {})
    order = sorted(nb, key=lambda m: (m in METHODS_LAST, -nb[m]["R@20"]))
    rows = [
        [m, nb[m]["R@20"], nb[m]["NDCG@10"]]
        + [
            _span(diffs.get(m, {}).get(f"diff_{k}")) if m != "world_model" else None
            for k in ("R@20", "NDCG@10")
        ]
        for m in order
    ]
    head = table(
        ["method", "R@20", "NDCG@10", "world_model − method, R@20 (95%)", "NDCG@10 (95%)"],
        rows,
        {"R@20": ".4f", "NDCG@10": ".4f"},
    )
    shown = ("world_model", "world_model (refreshed)", "TIFU-KNN", "P-TopFreq", "UP-CF@r")
    rivals = [m for m in shown if m in nb]
    slices = [
        [s] + [metrics["next_basket"][s].get(m, {}).get("R@20") for m in rivals]
        for s in metrics["next_basket"]
    ]
    fmt = {m: ".4f" for m in rivals}
    return {"headline": head, "slices": table(["slice (R@20)"] + rivals, slices, fmt)}


def price_event_tables(events: dict) -> dict:
    """Spearman, calibration slope, mean-lift ratio and WAPE with their intervals, against the
    observed response and (synthetic data) the planted one."""

    def rows(methods: dict) -> list[list]:
        out = []
        for m in EVENT_METHODS:
            if m not in methods:
                continue
            r = methods[m]
            out.append(
                [m]
                + [
                    None
                    if r[k] is None
                    else f"{r[k]:.3f} [{r[k + '_ci'][0]:.2f}, {r[k + '_ci'][1]:.2f}]"
                    for k in ("spearman", "calibration_slope", "mean_lift_ratio", "wape")
                ]
            )
        return out

    cols = ["method", "Spearman", "calibration slope", "mean-lift ratio", "WAPE"]
    tabs = {"observed": table(cols, rows(events["methods"]))}
    if events.get("planted"):
        tabs["planted"] = table(cols, rows(events["planted"]["methods"]))
    c = events["ceiling"]
    tabs["scope"] = table(
        ["events", "products", "split-half Spearman", "ceiling"],
        [[events["events"], c["products"], c["split_half"], c["ceiling"]]],
        {"split-half Spearman": ".3f", "ceiling": ".3f"},
    )
    return tabs


def pricing_table(results: dict) -> dict:
    """Each category's margin lift over historical prices by policy (held-out simulator, the
    planted demand's in brackets where the data has one)."""
    rows = []
    for cat, c in sorted(results["categories"].items()):
        row = [cat]
        for p in POLICIES:
            pol = c["policies"].get(p)
            if pol is None:
                row.append(None)
                continue
            lift = f"{pol['held_out']['lift']:+.1%}"
            if pol.get("planted"):
                lift += f" ({pol['planted']['lift']:+.1%})"
            row.append(lift)
        rows.append(row)
    return table(["category", *POLICIES], rows)


def demand_table(scores: dict) -> dict:
    """Each method's WAPE, bias and MASE with their intervals, and its WAPE difference to the
    seasonal-naive forecast, over all test cell-weeks and over promoted ones."""

    def ci(v: float, lo_hi: list) -> str:
        return f"{v:.3f} [{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]"

    rows = []
    for part in ("all", "promoted"):
        for m, r in scores.get(part, {}).items():
            rows.append(
                [part, m]
                + [ci(r[k], r[f"{k}_interval"]) for k in ("wape", "bias", "mase")]
                + [
                    _span(r["wape_minus_seasonal_naive_interval"])
                    if m != "seasonal_naive"
                    else None
                ]
            )
    cols = ["cell-weeks", "method", "WAPE", "bias", "MASE", "WAPE − seasonal naive (95%)"]
    scope = [[scores["cell_weeks"], scores["promoted_cell_weeks"], scores["mase_scale"]]]
    return {
        "scores": table(cols, rows),
        "scope": table(["test cell-weeks", "promoted", "MASE scale"], scope, {"MASE scale": ".4f"}),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", type=Path, default=Path("data/warehouse"))
    ap.add_argument("--dataset", required=True, help="synthetic, real_lgsr, complete_journey")
    ap.add_argument("--slice", default="all", help="the headline slice")
    ap.add_argument("--commit", help="the commit that made the warehouse (default: this one)")
    args = ap.parse_args()
    at = measured_now(args.commit)
    ev = args.warehouse / "evaluation_report"
    read = lambda p: json.loads(p.read_text())  # noqa: E731
    command = f"python -m benchmarks.record_evaluation --dataset {args.dataset}"
    metrics, tuning = read(ev / "metrics.json"), read(ev / "tuning.json")
    record(
        f"{args.dataset}_next_basket",
        title="Next basket",
        command=command,
        measured=at,
        tables=next_basket_tables(metrics, read(ev / "intervals.json"), args.slice),
    )
    if tuning.get("price_events"):
        record(
            f"{args.dataset}_price_events",
            title="Promotion events",
            command=command,
            measured=at,
            tables=price_event_tables(tuning["price_events"]),
        )
    demand = args.warehouse / "demand_forecast" / "scores.json"
    if demand.exists():
        record(
            f"{args.dataset}_demand",
            title="Demand forecast",
            command=command,
            measured=at,
            tables=demand_table(read(demand)),
        )
    pricing = args.warehouse / "pricing_policy" / "results.json"
    if pricing.exists():
        record(
            f"{args.dataset}_pricing",
            title="Pricing policies",
            command=command,
            measured=at,
            tables={"lifts": pricing_table(read(pricing))},
        )


if __name__ == "__main__":
    main()

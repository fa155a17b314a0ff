"""Record a materialized evaluation's figures in ``benchmarks/results/`` for the docs' tables.

Reads what ``evaluation_report`` and ``pricing_policy`` wrote (``metrics.json``,
``intervals.json``, ``tuning.json``, ``results.json``) and writes areas named after
``--dataset``: ``<dataset>_next_basket`` (every method on the headline slice with the world
model's difference interval, R@20 by slice, simulated against real basket sizes),
``<dataset>_price_events`` (the promotion events against the observed and, on synthetic data,
the planted response), ``<dataset>_pricing`` (each category's margin lift by policy on the
held-out simulator), ``<dataset>_demand`` (the demand forecast check's scores) where
``demand_forecast`` ran, ``<dataset>_trips`` (visits and store choice) where ``trip_forecast``
ran, and ``<dataset>_world_demand`` (the world model's unit forecast beside the baselines)
where ``world_model_demand`` ran.

    python -m benchmarks.record_evaluation --warehouse data/warehouse --dataset synthetic
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from benchmarks.results import measured_now, record, table

METHODS_LAST = ("SASRec", "BERT4Rec", "G-TopFreq")
EVENT_METHODS = ("world_model", "hierarchical_loglog", "constant_elasticity", "no_response")
POLICIES = ("regular", "static", "myopic", "ppo")
DEMAND_EXTRA = ("rmse", "chain_wape")  # scores added with the libraries' baselines


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
        for s in sorted(metrics["next_basket"], key=natural_order)
    ]
    fmt = {m: ".4f" for m in rivals}
    return {"headline": head, "slices": table(["slice (R@20)"] + rivals, slices, fmt)}


def simulation_table(sim: dict) -> dict:
    """Simulated baskets against the real ones of the same test contexts: the drawn baskets'
    mean size and the size head's expectation over every scored context (D131), each ratio
    against its target (within 10%), and the drawn size distribution's distances."""

    def verdict(ratio: float) -> str:
        return "within 10%: " + ("met" if abs(ratio - 1) <= 0.1 else "not met")

    ratio = sim["mean_size_ratio"]
    rows = [
        [
            "drawn baskets",
            sim["baskets"],
            sim["simulated_mean_size"],
            sim["real_mean_size"],
            ratio,
            None,
            verdict(ratio),
            sim["size_ks_statistic"],
            sim["size_total_variation"],
        ]
    ]
    if "expected_size_ratio" in sim:
        expected = sim["expected_size_ratio"]
        low, high = (v if v is not None else float("nan") for v in
                     sim["expected_size_ratio_interval"])  # fmt: skip
        rows.append(
            [
                "size head's expectation",
                sim["expected_contexts"],
                sim["expected_mean_size"],
                sim["expected_real_mean_size"],
                expected,
                f"{low:.3f} … {high:.3f}",
                verdict(expected),
                None,
                None,
            ]
        )
    cols = ["simulated sizes", "baskets", "simulated mean size", "real mean size", "ratio"]
    cols += ["95% interval", "target", "KS", "total variation"]
    fmt = {c: ".2f" for c in cols[2:4]} | {"ratio": ".3f", "KS": ".3f", "total variation": ".3f"}
    return table(cols, rows, fmt)  # fmt: skip


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
    """Each method's WAPE, bias, MASE, RMSE and chain WAPE with their intervals, and its WAPE
    difference to the seasonal-naive forecast, over all test cell-weeks and over promoted ones;
    the Poisson fixed-effects coefficients where the libraries ran."""

    def ci(v: float, lo_hi: list) -> str:
        return f"{v:.3f} [{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]"

    rows = []
    for part in ("all", "promoted"):
        for m, r in scores.get(part, {}).items():
            rows.append(
                [part, m]
                + [ci(r[k], r[f"{k}_interval"]) for k in ("wape", "bias", "mase")]
                + [ci(r[k], r[f"{k}_interval"]) if k in r else None for k in DEMAND_EXTRA]
                + [
                    _span(r["wape_minus_seasonal_naive_interval"])
                    if m != "seasonal_naive"
                    else None
                ]
            )
    cols = ["cell-weeks", "method", "WAPE", "bias", "MASE", "RMSE", "chain WAPE",
            "WAPE − seasonal naive (95%)"]  # fmt: skip
    scope = [[scores["cell_weeks"], scores["promoted_cell_weeks"], scores["mase_scale"]]]
    out = {
        "scores": table(cols, rows),
        "scope": table(["test cell-weeks", "promoted", "MASE scale"], scope, {"MASE scale": ".4f"}),
    }
    if "poisson_fe" in scores:
        coef = scores["poisson_fe"]["coefficients"]
        out["poisson_fe"] = table(list(coef), [[_coef(v) for v in coef.values()]])
    if "quantity" in scores:
        out |= quantity_tables(scores["quantity"])
    if "planted_quantity" in scores:
        out["planted"] = planted_table({"units per line": scores["planted_quantity"]})
    return out


def planted_table(parts: dict[str, dict]) -> dict:
    """The forecasts' response against the planted one (synthetic data, D132): the correlation
    of the log lifts with its interval, and the mean lift forecast and planted."""
    rows = [
        [name, r["rows"], r["correlation"], _span(r["correlation_interval"]),
         r["forecast_mean_lift"], _span(r["forecast_mean_lift_interval"]), r["planted_mean_lift"]]
        for name, r in parts.items()
    ]  # fmt: skip
    cols = ["response", "rows", "correlation", "95%", "forecast mean lift", "95%",
            "planted mean lift"]  # fmt: skip
    formats = {"correlation": ".3f", "forecast mean lift": ".4f", "planted mean lift": ".4f"}
    return table(cols, rows, formats)


def quantity_tables(q: dict) -> dict:
    """Units per line: each method's MAE, RMSE and bias with intervals, the model's paired MAE
    difference to the product's mean, over all and promoted lines; the stock-up model's fit."""

    def ci(r: dict, k: str) -> str:
        lo, hi = r[f"{k}_interval"]
        return f"{r[k]:.3f} [{lo:.3f}, {hi:.3f}]"

    rows = [
        [part, m, q[part]["lines"], ci(r, "mae"), ci(r, "rmse"), ci(r, "bias"),
         _span(r.get("mae_minus_product_mean_interval"))]
        for part in ("all", "promoted") if part in q
        for m, r in q[part].items() if isinstance(r, dict)
    ]  # fmt: skip
    cols = ["lines", "method", "n", "MAE", "RMSE", "bias", "MAE − product mean (95%)"]
    coef = q["coefficients"]
    fit = [[*(_coef(v) for v in coef.values()), q["lines_fitted"], q["mean_quantity"]]]
    return {
        "quantity": table(cols, rows),
        "quantity_fit": table([*coef, "lines fitted", "mean units"], fit, {"mean units": ".3f"}),
    }


def _coef(v: float | None) -> str:
    return "dropped" if v is None else f"{v:+.3f}"


def trips_table(scores: dict) -> dict:
    """Visit log-loss of the model and the recent rates, store-choice accuracy of the model and
    the last store, with intervals and the model's paired differences."""
    visits, stores = scores["visits"], scores["stores"]
    v_rows = [
        [m, f"{r['log_loss']:.4f}", _span(r["log_loss_interval"]),
         None if m == "p_visit" else _span(visits["p_visit"][f"minus_{m}_interval"])]
        for m, r in visits.items() if isinstance(r, dict)
    ]  # fmt: skip
    s_rows = [
        [m, f"{r['accuracy']:.4f}", _span(r["accuracy_interval"]),
         _span(r["minus_last_store_interval"]) if m == "predicted" else None]
        for m, r in stores.items() if isinstance(r, dict) and "accuracy" in r
    ]  # fmt: skip
    scope = [[visits["customer_weeks"], visits["visit_rate"], stores["trips"],
              stores["half_life"]]]  # fmt: skip
    planted = {}
    if "planted_traffic" in scores:
        planted["planted"] = planted_table({"visits (the mailer)": scores["planted_traffic"]})
    return planted | {
        "visits": table(["method", "log-loss", "95%", "model − method (95%)"], v_rows),
        "stores": table(["method", "accuracy", "95%", "model − last store (95%)"], s_rows),
        "scope": table(
            ["customer-weeks", "visit rate", "trips", "half-life (weeks)"],
            scope,
            {"visit rate": ".3f"},
        ),  # fmt: skip
    }


def world_demand_table(scores: dict) -> dict:
    """Every method's WAPE, bias, RMSE and chain WAPE on the world model's rows, and its paired
    WAPE difference to the world model's mean and median forecasts (negative: the method has
    the lower WAPE), all and promoted cell-weeks; the calibration."""

    def ci(r: dict, k: str) -> str:
        lo, hi = r[f"{k}_interval"]
        return f"{r[k]:.3f} [{lo:.3f}, {hi:.3f}]"

    rows = [
        [part, m, *(ci(r, k) for k in ("wape", "bias", "rmse", "chain_wape")),
         *(_span(r[f"wape_minus_{w}_interval"]) if m != w else None
           for w in ("world_model", "world_model_median"))]
        for part in ("all", "promoted") if part in scores
        for m, r in scores[part].items()
    ]  # fmt: skip
    cols = ["cell-weeks", "method", "WAPE", "bias", "RMSE", "chain WAPE",
            "WAPE − world model (95%)", "WAPE − world model median (95%)"]  # fmt: skip
    cal = scores["calibration"]
    scope = [[scores["cell_weeks"], scores["promoted_cell_weeks"], scores["contexts"],
              cal["week"], cal["factor"], scores["seconds"]]]  # fmt: skip
    heads = ["test cell-weeks", "promoted", "contexts", "calibration week", "factor", "seconds"]
    out = {
        "scores": table(cols, rows),
        "scope": table(heads, scope, {"factor": ".3f"}),
    }
    if "promotion_lift" in scores:
        out["lift"] = lift_table(scores["promotion_lift"])
    return out


def lift_table(lift: dict) -> dict:
    """Each method's lift Spearman over the products with enough promoted cell-weeks, its
    interval, the split-half ceiling on those products and the method's share of it."""
    ceiling = lift["ceiling"]
    rows = [
        [m, lift["products"], lift["events"], r["spearman"], _span(r["spearman_interval"]),
         ceiling["ceiling"], r["share_of_ceiling"]]
        for m, r in lift["methods"].items()
    ]  # fmt: skip
    cols = ["method", "products", "promoted cell-weeks", "Spearman", "95%", "ceiling",
            "share of ceiling"]  # fmt: skip
    formats = {"Spearman": ".3f", "ceiling": ".3f", "share of ceiling": ".2f"}
    return table(cols, rows, formats)


AREAS = ("next_basket", "price_events", "demand", "trips", "world_demand", "pricing")


def area_tables(warehouse: Path, slice_name: str) -> dict[str, tuple[str, dict]]:
    """{area: (title, tables)} of every area whose asset wrote its figures in ``warehouse``."""
    read = lambda p: json.loads(p.read_text())  # noqa: E731
    ev = warehouse / "evaluation_report"
    out = {}
    if (ev / "metrics.json").exists():
        intervals = read(ev / "intervals.json")
        tuning = read(ev / "tuning.json")
        tables = next_basket_tables(read(ev / "metrics.json"), intervals, slice_name)
        if tuning.get("simulation"):
            tables["simulation"] = simulation_table(tuning["simulation"])
        out["next_basket"] = ("Next basket", tables)
        events = tuning.get("price_events")
        if events:
            out["price_events"] = ("Promotion events", price_event_tables(events))
    demand, trips = warehouse / "demand_forecast" / "scores.json", warehouse / "trip_forecast"
    if demand.exists():
        out["demand"] = ("Demand forecast", demand_table(read(demand)))
    if (trips / "scores.json").exists():
        out["trips"] = ("Trips", trips_table(read(trips / "scores.json")))
    world = warehouse / "world_model_demand" / "scores.json"
    if world.exists():
        out["world_demand"] = ("World model demand", world_demand_table(read(world)))
    pricing = warehouse / "pricing_policy" / "results.json"
    if pricing.exists():
        out["pricing"] = ("Pricing policies", {"lifts": pricing_table(read(pricing))})
    return out


def natural_order(name: str) -> list:
    """A slice name's sort key: its numbers as numbers (week_96 before week_100)."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warehouse", type=Path, default=Path("data/warehouse"))
    ap.add_argument("--dataset", required=True, help="synthetic, real_lgsr, complete_journey")
    ap.add_argument("--slice", default="all", help="the headline slice")
    ap.add_argument("--commit", help="the commit that made the warehouse (default: this one)")
    ap.add_argument("--only", nargs="+", choices=AREAS, help="record these areas only (the "
                    "others were measured at another commit)")  # fmt: skip
    args = ap.parse_args()
    at = measured_now(args.commit)
    command = f"python -m benchmarks.record_evaluation --dataset {args.dataset}"
    if args.slice != "all":  # the record says which slice its headline is
        command += f" --slice {args.slice}"
    for area, (title, tables) in area_tables(args.warehouse, args.slice).items():
        if args.only is None or area in args.only:
            record(f"{args.dataset}_{area}", title=title, command=command, measured=at,
                   tables=tables)  # fmt: skip


if __name__ == "__main__":
    main()

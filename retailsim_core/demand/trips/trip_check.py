"""The trips check (issue #61): the visit model's log-loss against the customers' recent rates,
and store-choice accuracy against the last store, on the forecast weeks, with 95% intervals over
customer resamples (a customer's weeks and trips move together) and paired differences.

The store model's half-life is chosen on the validation weeks (the weeks before the forecast
weeks that the split sets aside), never on the forecast weeks.

Glossary: U customers, N resamples.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from retailsim_core.demand.cells.scores import ordered_sums
from retailsim_core.demand.trips.visits import RATE_WINDOWS, TripsConfig, log_loss, store_choice
from retailsim_core.response.response_metrics import percentile_interval, product_resamples

VISIT_METHODS = ("p_visit", *(f"recent_rate_{n}" for n in RATE_WINDOWS))
STORE_METHODS = ("predicted", "last_store")


def _resampled(per_customer: pl.DataFrame, columns, denominator: str, n_boot: int, seed: int):
    """(point, draws) of sum(column) / sum(denominator) over customers, per column."""
    weights = product_resamples(per_customer.height, n_boot, seed)  # (N, U)
    total = per_customer[denominator].to_numpy().astype(np.float64)
    out = {}
    for c in columns:
        v = per_customer[c].to_numpy().astype(np.float64)
        out[c] = (float(v.sum() / total.sum()), (weights @ v) / (weights @ total))
    return out


def visit_scores(visits: pl.DataFrame, *, n_boot: int, seed: int) -> dict:
    """Mean log-loss per customer-week of each VISIT_METHODS column, and the model's paired
    difference to each baseline (negative: the model is better)."""
    y = visits["visited"].cast(pl.Float64).to_numpy()
    losses = visits.select("customer_id").with_columns(
        rows=pl.lit(1.0),
        **{m: pl.Series(log_loss(y, visits[m].to_numpy())) for m in VISIT_METHODS},
    )
    columns = ["rows", *VISIT_METHODS]
    per_customer = ordered_sums(losses, ["customer_id"], {c: pl.col(c) for c in columns})
    got = _resampled(per_customer, VISIT_METHODS, "rows", n_boot, seed)
    out = {
        m: {"log_loss": p, "log_loss_interval": percentile_interval(d)} for m, (p, d) in got.items()
    }
    for m in VISIT_METHODS[1:]:
        out["p_visit"][f"minus_{m}_interval"] = percentile_interval(got["p_visit"][1] - got[m][1])
    out["customer_weeks"] = visits.height
    out["visit_rate"] = float(y.mean())
    return out


def store_scores(choices: pl.DataFrame, *, n_boot: int, seed: int) -> dict:
    """Accuracy of each STORE_METHODS column over the trips, and the model's paired
    difference to the last store (positive: the model is better)."""
    hits = choices.select(
        "customer_id",
        trips=pl.lit(1.0),
        **{m: (pl.col(m) == pl.col("store_id")).cast(pl.Float64) for m in STORE_METHODS},
    )
    columns = ["trips", *STORE_METHODS]
    per_customer = ordered_sums(hits, ["customer_id"], {c: pl.col(c) for c in columns})
    got = _resampled(per_customer, STORE_METHODS, "trips", n_boot, seed)
    out = {
        m: {"accuracy": p, "accuracy_interval": percentile_interval(d)} for m, (p, d) in got.items()
    }
    out["predicted"]["minus_last_store_interval"] = percentile_interval(
        got["predicted"][1] - got["last_store"][1]
    )
    out["trips"] = choices.height
    return out


def tuned_store_choice(
    trips: pl.LazyFrame, *, valid_weeks: tuple[int, int], test_weeks: tuple[int, int],
    cfg: TripsConfig,
) -> tuple[pl.DataFrame, float, dict[float, float]]:  # fmt: skip
    """(the test trips' store choices with the half-life most accurate on ``valid_weeks``, that
    half-life, each half-life's validation accuracy)."""
    accuracy = {}
    for half_life in cfg.half_lives:
        valid = store_choice(trips, first_week=valid_weeks[0], last_week=valid_weeks[1],
                             half_life=half_life).collect()  # fmt: skip
        accuracy[half_life] = float((valid["predicted"] == valid["store_id"]).mean())
    best = max(accuracy, key=lambda h: (accuracy[h], -h))
    test = store_choice(trips, first_week=test_weeks[0], last_week=test_weeks[1], half_life=best)
    return test.collect(), best, accuracy

"""The promotion lift on forecasts: events, a lift that ranks the response and not the volume,
the split-half ceiling, on tiny literal frames."""

import numpy as np
import polars as pl
import pytest

from retailsim_core.demand.world.forecast_lift import events, lift_check, product_lifts


def _frame(lifts: dict[str, float], stores: int = 4, weeks: int = 6, scale=None) -> pl.DataFrame:
    """Every product sells ``scale`` units a week per store (1 by default), times its lift in
    the promoted weeks (weeks 2 and 4); a method ``exact`` forecasts both exactly."""
    rows = []
    for p, lift in lifts.items():
        level = (scale or {}).get(p, 1.0)
        for s in range(stores):
            for w in range(1, weeks + 1):
                promo = w in (2, 4)
                units = level * (np.exp(lift) if promo else 1.0)
                rows.append((p, f"S{s}", w, "display" if promo else "none", units, units, level))
    columns = ["product_id", "store_id", "week", "promotion", "observed_units", "exact",
               "exact_off"]  # fmt: skip
    return pl.DataFrame(rows, schema=columns, orient="row")


def test_events_are_promoted_weeks_of_cells_with_unpromoted_weeks():
    frame = pl.DataFrame({
        "product_id": ["P"] * 4 + ["Q"] * 2, "store_id": ["S"] * 6, "week": [1, 2, 3, 4, 1, 2],
        "promotion": ["none", "mailer", "none", "display", "mailer", "mailer"],
        "observed_units": [1.0, 5.0, 3.0, 7.0, 2.0, 2.0],
    })  # fmt: skip
    out = events(frame)
    assert out["product_id"].to_list() == ["P", "P"]  # Q is never unpromoted: no counterfactual
    assert out["off_level"].to_list() == [2.0, 2.0]


def test_the_lift_ranks_the_response_not_the_volume():
    lifts = {"A": 0.2, "B": 0.9, "C": 0.5, "D": 1.4}
    base = product_lifts(events(_frame(lifts)), {"exact": ("exact", "exact_off")}, 0.1)
    big = _frame(lifts, scale={"A": 1000.0, "C": 0.01})
    scaled = product_lifts(events(big), {"exact": ("exact", "exact_off")}, 0.1)
    assert scaled["observed"].to_list() == pytest.approx(base["observed"].to_list())
    order = base.sort("observed")["product_id"].to_list()
    assert order == ["A", "C", "B", "D"]  # the planted order, whatever each product's volume


def test_an_exact_method_reaches_the_ceiling_of_noiseless_data():
    rng = np.random.default_rng(0)
    lifts = {f"P{i}": float(v) for i, v in enumerate(rng.uniform(0, 2, 12))}
    out = lift_check(_frame(lifts), {"exact": ("exact", "exact_off")}, min_events=8, n_boot=50)
    assert out["products"] == 12 and out["events"] == 12 * 4 * 2
    assert out["ceiling"]["ceiling"] == pytest.approx(1.0)
    exact = out["methods"]["exact"]
    assert exact["spearman"] == pytest.approx(1.0) and exact["share_of_ceiling"] == pytest.approx(1)
    few = lift_check(_frame(lifts), {"exact": ("exact", "exact_off")}, min_events=9, n_boot=50)
    assert few["products"] == 0 and few["methods"] == {}  # 8 events each: none has 9

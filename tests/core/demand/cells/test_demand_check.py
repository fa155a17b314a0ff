"""The unit panel, the forecasts made before each week and their scores, on tiny frames."""

import numpy as np
import polars as pl
import pytest

from retailsim_core.demand.cells.check import forecast_frame, score
from retailsim_core.demand.cells.unit_panel import unit_panel, weekly_units


def _raw(*lines) -> pl.LazyFrame:
    """(product, store, week, quantity) lines of raw_transactions."""
    return pl.DataFrame(
        list(lines),
        schema={"product_id": pl.String, "store_id": pl.String, "week": pl.Int16,
                "quantity": pl.Int32},
        orient="row",
    ).lazy()  # fmt: skip


PLAN = pl.DataFrame(
    [(5, "A", "S1", True, False)],
    schema={"week": pl.Int16, "product_id": pl.String, "store_id": pl.String,
            "display": pl.Boolean, "mailer": pl.Boolean},
    orient="row",
).lazy()  # fmt: skip


def test_the_panel_holds_each_cell_from_its_first_sale_with_zeros_and_the_plan():
    raw = _raw(("A", "S1", 2, 3), ("A", "S1", 2, 1), ("A", "S1", 5, 2), ("B", "S1", 5, 9))
    panel = unit_panel(weekly_units(raw), PLAN, first_forecast_week=4, last_week=6).collect()
    # B first sold in a forecast week: not a cell that sold before, not in the panel
    assert panel.select("product_id", "week", "units", "display").rows() == [
        ("A", 2, 4.0, False),
        ("A", 3, 0.0, False),
        ("A", 4, 0.0, False),
        ("A", 5, 2.0, True),
        ("A", 6, 0.0, False),
    ]


def test_each_forecast_reads_only_the_weeks_before_its_own():
    raw = _raw(("A", "S1", 1, 2), ("A", "S1", 2, 4), ("A", "S1", 3, 6), ("A", "S1", 4, 8))
    frame = forecast_frame(raw, PLAN, first_forecast_week=3, last_week=5).collect()
    assert frame["seasonal_naive"].to_list() == [0.0, 2.0, 4.0, 6.0, 8.0]  # last week's
    assert frame["moving_average_4"].to_list() == [0.0, 2.0, 3.0, 4.0, 5.0]
    later = _raw(("A", "S1", 1, 2), ("A", "S1", 2, 4), ("A", "S1", 3, 600), ("A", "S1", 5, 1))
    changed = forecast_frame(later, PLAN, first_forecast_week=3, last_week=5).collect()
    # week 3's forecasts never read week 3 or later
    for method in ("seasonal_naive", "moving_average_4", "moving_average_13"):
        assert (
            changed.filter(pl.col("week") == 3)[method].item()
            == frame.filter(pl.col("week") == 3)[method].item()
        )


def test_the_scores_are_wape_bias_and_mase_with_paired_intervals():
    frame = pl.DataFrame(
        {
            "product_id": ["A", "A", "B", "A", "B"],
            "store_id": ["S1"] * 5,
            "week": [1, 2, 3, 3, 3],
            "promotion": ["none", "none", "none", "display", "none"],
            "observed_units": [2.0, 4.0, 10.0, 6.0, 0.0],
            "seasonal_naive": [0.0, 2.0, 8.0, 4.0, 1.0],
            "moving_average_4": [0.0, 2.0, 10.0, 3.0, 1.0],
            "moving_average_13": [0.0, 2.0, 10.0, 3.0, 1.0],
        }
    ).with_columns(pl.col("week").cast(pl.Int16))
    out = score(frame, first_forecast_week=3, n_boot=200, seed=0)
    assert out["mase_scale"] == pytest.approx(2.0)  # |2-0|, |4-2| before week 3
    naive = out["all"]["seasonal_naive"]
    assert naive["wape"] == pytest.approx(5 / 16)  # |10-8| + |6-4| + |0-1| over 16
    assert naive["bias"] == pytest.approx(-3 / 16)
    assert naive["mase"] == pytest.approx((5 / 3) / 2.0)
    assert naive["rmse"] == pytest.approx(np.sqrt((4 + 4 + 1) / 3))
    # B's two rows of week 3 sum to 10 against 9 before the error is taken: |1| + |6 - 4|
    assert naive["chain_wape"] == pytest.approx(3 / 16)
    assert naive["wape_minus_seasonal_naive_interval"] == [0.0, 0.0]
    lo, hi = naive["wape_interval"]
    assert lo <= naive["wape"] <= hi
    assert out["promoted_cell_weeks"] == 1
    assert out["promoted"]["moving_average_4"]["wape"] == pytest.approx(3 / 6)


def test_ordered_sums_add_each_group_whatever_the_row_order():
    from retailsim_core.demand.cells.scores import ordered_sums

    frame = pl.DataFrame({"p": ["A", "B", "A", "A"], "s": ["1", "1", "2", "1"],
                          "w": [1, 1, 1, 2], "x": [0.1, 0.2, 0.3, 0.4]})  # fmt: skip
    got = ordered_sums(frame, ["p", "w"], {"x": pl.col("x")})
    assert got.rows() == [("A", 1, pytest.approx(0.4)), ("A", 2, 0.4), ("B", 1, 0.2)]
    shuffled = ordered_sums(frame.reverse(), ["p", "w"], {"x": pl.col("x")})
    assert shuffled.equals(got)  # the same bits from any order of the same rows

"""What ``record_evaluation`` makes of the demand and trips checks' scores files."""

import json

from benchmarks.record_evaluation import area_tables, natural_order

INTERVAL = [0.1, 0.2]


def _method(**extra):
    figures = {k: 0.15 for k in ("wape", "bias", "mase")}
    return figures | {f"{k}_interval": INTERVAL for k in figures} | extra


def test_the_demand_and_trips_areas_are_read_from_their_own_scores(tmp_path):
    (tmp_path / "demand_forecast").mkdir()
    (tmp_path / "trip_forecast").mkdir()
    demand = {
        "cell_weeks": 10,
        "promoted_cell_weeks": 2,
        "mase_scale": 1.0,
        "all": {
            "seasonal_naive": _method(wape_minus_seasonal_naive_interval=[0, 0]),
            "lightgbm_l1": _method(
                rmse=1.0,
                rmse_interval=INTERVAL,
                chain_wape=0.5,
                chain_wape_interval=INTERVAL,
                wape_minus_seasonal_naive_interval=[-0.1, -0.05],
            ),
        },  # fmt: skip
        "poisson_fe": {"coefficients": {"display": 0.7, "holidays": None}},
        "quantity": {
            "lines": 5,
            "all": {
                "lines": 5,
                "quantity_model": {k: 0.5 for k in ("mae", "rmse", "bias")}
                | {f"{k}_interval": INTERVAL for k in ("mae", "rmse", "bias")}
                | {"mae_minus_product_mean_interval": [-0.2, -0.1]},
                "product_mean": {k: 0.6 for k in ("mae", "rmse", "bias")}
                | {f"{k}_interval": INTERVAL for k in ("mae", "rmse", "bias")},
            },
            "coefficients": {"log_price_index": -1.2, "display": None},
            "lines_fitted": 40,
            "mean_quantity": 1.3,
        },
    }
    trips = {
        "visits": {
            "p_visit": {"log_loss": 0.5, "log_loss_interval": INTERVAL,
                        "minus_recent_rate_4_interval": [-0.2, -0.1]},
            "recent_rate_4": {"log_loss": 0.6, "log_loss_interval": INTERVAL},
            "customer_weeks": 100,
            "visit_rate": 0.4,
        },
        "stores": {
            "predicted": {"accuracy": 0.7, "accuracy_interval": INTERVAL,
                          "minus_last_store_interval": [0.01, 0.02]},
            "last_store": {"accuracy": 0.6, "accuracy_interval": INTERVAL},
            "trips": 50,
            "half_life": 4.0,
            "validation_accuracy": {"4.0": 0.7},
        },
    }  # fmt: skip
    (tmp_path / "demand_forecast" / "scores.json").write_text(json.dumps(demand))
    (tmp_path / "trip_forecast" / "scores.json").write_text(json.dumps(trips))
    areas = area_tables(tmp_path, "all")
    assert set(areas) == {"demand", "trips"}  # no evaluation report: no next-basket area
    scores = areas["demand"][1]["scores"]
    rows = {r[1]: r for r in scores["rows"]}
    assert rows["seasonal_naive"][5] is None and rows["lightgbm_l1"][5].startswith("1.000")
    assert areas["demand"][1]["poisson_fe"]["rows"] == [["+0.700", "dropped"]]
    quantity = areas["demand"][1]["quantity"]["rows"]
    assert quantity[0][:3] == ["all", "quantity_model", 5] and quantity[1][6] is None
    assert areas["demand"][1]["quantity_fit"]["rows"] == [["-1.200", "dropped", 40, 1.3]]
    visits = areas["trips"][1]["visits"]["rows"]
    assert visits[1] == ["recent_rate_4", "0.6000", "+0.1000 … +0.2000", "-0.2000 … -0.1000"]
    assert "planted" not in areas["trips"][1] and "planted" not in areas["demand"][1]  # real data


def test_the_planted_responses_recovery_is_a_table_of_its_own(tmp_path):
    recovery = {"rows": 9, "correlation": 0.8, "correlation_interval": [0.7, 0.9],
                "planted_mean_lift": 1.1, "forecast_mean_lift": 1.05,
                "forecast_mean_lift_interval": [1.0, 1.1]}  # fmt: skip
    trips = {
        "visits": {"customer_weeks": 1, "visit_rate": 0.4},
        "stores": {"trips": 1, "half_life": 4.0},
        "planted_traffic": recovery,
    }
    (tmp_path / "trip_forecast").mkdir()
    (tmp_path / "trip_forecast" / "scores.json").write_text(json.dumps(trips))
    planted = area_tables(tmp_path, "all")["trips"][1]["planted"]
    assert planted["rows"] == [
        ["visits (the mailer)", 9, 0.8, "+0.7000 … +0.9000", 1.05, "+1.0000 … +1.1000", 1.1]
    ]


def test_simulated_basket_sizes_are_judged_against_the_ten_percent_target():
    from benchmarks.record_evaluation import simulation_table

    sim = {"baskets": 512, "simulated_mean_size": 9.2, "real_mean_size": 10.7,
           "mean_size_ratio": 9.2 / 10.7, "size_ks_statistic": 0.05,
           "size_total_variation": 0.1}  # fmt: skip
    (row,) = simulation_table(sim)["rows"]  # a check of before D131: the drawn baskets only
    assert row[:2] == ["drawn baskets", 512] and row[6] == "within 10%: not met"
    (row,) = simulation_table(sim | {"mean_size_ratio": 0.95})["rows"]
    assert row[6] == "within 10%: met"
    expected = {"expected_contexts": 6000, "expected_mean_size": 9.9,
                "expected_real_mean_size": 10.2, "expected_size_ratio": 9.9 / 10.2,
                "expected_size_ratio_interval": [0.95, 0.99]}  # fmt: skip
    drawn, head = simulation_table(sim | expected)["rows"]
    assert drawn[6] == "within 10%: not met" and head[1] == 6000
    assert head[5] == "0.950 … 0.990" and head[6] == "within 10%: met"


def test_slices_sort_their_numbers_as_numbers():
    names = ["week_100", "week_96", "test_105_117", "test_96_104", "all", "bucket_1"]
    assert sorted(names, key=natural_order) == [
        "all",
        "bucket_1",
        "test_96_104",
        "test_105_117",
        "week_96",
        "week_100",
    ]

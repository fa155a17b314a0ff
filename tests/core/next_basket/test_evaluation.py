"""The evaluation protocol end to end on the tiny world, and its metrics on literal inputs."""

import json
import math

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
import torch

from retailsim_core.baselines.sequential import SequentialConfig
from retailsim_core.models.world_model import WorldModelConfig
from retailsim_core.next_basket.eval_config import EvalConfig
from retailsim_core.pipeline.baseline_fitting import fit_baselines
from retailsim_core.pipeline.evaluation_run import evaluate
from retailsim_core.pipeline.world_model_training import train_world_model
from retailsim_core.tables import CHECKPOINT_TABLE, REPORT_TABLE
from retailsim_core.training.run.train_config import TrainConfig
from retailsim_core.training.scoring.metrics import next_basket_metrics

METHODS = {
    "world_model",
    "world_model | given mission",
    "G-TopFreq",
    "P-TopFreq",
    "GP-TopFreq",
    "Store-P-TopFreq",
    "Mission-P-TopFreq",
    "TIFU-KNN",
    "UP-CF@r",
    "SASRec",
    "BERT4Rec",
    "oracle",
    "oracle (no mission)",
}


@pytest.fixture(scope="module")
def report(tiny_warehouse):
    wh = tiny_warehouse["warehouse"]
    if not (wh.table_dir(CHECKPOINT_TABLE) / "model.safetensors").exists():
        train_world_model(
            wh, tiny_warehouse["split"], WorldModelConfig.preset("tiny"), TrainConfig.preset("tiny")
        )
    cfg = EvalConfig(
        max_test_samples=120,  # of 171: the cold-start slice also scores the rest (D72)
        max_valid_samples=150,
        chunk=128,
        bootstrap=200,
        week_slices=((12, 13), (14, 14)),
        sequential=SequentialConfig(max_epochs=2, max_len=40),
    )
    fit_baselines(wh, tiny_warehouse["split"], cfg)
    return evaluate(wh, tiny_warehouse["split"], tiny_warehouse["truth"], cfg), wh


@pytest.mark.slow
def test_metrics_json_has_every_method_task_and_slice(report):
    result, wh = report
    folder = wh.table_dir(REPORT_TABLE)
    metrics = json.loads((folder / "metrics.json").read_text())
    assert set(metrics) == {"next_basket", "masked_item"}
    assert set(metrics["next_basket"]["all"]) == METHODS
    for m in ("R@20", "NDCG@10", "P@10", "MRR", "R@5", "F1", "top3_hit", "category_coverage"):
        assert 0 <= metrics["next_basket"]["all"]["world_model"][m] <= 1
    assert {"Hit@10", "NDCG@10", "MRR"} <= set(metrics["masked_item"]["all"]["BERT4Rec"])
    # masked items: the co-purchase baseline sees the shown products; conditional rows have no
    # masked task
    assert "P-TopFreq + co-purchase" in metrics["masked_item"]["all"]
    assert "world_model | given mission" not in metrics["masked_item"]["all"]
    assert {"test_12_13", "test_14_14"} <= set(metrics["next_basket"])
    bounds = json.loads((folder / "intervals.json").read_text())
    for s in ("all", "test_12_13"):
        for m in METHODS:
            lo, hi = bounds["next_basket"][s][m]["R@20"]
            assert lo <= metrics["next_basket"][s][m]["R@20"] <= hi
        lo, hi = bounds["next_basket"][s]["world_model"]["diff_R@20"]
        assert lo == hi == 0.0  # a method minus itself
    assert {"cold_start", "all"} <= set(metrics["next_basket"]) and any(
        s.startswith("bucket_") for s in metrics["next_basket"]
    )
    long = pl.read_parquet(folder / "metrics.parquet")
    assert long.filter(
        (pl.col("method") == "world_model")
        & (pl.col("metric") == "R@20")
        & (pl.col("slice") == "all")
        & (pl.col("task") == "next_basket")
    )["value"][0] == pytest.approx(metrics["next_basket"]["all"]["world_model"]["R@20"])
    page = (folder / "report.html").read_text()
    assert "<svg" in page and "Verdict" in page and "calibration" in page and "<script" not in page
    assert "Price elasticities" in page and "Simulated baskets" in page
    assert "What each method sees" in page and "95%" in page
    assert (folder / "elasticities.parquet").exists() and report[0].price_response["own"].height > 0
    response = report[0].price_response
    assert -1 <= response["planted_spearman"] <= 1 and 0 <= response["own_negative_share"] <= 1
    assert "substitute_pairs" in response["substitution"] and "Spearman" in page
    tuning = json.loads((folder / "tuning.json").read_text())
    assert tuning["planted_elasticity_spearman"] == pytest.approx(response["planted_spearman"])
    assert (
        tuning["SASRec"]["patience"] >= 3
        and tuning["SASRec"]["epochs"] >= 1
        and "valid_curve" in tuning["BERT4Rec"]
    )
    sizes = tuning["simulated_sizes"]
    assert sum(sizes["real"]) == sum(sizes["simulated"]) == tuning["simulation"]["baskets"]
    observed = tuning["observed_response"]
    assert observed["weeks"] == [12, 14] and "Against held-out promotions" not in page  # D109
    assert "own_spearman" in observed or "note" in observed
    if "own_spearman" in observed:
        assert -1 <= observed["own_spearman"] <= 1 and len(observed["own_spearman_ci"]) == 2


def test_planted_agreement_on_a_literal_table():
    from retailsim_core.response.price_response import planted_agreement

    own = pl.DataFrame(
        {
            "product_id": ["a", "b", "c", "d", "e"],
            "model_elasticity": [-2.0, -1.5, -1.0, 0.2, -0.1],
            "planted_elasticity": [-3.0, -2.0, -1.5, -1.0, None],
        }
    )
    got = planted_agreement(own)
    assert got["planted_products"] == 4  # the product without truth is left out
    assert got["own_negative_share"] == pytest.approx(0.75)
    assert got["planted_spearman"] == pytest.approx(1.0)  # same order
    assert got["planted_correlation"] == pytest.approx(
        np.corrcoef([-2, -1.5, -1, 0.2], [-3, -2, -1.5, -1])[0, 1]
    )


@pytest.mark.slow
def test_oracle_is_the_ceiling_and_popularity_the_floor(report):
    nb = report[0].metrics["next_basket"]["all"]
    assert (
        nb["oracle"]["R@20"]
        >= max(v["R@20"] for k, v in nb.items() if not k.startswith("oracle")) - 0.02
    )
    assert (
        nb["oracle"]["R@20"] >= nb["oracle (no mission)"]["R@20"] - 0.02
    )  # knowing the mission helps
    assert nb["P-TopFreq"]["R@20"] > nb["G-TopFreq"]["R@20"]  # repeat-dominated baskets


def test_next_basket_metrics_on_a_literal_ranking():
    # 1 sample, vocabulary 0..24 (0 PAD, 23 MASK, 24 EOS); truth {1, 2, 3}; ranking 1, 5, 2, 6, ...
    scores = torch.full((1, 25), -1.0, dtype=torch.float64)
    for rank, token in enumerate(
        [1, 5, 2, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22]
    ):
        scores[0, token] = 100 - rank
    truth = sp.csr_matrix(np.isin(np.arange(25), [1, 2, 3])[None].astype(np.float32))
    repeat = sp.csr_matrix(np.isin(np.arange(25), [1])[None].astype(np.float32))
    m = next_basket_metrics(
        scores, truth, repeat=repeat, basket_len=np.array([2]), categories=np.arange(25) // 2
    )
    assert m["P@5"][0] == pytest.approx(2 / 5) and m["R@5"][0] == pytest.approx(2 / 3)
    ndcg10 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3) + 1 / math.log2(4))
    assert m["NDCG@10"][0] == pytest.approx(ndcg10) and m["MRR"][0] == 1.0
    assert m["F1"][0] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))  # predicted {1, 5}
    assert m["R@20_repeat"][0] == 1.0 and m["R@20_explore"][0] == pytest.approx(0.5)
    assert m["top3_hit"][0] == 1.0


def test_own_uplift_on_literal_cells():
    from retailsim_core.graph.substitution import PROMOTION_CELLS_SCHEMA
    from retailsim_core.response.observed_response import own_uplift

    # store S1: on promotion in week 2 (depth 0.3) with 7 units, off it weeks 1, 3 with 2 and 4
    # units; store S2: never promoted (no uplift to measure there); an imputed promotion week
    # (not observed) does not count as a promotion store-week.
    rows = [
        ("A", "S1", 1, False, True, 2, 0.0),
        ("A", "S1", 2, True, True, 7, 0.3),
        ("A", "S1", 3, False, True, 4, 0.0),
        ("A", "S1", 4, True, False, 0, 0.3),
        ("A", "S2", 1, False, True, 5, 0.0),
    ]
    cells = pl.DataFrame(rows, schema=list(PROMOTION_CELLS_SCHEMA.items()), orient="row").lazy()
    got = own_uplift(cells)
    assert got["product_id"].to_list() == ["A"] and got["promo_store_weeks"].to_list() == [1]
    assert got["observed_uplift"][0] == pytest.approx(math.log((7 + 1) / (3 + 1)))
    assert got["depth"][0] == pytest.approx(0.3)


@pytest.mark.slow
def test_cold_start_slice_holds_every_cold_start_test_basket(report):
    """The sample keeps its size for every other slice; the cold-start slice is every cold-start
    test basket, the sample's and the rest (D72)."""
    from retailsim_core.datasets.sample_buckets import SAMPLES_SCHEMA
    from retailsim_core.pipeline.data.training_data_weeks import SAMPLES_TABLE

    _, wh = report
    tuning = json.loads((wh.table_dir(REPORT_TABLE) / "tuning.json").read_text())
    samples = wh.scan(SAMPLES_TABLE, schema=SAMPLES_SCHEMA).collect()
    test = samples.filter(pl.col("split") == "test")
    sizes = tuning["slice_baskets"]
    assert sizes["all"] == tuning["test_samples"] == 120 < test.height
    assert sizes["cold_start"] == test["is_cold_start"].sum() > 0
    assert 0 < tuning["cold_start_outside_sample"] < sizes["cold_start"]
    assert sum(sizes[s] for s in sizes if s.startswith("bucket_")) == sizes["all"]
    page = (wh.table_dir(REPORT_TABLE) / "report.html").read_text()
    assert "every cold-start test basket" in page


@pytest.mark.slow
def test_promotion_events_are_test_weeks_known_before_the_sales(report, tiny_warehouse):
    """The D76 check: events of test weeks only, promotions from the planted calendar (the
    truth is bound here), baselines fitted on training and validation weeks (never a test
    week), every method's two predictions and the report's section."""
    result, wh = report
    split = tiny_warehouse["split"]
    folder = wh.table_dir(REPORT_TABLE)
    summary = result.tuning["price_events"]
    events = pl.read_parquet(folder / "price_events.parquet")
    assert summary["source"] == "planted calendar"
    assert events.height == summary["events"] > 0
    assert events["week"].min() > split.valid_end
    first, last = summary["fitted_weeks"]
    assert first <= split.train_end < last <= split.valid_end
    units = [c for c in events.columns if c.endswith("units") or c.endswith("promotion")]
    assert set(units) >= {"observed_units", "predicted_units", "predicted_units_no_promotion"}
    assert all((events[c] >= 0).all() for c in units)
    assert (events["no_response_units"] == events["no_response_units_no_promotion"]).all()
    assert set(summary["methods"]) == {
        "world_model",
        "hierarchical_loglog",
        "constant_elasticity",
        "no_response",
    }
    products = pl.read_parquet(folder / "price_event_products.parquet")
    assert products.height == summary["methods"]["world_model"]["products"]
    bins = summary["calibration_bins"]["world_model"]
    assert 0 < len(bins) <= 10 and sum(b["events"] for b in bins) == products["events"].sum()
    assert summary["promotional_elasticity"]["products"] >= 0
    page = (folder / "report.html").read_text()
    assert "Promotion events known before the sales" in page and "Elasticity realism" in page


@pytest.mark.slow
def test_with_the_truth_bound_the_events_are_scored_against_the_planted_demand(report):
    """The protocol hands the bound truth to the events: planted units per event and every
    method's figures against them."""
    result, wh = report
    events = result.price_response["events"]
    assert events["events"] > 0 and set(events["planted"]["methods"]) == set(events["methods"])
    table = pl.read_parquet(wh.table_dir(REPORT_TABLE) / "price_events.parquet")
    on, off = table["planted_units"], table["planted_units_no_promotion"]
    assert (on >= 0).all() and (off >= 0).all() and on.sum() > 0
    assert "Against the planted demand" in (wh.table_dir(REPORT_TABLE) / "report.html").read_text()

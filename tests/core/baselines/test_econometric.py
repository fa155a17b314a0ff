"""The econometric baselines: the hierarchical log-log model recovers planted responses and
shrinks a rarely promoted product toward its category; the meta-analytic elasticity's arithmetic."""

import math

import numpy as np
import polars as pl
import pytest

from retailsim_core.baselines.econometric import (
    HierarchicalLogLog,
    constant_elasticity_units,
    unpromoted_level,
)
from retailsim_core.baselines.panel_sums import PanelSums
from retailsim_core.response.promotion_events import PANEL_SCHEMA

# Planted: log(units + 1) = level[p, s] + week effect + response[p] * promoted (+ noise).
RESPONSE = {"A": 0.8, "B": 0.4, "C": 0.6, "D": 0.2}
CATEGORY = {"A": "c1", "B": "c1", "C": "c2", "D": "c2"}


def _panel(noise: float, rare: str | None = None, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for p, beta in RESPONSE.items():
        for s in range(6):
            level = 1.0 + 0.3 * s + (0.5 if p in "AC" else 0.0)
            for w in range(1, 41):
                promoted = (w + s) % 5 == 0 and (p != rare or (w, s) == (5, 0))
                y = level + 0.1 * math.sin(w) + beta * promoted + rng.normal(0, noise)
                kind = "display" if promoted else None
                rows.append((p, f"S{s}", w, math.exp(y) - 1, promoted, kind, None))
    return pl.DataFrame(rows, schema=PANEL_SCHEMA, orient="row")


def _categories() -> pl.DataFrame:
    return pl.DataFrame({"product_id": list(CATEGORY), "category": list(CATEGORY.values())})


def test_the_planted_responses_and_levels_are_recovered():
    model = HierarchicalLogLog.fit(_panel(noise=0.02), _categories(), shrinkage=1.0)
    assert model.kinds == ("display",)
    beta = dict(zip(model.responses["product_id"], model.responses["beta_0"], strict=True))
    for p, planted in RESPONSE.items():
        assert beta[p] == pytest.approx(planted, abs=0.03)
    events = pl.DataFrame(
        {"product_id": ["A", "D"], "store_id": ["S2", "S2"], "week": [50, 50]},
    ).with_columns(kind=pl.lit("display"), depth=pl.lit(None, pl.Float64))
    out = model.predict(events)
    lift = np.log((out["units_promoted"] + 1) / (out["units_unpromoted"] + 1)).to_list()
    assert lift == pytest.approx([RESPONSE["A"], RESPONSE["D"]], abs=0.03)
    # the unpromoted level is the store's level at an average week: 1 + 0.3 * 2 (+ 0.5 for A)
    base = np.log(out["units_unpromoted"] + 1).to_list()
    assert base == pytest.approx([2.1, 1.6], abs=0.05)


def test_a_product_promoted_once_borrows_its_categorys_response():
    panel = _panel(noise=0.02, rare="B")  # B: one promoted week; its category mate A: many
    few = HierarchicalLogLog.fit(panel, _categories(), shrinkage=10.0)
    beta = dict(zip(few.responses["product_id"], few.responses["beta_0"], strict=True))
    # One observation against ten pseudo-observations of c1's response (mostly A's 0.8).
    assert beta["B"] > 0.65 and beta["B"] > RESPONSE["B"] + 0.2
    no_pool = HierarchicalLogLog.fit(panel, _categories(), shrinkage=1e-6)
    alone = dict(zip(no_pool.responses["product_id"], no_pool.responses["beta_0"], strict=True))
    assert alone["B"] == pytest.approx(RESPONSE["B"], abs=0.06)  # its own single week


def test_an_unseen_product_gets_the_pooled_response_and_no_level():
    model = HierarchicalLogLog.fit(_panel(noise=0.02), _categories())
    events = pl.DataFrame(
        {"product_id": ["Z"], "store_id": ["S0"], "week": [50], "kind": ["display"]}
    ).with_columns(depth=pl.lit(None, pl.Float64))
    out = model.predict(events)
    shift = math.log((out["units_promoted"][0] + 1) / (out["units_unpromoted"][0] + 1))
    assert shift == pytest.approx(float(model.pooled[0]))


def test_constant_elasticity_and_unpromoted_levels():
    base = np.array([10.0, 10.0, 4.0])
    out = constant_elasticity_units(base, np.array([0.2, np.nan, 0.5]))
    assert out.tolist() == pytest.approx([10.0 * 0.8**-2.6, 10.0, 4.0 * 0.5**-2.6])
    panel = pl.DataFrame(
        [("A", "S1", 1, 2.0, False, None, None), ("A", "S1", 2, 9.0, True, "x", None)]
        + [("A", "S2", 1, 4.0, False, None, None)],
        schema=PANEL_SCHEMA,
        orient="row",
    )
    events = pl.DataFrame({"product_id": ["A", "A", "B"], "store_id": ["S1", "S3", "S1"]})
    assert unpromoted_level(panel, events).tolist() == [2.0, 3.0, 0.0]


def test_the_fit_is_the_same_bytes_in_any_row_order_and_predictions_follow_their_rows():
    panel = _panel(noise=0.05)
    shuffled = panel.sample(fraction=1.0, shuffle=True, seed=3)
    a = HierarchicalLogLog.fit(panel, _categories())
    b = HierarchicalLogLog.fit(shuffled, _categories())
    assert a.responses.equals(b.responses) and a.week_mean == b.week_mean
    events = panel.filter(pl.col("promo")).head(40).select("product_id", "store_id", "week")
    events = events.with_columns(kind=pl.lit("display"), depth=pl.lit(None, pl.Float64))
    forward = a.predict(events)
    backward = a.predict(events.reverse())
    assert forward["units_promoted"].to_list() == backward["units_promoted"].reverse().to_list()


def test_a_panel_with_coded_keys_and_kind_fits_the_same():
    """The promotion-event check hands the fit its cells' keys and kind as Categorical (D124)."""
    panel = _panel(noise=0.05)
    coded = panel.with_columns(pl.col("product_id", "store_id", "kind").cast(pl.Categorical))
    a, b = (HierarchicalLogLog.fit(p, _categories()) for p in (panel, coded))
    assert a.kinds == b.kinds and a.levels.equals(b.levels) and a.responses.equals(b.responses)
    events = panel.filter(pl.col("promo")).head(40).select("product_id", "store_id", "week")
    events = events.with_columns(kind=pl.lit("display"), depth=pl.lit(None, pl.Float64))
    assert a.predict(events).equals(b.predict(events))
    assert (unpromoted_level(panel, events) == unpromoted_level(coded, events)).all()


@pytest.mark.slow
def test_the_same_panel_gives_the_same_fit_to_the_bit(large_random_panel):
    """Week effects, levels and responses are summed in a fixed order: the same bytes."""
    cats = pl.DataFrame({"product_id": [str(i) for i in range(3000)]}).with_columns(
        category=(pl.col("product_id").cast(pl.Int64) % 40).cast(pl.String)
    )
    events = large_random_panel.filter(pl.col("promo")).head(20_000)
    first = HierarchicalLogLog.fit(large_random_panel, cats).predict(events)
    for _ in range(3):
        assert HierarchicalLogLog.fit(large_random_panel, cats).predict(events).equals(first)


def test_week_effects_and_levels_are_the_documented_means():
    """Oracle: Polars' window mean and group-by (the fit's first construction) give the same
    week effects and levels as the sums of ``PanelSums``, up to rounding, whether the panel is
    summed at once or a product group at a time (D125)."""
    panel = _panel(noise=0.3, seed=4).sample(fraction=1.0, shuffle=True, seed=1)
    off = (
        panel.lazy()
        .filter(~pl.col("promo"))
        .select("product_id", "store_id", "week", y=(pl.col("units") + 1).log())
    )
    pair = ["product_id", "store_id"]
    centred = off.with_columns(centred=pl.col("y") - pl.col("y").mean().over(pair))
    want_weeks = centred.group_by("week").agg(pl.col("centred").mean().alias("effect"))
    want_weeks = want_weeks.sort("week").collect()
    want = (
        off.join(want_weeks.lazy(), on="week")
        .group_by(pair)
        .agg(level=(pl.col("y") - pl.col("effect")).mean())
        .sort(pair)
        .collect()
    )
    ordered = panel.sort(*pair, "week")
    groups = [ordered.filter(pl.col("product_id").is_in(g)) for g in (["A", "B"], ["C"], ["D"])]
    for sums in (PanelSums.of(panel), PanelSums.concat([PanelSums.of_sorted(g) for g in groups])):
        weeks, levels = sums.week_effects_and_levels()
        assert weeks["week"].equals(want_weeks["week"])
        assert np.allclose(weeks["effect"], want_weeks["effect"], atol=1e-12)
        assert levels.select(pair).equals(want.select(pair))
        assert np.allclose(levels["level"], want["level"], atol=1e-12)
    empty = PanelSums.of(panel.filter(~pl.col("promo")).head(0))
    assert empty.week_effects_and_levels()[1].height == 0  # no unpromoted cell: nothing


def test_the_fit_and_levels_read_the_same_from_the_panel_and_its_sums():
    panel = _panel(noise=0.05)
    coded = panel.with_columns(pl.col("product_id", "store_id", "kind").cast(pl.Categorical))
    a = HierarchicalLogLog.fit(panel, _categories())
    b = HierarchicalLogLog.fit(PanelSums.of(coded), _categories())
    assert a.kinds == b.kinds and a.levels.equals(b.levels) and a.responses.equals(b.responses)
    events = panel.filter(pl.col("promo")).head(40).select("product_id", "store_id", "week")
    assert (unpromoted_level(panel, events) == unpromoted_level(PanelSums.of(coded), events)).all()

"""Promotion events: the panel counts weeks that sold nothing, lifts are the documented ratio,
the split-half ceiling sees consistent lifts and rejects noise."""

import math

import numpy as np
import polars as pl
import polars.selectors as cs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.baselines.panel_sums import PanelSums
from retailsim_core.graph.substitution import PROMOTION_CELLS_SCHEMA
from retailsim_core.ingest.promotion_plan import SOURCE_PROMOTIONS_SCHEMA
from retailsim_core.response.promotion_events import (
    CELL,
    PANEL_SCHEMA,
    PROMOTIONS_SCHEMA,
    SALES_SCHEMA,
    basket_sales,
    check_panels,
    panel_groups,
    planted_promotions,
    product_lifts,
    promotion_events,
    regional_promotions,
    sales_panel,
    split_half_ceiling,
    table_promotions,
)


def _sales(rows):
    return pl.LazyFrame(rows, schema=SALES_SCHEMA, orient="row")


def _promos(rows):
    return pl.LazyFrame(rows, schema=PROMOTIONS_SCHEMA, orient="row")


def test_the_panel_fills_every_week_of_the_span_and_keeps_promotions_that_sold_nothing():
    sales = _sales([("A", "S1", 1, 2.0), ("A", "S1", 4, 3.0), ("B", "S1", 2, 1.0)])
    promos = _promos(
        [("A", "S1", 2, "display", None), ("A", "S1", 9, "mailer", None), ("B", "S2", 2, "x", 0.2)]
    )
    panel = sales_panel(sales, promos).collect()
    assert panel.schema == PANEL_SCHEMA
    a = panel.filter(pl.col("product_id") == "A")
    assert a["week"].to_list() == [1, 2, 3, 4]  # week 9 is outside A's span at S1
    assert a["units"].to_list() == [2.0, 0.0, 0.0, 3.0]
    assert a["promo"].to_list() == [False, True, False, False]  # promoted, sold nothing
    assert panel.filter(pl.col("product_id") == "B").height == 1  # B never sold at S2


@settings(max_examples=40, deadline=None)
@given(
    sales=st.lists(
        st.tuples(
            st.sampled_from("ABCDEFG"),
            st.sampled_from(["S1", "S2", "S3"]),
            st.integers(1, 9),
            st.integers(1, 5),
        ),
        max_size=40,
    ),  # fmt: skip
    promoted=st.lists(
        st.tuples(
            st.sampled_from("ABCDEFG"), st.sampled_from(["S1", "S2", "S3"]), st.integers(1, 9)
        ),
        max_size=20,
        unique=True,
    ),  # fmt: skip
    rows=st.integers(1, 12),
    through=st.sampled_from([None, 6, 9]),
)
def test_the_panel_in_groups_of_products_is_the_panel(sales, promoted, rows, through):
    """Oracle: ``panel_groups`` concatenated equals ``sales_panel`` at once, whatever the group
    size (a group boundary never splits a product's cells)."""
    cells = _sales([(p, s, w, float(u)) for p, s, w, u in sales]).unique(CELL).collect()
    promos = _promos([(p, s, w, "display", 0.1 * w) for p, s, w in promoted])
    whole = sales_panel(cells.lazy(), promos, through).collect()
    groups = list(panel_groups(cells, promos, through, cells=rows))
    assert pl.concat(groups).equals(whole)
    # A group holds about ``cells`` panel cells: at most that and its last product's (D126).
    largest = whole.group_by("product_id").len()["len"].max() or 0
    assert all(g.height < rows + largest for g in groups if g.height)
    # What a check reads, split a group at a time: the period's cells and the coded earlier ones.
    weeks = [6, 7, 8, 9]
    period, before, stores = check_panels(panel_groups(cells, promos, through, cells=rows), weeks)
    cut = whole.filter(pl.col("week").is_in(weeks))
    promoted = cut.filter(pl.col("promo")).select("product_id", "store_id").unique()
    assert period.equals(cut.join(promoted, on=["product_id", "store_id"], how="semi"))
    assert stores.to_list() == sorted(whole["store_id"].unique().to_list())
    # Events, lifts and the ceiling read the same from the cut as from the whole panel.
    assert promotion_events(period.lazy(), weeks).equals(promotion_events(whole.lazy(), weeks))
    assert product_lifts(period.lazy(), weeks).equals(product_lifts(whole.lazy(), weeks))
    ceiling = split_half_ceiling(period.lazy(), weeks, stores=stores)
    assert ceiling == split_half_ceiling(whole.lazy(), weeks)
    # The earlier cells summed a group at a time hold what the whole panel's do (D125).
    earlier = PanelSums.of(whole.filter(pl.col("week") < 6))
    assert before.pairs.select("product_id", "store_id", "n").equals(
        earlier.pairs.select("product_id", "store_id", "n")
    )
    assert np.allclose(before.pairs["units_sum"], earlier.pairs["units_sum"])
    assert before.promoted.equals(earlier.promoted) and before.weeks() == earlier.weeks()
    for got, want in zip(
        before.week_effects_and_levels(), earlier.week_effects_and_levels(), strict=True
    ):
        assert got.drop(cs.float()).equals(want.drop(cs.float()))
        assert np.allclose(got.select(cs.float()), want.select(cs.float()), atol=1e-12)


def test_a_cell_is_checked_when_its_product_sold_at_its_store_before_it():
    """Through week 8: A at S1 (sold in 2, 6) holds 3-8 with week 6's sale; B at S1 (sold in 1,
    3, never after) holds 2-8, unsold from week 4 on; C at S1 (sold only in 8) holds nothing: a
    span's first sale is never one of its cells, and no span ends at a sale."""
    sales = _sales(
        [("A", "S1", 2, 1.0), ("A", "S1", 6, 4.0), ("B", "S1", 1, 1.0), ("B", "S1", 3, 2.0)]
        + [("C", "S1", 8, 1.0)]
    )
    promos = _promos([("A", "S1", 6, "display", None), ("B", "S1", 8, "mailer", None)])
    panel = sales_panel(sales, promos, through=8).collect()
    assert panel.schema == PANEL_SCHEMA
    a, b = (panel.filter(pl.col("product_id") == x) for x in ("A", "B"))
    assert a["week"].to_list() == [3, 4, 5, 6, 7, 8]
    assert a["units"].to_list() == [0.0, 0.0, 0.0, 4.0, 0.0, 0.0]
    assert b["week"].to_list() == list(range(2, 9)) and b["units"].sum() == 2.0
    assert panel.filter(pl.col("product_id") == "C").height == 0
    events = promotion_events(panel.lazy(), [5, 6, 7, 8])
    assert events.select("product_id", "week", "units").rows() == [("A", 6, 4.0), ("B", 8, 0.0)]


@pytest.mark.parametrize("seed", range(5))
def test_whether_a_cell_is_in_the_panel_depends_on_earlier_weeks_only(seed):
    """Redrawing the sales of weeks >= 9 moves their units, never which of their cells are in
    the panel; nor does the week-9 redraw move week 9's cells (a cell never selects itself)."""

    def sales(later_seed):
        early, late = np.random.default_rng(seed), np.random.default_rng(later_seed)
        rows = [
            (f"P{p}", f"S{s}", w, 1.0)
            for p in range(6)
            for s in range(3)
            for w in range(1, 13)
            if (early if w < 9 else late).random() < 0.3
        ]
        return _sales(rows)

    promos = _promos([("P1", "S1", 10, "display", None)])
    cells = [
        sales_panel(sales(later), promos, through=12)
        .collect()
        .filter(pl.col("week") == 9)
        .select(CELL)
        .rows()
        for later in (100, 101)
    ]
    assert cells[0] == cells[1] and len(cells[0]) > 0


def test_lifts_and_events_on_a_literal_panel():
    # A at S1: weeks 1-4 units 2, 0 (promoted), 6 (promoted), 2 -> on 3, off 2.
    # A at S2: weeks 1-2 units 1 (promoted), 1 -> log(2 / 2) = 0, one event.
    sales = _sales(
        [("A", "S1", 1, 2.0), ("A", "S1", 3, 6.0), ("A", "S1", 4, 2.0)]
        + [("A", "S2", 1, 1.0), ("A", "S2", 2, 1.0), ("C", "S1", 1, 5.0)]
    )
    promos = _promos(
        [("A", "S1", 2, "display", 0.1), ("A", "S1", 3, "display", 0.3)]
        + [("A", "S2", 1, "mailer", None), ("C", "S1", 1, "display", None)]
    )
    panel = sales_panel(sales, promos)
    events = promotion_events(panel, [1, 2, 3, 4])
    # C at S1 is promoted in its only week: no week to compare with, so no event.
    assert events.select("product_id", "store_id", "week").rows() == [
        ("A", "S1", 2),
        ("A", "S1", 3),
        ("A", "S2", 1),
    ]
    lifts = product_lifts(panel, [1, 2, 3, 4])
    assert lifts["product_id"].to_list() == ["A"]
    expected = (2 * math.log(4 / 3) + 1 * 0.0) / 3
    assert lifts["lift"][0] == pytest.approx(expected)
    assert (lifts["events"][0], lifts["stores"][0]) == (3, 2)
    assert lifts["depth"][0] == pytest.approx(0.2)  # S1's mean cut; S2's is unknown
    # A period without A's promoted weeks has no event and no lift.
    assert promotion_events(panel, [4]).height == 0 and product_lifts(panel, [4]).height == 0


def _consistent_panel(noise: float, seed: int) -> pl.LazyFrame:
    """20 products x 8 stores x 12 weeks; product p's promotion multiplies units by 1 + p / 4
    (every third week promoted), plus multiplicative noise."""
    rng = np.random.default_rng(seed)
    rows, promos = [], []
    for p in range(20):
        for s in range(8):
            for w in range(1, 13):
                on = w % 3 == 0
                mean = 10.0 * (1 + p / 4 if on else 1.0)
                rows.append((f"P{p:02d}", f"S{s}", w, float(mean * rng.lognormal(0, noise))))
                if on:
                    promos.append((f"P{p:02d}", f"S{s}", w, "display", None))
    return sales_panel(_sales(rows), _promos(promos))


def test_the_split_half_ceiling_is_high_for_consistent_lifts_and_low_for_noise():
    weeks = list(range(1, 13))
    clean = split_half_ceiling(_consistent_panel(0.01, 0), weeks)
    assert clean["products"] == 20 and clean["split_half"] > 0.95 and clean["ceiling"] > 0.97
    noise = _consistent_panel(0.0, 1).with_columns(
        units=pl.Series(np.random.default_rng(2).lognormal(2, 1, 20 * 8 * 12))
    )
    noisy = split_half_ceiling(noise, weeks)
    assert abs(noisy["split_half"]) < 0.6  # a random order across halves
    assert split_half_ceiling(_consistent_panel(0.0, 0), [1])["split_half"] is None


def test_basket_sales_count_the_given_baskets_holding_each_product():
    trips = pl.DataFrame(
        {
            "basket_id": [1, 2, 3, 4],
            "store_id": ["S1", "S1", "S1", "S2"],
            "week": pl.Series([5, 5, 6, 5], dtype=pl.Int16),
            "products": [["A", "B"], ["A"], ["A"], ["A"]],
        }
    )
    sales = basket_sales(trips, pl.Series([1, 2, 3])).collect().sort(CELL)
    assert sales.schema == SALES_SCHEMA
    assert sales.rows() == [("A", "S1", 5, 2.0), ("A", "S1", 6, 1.0), ("B", "S1", 5, 1.0)]


def test_planted_promotions_reach_every_store_of_their_region():
    calendar = pl.DataFrame(
        {"week": [3], "product_id": ["A"], "store_region": ["E01"], "depth": [0.25]}
    )
    stores = pl.DataFrame({"store_id": ["S1", "S2", "S3"], "store_region": ["E01", "E01", "W02"]})
    got = planted_promotions(calendar, stores).collect().sort("store_id")
    assert got.schema == PROMOTIONS_SCHEMA
    assert got.rows() == [("A", "S1", 3, "price", 0.25), ("A", "S2", 3, "price", 0.25)]


def test_regional_promotions_never_read_the_cells_own_promotion():
    # Week 7, region E01: S1 and S2 observed A on promotion (depths 0.2 and 0.4), S3 did not;
    # S4 (W02) on promotion alone in its region.
    cells = pl.LazyFrame(
        [
            ("A", "S1", 7, True, True, 3, 0.2),
            ("A", "S2", 7, True, True, 1, 0.4),
            ("A", "S3", 7, False, True, 0, None),
            ("A", "S4", 7, True, True, 9, 0.3),
        ],
        schema=PROMOTION_CELLS_SCHEMA,
        orient="row",
    )
    stores = pl.DataFrame(
        {"store_id": ["S1", "S2", "S3", "S4"], "store_region": ["E01", "E01", "E01", "W02"]}
    )
    got = regional_promotions(cells, stores).collect().sort("store_id")
    assert got.schema == PROMOTIONS_SCHEMA
    # S1 sees S2's promotion, S2 sees S1's, S3 sees both; S4 has no other store: not an event.
    assert got.select("store_id", "depth").rows() == [
        ("S1", pytest.approx(0.4)),
        ("S2", pytest.approx(0.2)),
        ("S3", pytest.approx(0.3)),
    ]


def test_a_source_without_regions_is_one_zone():
    cells = pl.LazyFrame(
        [("A", "S1", 7, True, True, 3, 0.2), ("A", "S2", 7, False, True, 0, None)],
        schema=PROMOTION_CELLS_SCHEMA,
        orient="row",
    )
    stores = pl.DataFrame(
        {"store_id": ["S1", "S2"], "store_region": [None, None]},
        schema_overrides={"store_region": pl.String},
    )
    got = regional_promotions(cells, stores).collect()
    assert got.select("store_id", "depth").rows() == [("S2", pytest.approx(0.2))]


def test_table_promotions_name_the_kind_and_take_the_depth_from_other_stores():
    cells = pl.LazyFrame(
        [
            (7, "A", "S1", True, False, "3", "0", 1),
            (7, "A", "S2", False, True, "0", "A", 1),
            (7, "B", "S1", True, True, "5", "D", 2),
        ],
        schema=SOURCE_PROMOTIONS_SCHEMA,
        orient="row",
    )
    depths = _promos([("A", "S2", 7, "price", 0.25)])
    got = table_promotions(cells, depths).collect().sort(CELL)
    assert got.schema == PROMOTIONS_SCHEMA
    assert got.rows() == [
        ("A", "S1", 7, "display", None),
        ("A", "S2", 7, "mailer", 0.25),
        ("B", "S1", 7, "display+mailer", None),
    ]


def test_the_same_panel_gives_the_same_lifts_to_the_bit(large_random_panel):
    """A product's lift adds its stores up in a fixed order (a group_by's is not)."""
    panel = large_random_panel.lazy()
    weeks = list(range(70, 96))
    first = product_lifts(panel, weeks)
    for _ in range(3):
        assert product_lifts(panel, weeks).equals(first)

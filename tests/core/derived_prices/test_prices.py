"""Price derivation formulas on hand-made frames (design §2.2.2)."""

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_series_equal

from retailsim_core.derived_prices import VALIDATION_FLAG_BITS, PriceConfig, observed_prices
from retailsim_core.derived_prices.cells import advance
from retailsim_core.derived_prices.state import CellState

CFG = PriceConfig()


def raw(rows):
    """rows: (week, product, store, region, format, spend, quantity[, regular_spend])."""
    return pl.DataFrame(
        [(*r, None) if len(r) == 7 else r for r in rows],
        schema={
            "week": pl.Int16,
            "product_id": pl.String,
            "store_id": pl.String,
            "store_region": pl.String,
            "store_format": pl.String,
            "spend": pl.Float64,
            "quantity": pl.Int32,
            "regular_spend": pl.Float64,
        },
        orient="row",
    )


def run(rows, weeks):
    """Derive every week in ``weeks`` from raw rows; returns {week: table}."""
    frames, state = {}, CellState(CFG)
    data = raw(rows)
    for w in weeks:
        frames[w] = advance(
            state, observed_prices(data.filter(pl.col("week") == w).lazy()).collect(), w
        )
    return frames


def flags_of(row) -> dict[str, bool]:
    return {name: bool(row["validation_flags"] & bit) for name, bit in VALIDATION_FLAG_BITS.items()}


def cell(frames, week, store, product="PRD0000001"):
    row = frames[week].filter((pl.col("store_id") == store) & (pl.col("product_id") == product))
    assert row.height == 1, f"no single cell {product}@{store} in week {week}"
    return row.row(0, named=True)


P, S1, S2, S3 = "PRD0000001", "STORE00001", "STORE00002", "STORE00003"


def test_actual_price_is_the_median_unit_price():
    frames = run(
        [
            (1, P, S1, "E01", "LS", 2.00, 1),
            (1, P, S1, "E01", "LS", 4.00, 2),
            (1, P, S1, "E01", "LS", 2.40, 2),
        ],
        [1],
    )
    assert cell(frames, 1, S1)["actual_price"] == pytest.approx(2.0)  # median of 2.0, 2.0, 1.2
    assert cell(frames, 1, S1)["n_lines"] == 3 and cell(frames, 1, S1)["units"] == 5


ROWS = [
    (1, P, S1, "E01", "LS", 2.00, 1),
    (2, P, S1, "E01", "LS", 2.00, 1),
    (3, P, S1, "E01", "LS", 1.50, 1),
    (5, P, S1, "E01", "LS", 2.00, 1),
    (3, P, S2, "E01", "LS", 1.50, 1),
    (5, P, S2, "E01", "LS", 2.00, 1),
]


def test_base_price_is_the_four_week_max_and_reference_finds_the_promotion():
    f = run(ROWS, range(1, 8))
    s1 = cell(f, 3, S1)
    assert s1["base_price"] == 2.0 and s1["reference_price"] == 2.0
    assert s1["discount_depth"] == pytest.approx(0.25) and s1["promo_flag"]
    # Store 2 first sold the product on promotion: its own 4-week max sees no discount, the
    # zone (same region and format) reference does.
    s2 = cell(f, 3, S2)
    assert s2["base_price"] == 1.5 and s2["base_discount_depth"] == 0.0
    assert s2["reference_price"] == 2.0 and s2["promo_flag"]
    # Week 7: the 4-week window w4..w7 holds 1.8333 (imputed), 2.0, then imputed 1.875s.
    assert cell(f, 7, S1)["base_price"] == pytest.approx(2.0)


def test_waterfall_order_and_no_future():
    rows = ROWS + [(1, P, S3, "N01", "MS", 3.00, 1), (20, P, S2, "E01", "LS", 2.10, 1)]
    f = run(rows, range(1, 21))
    w4 = cell(f, 4, S1)  # level 2: the cell's mean over its recent weeks
    assert w4["imputation_method"] == "product_store_mean"
    assert w4["actual_price"] == pytest.approx((2.0 + 2.0 + 1.5) / 3) and not w4["promo_flag"]
    assert cell(f, 1, S1)["imputation_method"] == "observed"
    # Store 3 last sold the product in week 1: by week 20 its recent window is empty, and the
    # product sells in store 3's region? No -> level 4, the chain mean of weeks <= 20.
    s3 = cell(f, 20, S3)
    assert s3["imputation_method"] == "product_chain_mean"
    chain = [2.0, 2.0, 1.5, 2.0, 1.5, 2.0, 3.0, 2.10]
    assert s3["actual_price"] == pytest.approx(sum(chain) / len(chain))
    # Store 1 in week 20: recent window (w8..w20) empty too, but the product sold in region
    # E01 that week -> level 3.
    s1 = cell(f, 20, S1)
    assert s1["imputation_method"] == "product_region_week_mean" and s1[
        "actual_price"
    ] == pytest.approx(2.10)


def test_assortment_is_pairs_sold_to_date():
    f = run(ROWS, range(1, 6))
    assert f[2]["store_id"].to_list() == [S1]  # store 2 has not sold it yet
    assert sorted(f[3]["store_id"].to_list()) == [S1, S2]


def test_validation_flags():
    rows = [
        (1, P, S1, "E01", "LS", 150.0, 1),
        (2, P, S1, "E01", "LS", 40.0, 1),
        (3, P, S1, "E01", "LS", 150.0, 1),
    ]
    f = run(rows, range(1, 5))

    def flags(w):
        return flags_of(cell(f, w, S1))

    assert flags(1)["price_over_max"] and not flags(1)["price_nonpositive"]
    assert flags(2)["depth_over_max"]  # 40 vs 150: 73% off
    assert flags(3)["high_volatility"]  # 150, 40, 150: sample CV = 0.560
    assert cell(f, 3, S1)["price_cv"] == pytest.approx(0.5604, abs=1e-3)
    # Week 4: no sale anywhere -> 1 of 4 weeks missing (25%): not low coverage.
    assert not flags(4)["low_coverage"] and cell(f, 4, S1)["missing_share"] == pytest.approx(0.25)
    assert cell(f, 3, S1)["quality_score"] < cell(f, 1, S1)["quality_score"] + 1e-9


def test_base_price_decrease_flag():
    rows = [(w, P, S1, "E01", "LS", 2.0, 1) for w in (1, 2, 3, 4)] + [
        (w, P, S1, "E01", "LS", 1.0, 1) for w in (5, 6, 7, 8, 9)
    ]
    f = run(rows, range(1, 10))

    def flag(w):
        return flags_of(cell(f, w, S1))["base_price_decrease"]

    assert not flag(7)  # window w4..w7 still holds 2.0
    assert flag(8)  # w5..w8: the 4-week max drops to 1.0
    assert not flag(9)  # and stays there


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 8),
            st.sampled_from([S1, S2, S3]),
            st.floats(0.05, 20.0),
            st.integers(1, 5),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_invariants(lines):
    rows = [
        (w, P, s, "E01" if s != S3 else "W02", "LS", round(price * q, 2), q)
        for w, s, price, q in lines
    ]
    frames = run(rows, range(1, 9))
    table = pl.concat(frames.values())
    assert table["discount_depth"].is_between(0.0, 1.0, closed="left").all()
    assert (
        table["reference_price"].is_null()
        | (table["reference_price"] >= table["observed_price"].fill_null(0) - 1e-12)
    ).all()
    assert (table["base_price"] >= table["actual_price"] - 1e-12).all()
    assert table["quality_score"].is_between(0.0, 1.0).all()
    observed = table.filter(pl.col("imputation_method") == "observed")
    assert_series_equal(observed["actual_price"], observed["observed_price"], check_names=False)


def test_a_recorded_regular_price_is_the_promotion_reference():
    # Always sold on a loyalty discount: inferred from paid prices alone it is never a promotion;
    # the source's regular shelf price (D90) gives the 25% cut every week.
    rows = [(w, P, S1, "E01", "LS", 3.0, 2, 4.0) for w in (1, 2, 3)]
    frames = run(rows, [1, 2, 3])
    for w in (1, 2, 3):
        row = cell(frames, w, S1)
        assert row["reference_price"] == pytest.approx(2.0)
        assert row["discount_depth"] == pytest.approx(0.25) and row["promo_flag"]
    inferred = run([r[:7] for r in rows], [1, 2, 3])
    assert cell(inferred, 3, S1)["discount_depth"] == 0.0


def test_a_regular_price_below_the_paid_one_is_the_paid_one():
    frames = run([(1, P, S1, "E01", "LS", 3.0, 1, 2.5)], [1])
    row = cell(frames, 1, S1)
    assert row["reference_price"] == pytest.approx(3.0) and row["discount_depth"] == 0.0


def test_the_regular_price_is_the_median_of_the_lines_recording_it():
    rows = [
        (1, P, S1, "E01", "LS", 1.0, 1, 2.0),
        (1, P, S1, "E01", "LS", 1.0, 1, 4.0),
        (1, P, S1, "E01", "LS", 1.0, 1, None),  # a line without it does not count
        (1, P, S1, "E01", "LS", 3.0, 1, 3.0),
    ]
    observed = observed_prices(raw(rows).lazy()).collect()
    assert observed["regular_price"].to_list() == [pytest.approx(3.0)]


def test_a_source_without_regions_prices_each_product_in_its_own_zone():
    # The Complete Journey records no region or format: each product's zone is the product
    # chain-wide, never one zone of every product (a cheap product's reference was the dearest
    # product's price: depth 0.8 here).
    rows = [
        (1, P, S1, None, None, 2.0, 1),
        (1, "PRD0000002", S1, None, None, 10.0, 1),
        (1, P, S2, None, None, 2.0, 1),
    ]
    frames = run(rows, [1])
    assert cell(frames, 1, S1)["reference_price"] == pytest.approx(2.0)
    assert cell(frames, 1, S2)["discount_depth"] == 0.0

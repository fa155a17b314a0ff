"""As-of customer snapshots (design §2.4, §2.5) on hand-made visits."""

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.customers.customer_features import affinity_snapshot, mission_snapshot
from retailsim_core.customers.customer_state import VISITS_SCHEMA, CustomerState, advance

C = "CUST0000000001"


def visits(rows):
    """rows: (week, store, region, basket_type, mission, price_sensitivity, size)."""
    return pl.DataFrame(
        [
            {
                "customer_id": C,
                "basket_id": i,
                "week": w,
                "store_id": s,
                "store_region": r,
                "basket_type": t,
                "basket_dominant_mission": m,
                "basket_price_sensitivity": p,
                "basket_size": z,
            }
            for i, (w, s, r, t, m, p, z) in enumerate(rows)
        ],
        schema=VISITS_SCHEMA,
    )


def snapshot_after(rows, week):
    """Snapshots of ``week`` from all rows of weeks < week."""
    state, data = CustomerState.empty(), visits(rows)
    for w in range(1, week):
        state = advance(state, data.filter(pl.col("week") == w), w)
    return affinity_snapshot(state, week).row(0, named=True), mission_snapshot(state, week).row(
        0, named=True
    )


ROWS = [
    (1, "STORE00001", "E01", "Top Up", "Fresh", "LA", "S"),
    (2, "STORE00001", "E01", "Top Up", "Fresh", "MM", "S"),
    (3, "STORE00002", "E02", "Full Shop", "Grocery", "UM", "L"),
    (3, "STORE00001", "E01", "Top Up", "Fresh", "XX", "M"),
    (8, "STORE00001", "E01", "Small Shop", "Mixed", "LA", "M"),
]


def test_affinity_formulas():
    a, _ = snapshot_after(ROWS, 9)
    assert a["primary_store"] == "STORE00001"
    assert a["loyalty_score"] == pytest.approx(0.8**2 + 0.2**2)  # HHI of 4/5, 1/5
    # Weeks with visits: 1 (first, not counted), 2 (no switch), 3 (STORE00002 novel), 8
    # (STORE00001 last seen in week 3, > 4 weeks before: novel) -> 2 switches / 3 weeks.
    assert a["switching_rate"] == pytest.approx(2 / 3)
    assert a["region_diversity"] == 2 and a["total_stores_visited"] == 2 and a["spatial_range"] == 1
    assert a["visit_concentration"] == pytest.approx(1.0) and a["n_visits"] == 5
    assert a["weeks_since_last_visit"] == 1 and a["first_week"] == 1


def test_mission_formulas():
    _, m = snapshot_after(ROWS, 9)
    assert m["mission_type_dist"] == {"Top Up": 0.6, "Small Shop": 0.2, "Full Shop": 0.2}
    assert m["dominant_mission_type"] == "Top Up"
    h = -(0.6 * math.log2(0.6) + 2 * 0.2 * math.log2(0.2))
    assert m["mission_type_entropy"] == pytest.approx(h)
    assert m["dominant_focus"] == "Fresh" and m["focus_entropy"] == pytest.approx(h)
    scores = [1.0, 0.5, 0.0, 1.0]  # LA, MM, UM, LA (XX left out)
    mean = sum(scores) / 4
    assert m["mean_price_sensitivity"] == pytest.approx(mean)
    assert m["sensitivity_volatility"] == pytest.approx(
        math.sqrt(sum((s - mean) ** 2 for s in scores) / 4)
    )
    sizes = [1 / 3, 1 / 3, 1.0, 2 / 3, 2 / 3]
    assert m["mean_basket_size"] == pytest.approx(sum(sizes) / 5)
    consistency = 1 - (h / math.log2(3) + h / math.log2(4)) / 2
    assert m["mission_consistency"] == pytest.approx(consistency)


def test_snapshot_uses_only_earlier_weeks():
    a3, m3 = snapshot_after(ROWS, 3)  # weeks 1-2 only
    assert a3["n_visits"] == 2 and a3["loyalty_score"] == 1.0 and a3["switching_rate"] == 0.0
    assert m3["mission_type_dist"]["Full Shop"] == 0.0
    state = CustomerState.empty()
    assert affinity_snapshot(state, 1).height == 0  # week 1: nobody has a past


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10), st.integers(1, 6)), min_size=1, max_size=40))
def test_hhi_bounds(visits_by_store):
    rows = [
        (w, f"STORE0000{s}", f"E0{s % 3 + 1}", "Top Up", "Fresh", "MM", "S")
        for w, s in visits_by_store
    ]
    a, m = snapshot_after(rows, 11)
    n = a["total_stores_visited"]
    assert 1 / n - 1e-12 <= a["loyalty_score"] <= 1 + 1e-12
    assert a["switching_rate"] is None or 0 <= a["switching_rate"] <= 1
    assert 0 <= m["mission_consistency"] <= 1 + 1e-12

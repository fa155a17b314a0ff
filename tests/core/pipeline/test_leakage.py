"""No future leakage: week-W outputs do not change when later data changes."""

import polars as pl

from retailsim_core.ingest.lgsr import RAW_TRANSACTIONS_SCHEMA
from retailsim_core.pipeline.data.price_weeks import derive_price_weeks
from retailsim_core.pipeline.data.snapshot_weeks import snapshot_weeks
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import AFFINITY_TABLE, MISSIONS_TABLE, PRICES_TABLE, RAW_TABLE

W = 8
WEEKS = range(1, 15)


def _perturb_from(wh: Warehouse, first_week: int) -> None:
    """Change every later week: double some prices, delete a third of the rows, add a store."""
    for week in range(first_week, WEEKS[-1] + 1):
        df = wh.scan(RAW_TABLE, [week]).collect()
        df = df.filter(pl.int_range(pl.len()) % 3 != 0).with_columns(
            spend=pl.col("spend") * 2,
            store_id=pl.when(pl.int_range(pl.len()) % 5 == 0)
            .then(pl.lit("STORE09999"))
            .otherwise(pl.col("store_id")),
        )
        wh.write_partition(RAW_TABLE, week, df, RAW_TRANSACTIONS_SCHEMA, {"status": "ok"})


def _bytes(wh, table, week):
    return wh.data_file(table, week).read_bytes()


def test_prices_of_week_w_ignore_weeks_after_w(warehouse):
    derive_price_weeks(warehouse, WEEKS)
    before = {w: _bytes(warehouse, PRICES_TABLE, w) for w in WEEKS}
    _perturb_from(warehouse, W + 1)
    derive_price_weeks(warehouse, WEEKS)
    assert all(_bytes(warehouse, PRICES_TABLE, w) == before[w] for w in range(1, W + 1))
    assert _bytes(warehouse, PRICES_TABLE, W + 1) != before[W + 1]  # the perturbation does matter


def test_snapshots_of_week_w_ignore_weeks_from_w(warehouse):
    snapshot_weeks(warehouse, WEEKS)
    tables = (AFFINITY_TABLE, MISSIONS_TABLE)
    before = {(t, w): _bytes(warehouse, t, w) for t in tables for w in WEEKS}
    _perturb_from(warehouse, W)
    snapshot_weeks(warehouse, WEEKS)
    assert all(_bytes(warehouse, t, w) == before[(t, w)] for t in tables for w in range(1, W + 1))
    assert _bytes(warehouse, AFFINITY_TABLE, W + 1) != before[(AFFINITY_TABLE, W + 1)]


def test_resumed_runs_equal_one_pass(warehouse, tmp_path):
    """A run that starts mid-way (state from the warehouse, or rebuilt from raw) writes the same
    bytes as one pass over all weeks."""
    derive_price_weeks(warehouse, WEEKS)
    snapshot_weeks(warehouse, WEEKS)
    one_pass = {
        (t, w): _bytes(warehouse, t, w)
        for t in (PRICES_TABLE, AFFINITY_TABLE, MISSIONS_TABLE)
        for w in WEEKS
    }
    derive_price_weeks(warehouse, range(9, 15))  # state from partitions 1..8
    snapshot_weeks(warehouse, range(9, 15))
    for w in range(9, 15):
        for t in (PRICES_TABLE, AFFINITY_TABLE, MISSIONS_TABLE):
            assert _bytes(warehouse, t, w) == one_pass[(t, w)], (t, w)
    fresh = Warehouse(tmp_path / "fresh")  # no price partitions: rebuilt from raw
    for w in WEEKS:
        raw = warehouse.scan(RAW_TABLE, [w]).collect()
        fresh.write_partition(RAW_TABLE, w, raw, RAW_TRANSACTIONS_SCHEMA, {"status": "ok"})
    derive_price_weeks(fresh, range(9, 15))
    assert all(_bytes(fresh, PRICES_TABLE, w) == one_pass[(PRICES_TABLE, w)] for w in range(9, 15))


def test_feature_tables_of_week_w_ignore_later_weeks(warehouse):
    from retailsim_core.pipeline.data.feature_weeks import STORE_FEATURES_TABLE, store_feature_weeks
    from retailsim_core.pipeline.readers.price_reader import read_price_features, read_prices

    def build():
        derive_price_weeks(warehouse, WEEKS)
        store_feature_weeks(warehouse, WEEKS)

    def shelf():  # the dense prices and price features of weeks <= W, materialised on read
        weeks = range(1, W + 1)
        return read_prices(warehouse, weeks), read_price_features(warehouse, weeks)

    build()
    before = {(STORE_FEATURES_TABLE, w): _bytes(warehouse, STORE_FEATURES_TABLE, w) for w in WEEKS}
    prices, features = shelf()
    later = read_prices(warehouse, [W + 1])
    _perturb_from(warehouse, W + 1)  # price features of W may use week W itself
    build()
    prices_after, features_after = shelf()
    assert prices_after.equals(prices) and features_after.equals(features)
    assert not read_prices(warehouse, [W + 1]).equals(later)  # the perturbation bites
    _perturb_from(warehouse, W)  # store features of W use weeks < W only
    build()
    assert all(
        _bytes(warehouse, STORE_FEATURES_TABLE, w) == before[(STORE_FEATURES_TABLE, w)]
        for w in range(1, W + 1)
    )
    assert _bytes(warehouse, STORE_FEATURES_TABLE, W + 2) != before[(STORE_FEATURES_TABLE, W + 2)]

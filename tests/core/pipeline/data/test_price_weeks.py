"""derived_prices runs: the overlapped stages keep order, fail loudly, and restore from the
warehouse.
"""

import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from retailsim_core.response.promotion_events import CELL, regional_promotions
from retailsim_core.pipeline.data.price_weeks import (
    PRICES_COMPRESSION,
    PRICES_COMPRESSION_LEVEL,
    derive_price_weeks,
    promotion_cells,
    regional_cuts,
)
from retailsim_core.pipeline.data.training_data_weeks import build_trip_store
from retailsim_core.derived_prices import DERIVED_PRICES_SCHEMA
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PRICES_TABLE

WEEKS = range(1, 7)


def test_every_week_is_written_with_its_summary(warehouse):
    summary = derive_price_weeks(warehouse, WEEKS)
    assert summary["week"].to_list() == list(WEEKS)
    for row in summary.iter_rows(named=True):
        week = row["week"]
        table = warehouse.scan(PRICES_TABLE, [week], schema=DERIVED_PRICES_SCHEMA).collect()
        # D96: the observed cells are stored; the dense week's counts are in the manifest.
        # (a week without a file stores no row: every cell of its dense table is imputed)
        assert table.height == row["observed"] and set(table["week"]) <= {week}
        assert set(table["imputation_method"]) <= {"observed"}
        dense = warehouse.manifest(PRICES_TABLE, week)["dense"]
        assert dense["cells"] == row["cells"] >= row["observed"]
    assert summary["cells"].sum() > summary["observed"].sum()


def test_partitions_are_zstd_at_the_fast_level(warehouse):
    """D67: zstd level 1 (as fast as LZ4 to write, a third smaller on real data)."""
    derive_price_weeks(warehouse, range(1, 3))
    meta = pq.ParquetFile(warehouse.data_file(PRICES_TABLE, 2)).metadata
    codecs = {meta.row_group(0).column(i).compression for i in range(meta.num_columns)}
    assert codecs == {"ZSTD"}
    assert (PRICES_COMPRESSION, PRICES_COMPRESSION_LEVEL) == ("zstd", 1)


def test_a_failed_write_fails_the_run(warehouse, monkeypatch):
    write = Warehouse.write_partition

    def failing(self, table, week, *args, **kwargs):
        if week == 3:
            raise OSError("disk full")
        return write(self, table, week, *args, **kwargs)

    monkeypatch.setattr(Warehouse, "write_partition", failing)
    with pytest.raises(OSError, match="disk full"):
        derive_price_weeks(warehouse, WEEKS)
    assert warehouse.manifest(PRICES_TABLE, 3) is None


def test_a_resumed_run_replays_stored_rows_in_any_order(warehouse):
    derive_price_weeks(warehouse, range(1, 5))
    one_pass = warehouse.data_file(PRICES_TABLE, 4).read_bytes()
    written = warehouse.scan(PRICES_TABLE, [2], schema=DERIVED_PRICES_SCHEMA).collect()
    shuffled = written.sort("store_id", "product_id")
    assert not shuffled.equals(written)
    warehouse.write_partition(
        PRICES_TABLE, 2, shuffled, DERIVED_PRICES_SCHEMA, {"source_status": "ok"}
    )
    derive_price_weeks(warehouse, [4])  # the state replayed from the stored weeks 1..3
    assert warehouse.data_file(PRICES_TABLE, 4).read_bytes() == one_pass


def test_regional_cuts_a_week_at_a_time_equal_one_pass(tiny_warehouse):
    """D97: the training's regional cuts, computed week by week, are the rows of one
    ``regional_promotions`` over every week's promotion cells."""
    wh = tiny_warehouse["warehouse"]
    weeks = list(range(1, 15))  # the tiny world's weeks
    stores = build_trip_store(wh).trips.select("store_id", "store_region").unique("store_id")
    whole = regional_promotions(promotion_cells(wh, weeks, True), stores).collect()
    got = regional_cuts(wh, weeks, stores)
    assert got.height > 0 and got.schema == whole.schema
    assert_frame_equal(got.sort(CELL), whole.sort(CELL))
    assert regional_cuts(wh, [], stores).height == 0

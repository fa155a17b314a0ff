"""RETAILSIM_SOURCE=completejourney: the weekly partitions are the source's 53 weeks and
`raw_transactions` ingests a Complete Journey export through the Dagster CLI, with the row
accounting of every week in its manifest."""

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from retailsim_core.calendar import COMPLETE_JOURNEY
from retailsim_core.ingest.completejourney import PRODUCTS_SCHEMA, TRANSACTIONS_SCHEMA
from retailsim_core.ingest.promotion_plan import SOURCE_SCHEMA
from retailsim_core.storage.warehouse import Warehouse
from retailsim_dagster.partitions import partitions_of

ROOT = Path(__file__).resolve().parents[2]


def test_the_source_calendar_gives_the_partitions():
    keys = partitions_of(COMPLETE_JOURNEY).get_partition_keys()
    assert len(keys) == 53 and keys[0] == "2016-12-26" and keys[-1] == "2017-12-25"


def _export(folder: Path) -> None:
    """Two weeks of a made-up export: week 2 with a fuel line and an unknown product."""
    folder.mkdir()
    products = [
        (1, 10, "GROCERY", "National", "SOUP", "SOUP: CANNED", "10 OZ"),
        (2, 11, "FUEL", "Private", "FUEL", "GASOLINE", None),
    ]
    pl.DataFrame(products, schema=PRODUCTS_SCHEMA, orient="row").write_parquet(
        folder / "products.parquet"
    )
    noon = dt.datetime(2017, 1, 3, 17)
    lines = [
        (900, 330, 7, 1, 2, 3.0, 0.5, 0.0, 0.0, 2, noon),
        (900, 330, 7, 2, 9000, 20.0, 0.0, 0.0, 0.0, 2, noon),
        (901, 331, 8, 99, 1, 1.0, 0.0, 0.0, 0.0, 2, noon),
        (901, 331, 9, 1, 1, 1.5, 0.0, 0.0, 0.0, 3, noon + dt.timedelta(days=7)),
    ]
    pl.DataFrame(lines, schema=TRANSACTIONS_SCHEMA, orient="row").write_parquet(
        folder / "transactions.parquet"
    )
    promotions = [  # week 2: a cell named twice, a fuel product; week 3: a mailer
        (1, 330, "3", "0", 2),
        (1, 330, "0", "A", 2),
        (2, 330, "1", "0", 2),
        (1, 331, "0", "D", 3),
    ]
    pl.DataFrame(promotions, schema=SOURCE_SCHEMA, orient="row").write_parquet(
        folder / "promotions.parquet"
    )
    then = 0  # written long ago: settled
    for name in ("products.parquet", "transactions.parquet", "promotions.parquet"):
        os.utime(folder / name, (then, then))


@pytest.mark.slow
def test_a_complete_journey_export_is_ingested_through_dagster(tmp_path):
    _export(tmp_path / "raw")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "RETAILSIM_SOURCE": "completejourney",
        "RETAILSIM_RAW_DIR": str(tmp_path / "raw"),
        "RETAILSIM_WAREHOUSE_DIR": str(tmp_path / "wh"),
        "RETAILSIM_TRUTH_DIR": "",
    }
    (tmp_path / "home").mkdir()
    out = subprocess.run(
        [
            str(Path(sys.executable).with_name("dagster")),
            "asset",
            "materialize",
            "-m",
            "retailsim_dagster.definitions",
            "--select",
            "raw_transactions,raw_transactions_quarantine,source_promotions",
            "--partition-range",
            "2017-01-02...2017-01-09",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    wh = Warehouse(tmp_path / "wh", COMPLETE_JOURNEY)
    assert wh.weeks("raw_transactions") == [2, 3]
    assert (tmp_path / "wh" / "raw_transactions" / "week=2017-01-02").is_dir()  # its Monday
    week2 = wh.manifest("raw_transactions", 2)
    assert (week2["rows_read"], week2["rows_kept"], week2["rows_rejected"]) == (3, 1, 2)
    assert week2["source_file"] == "transactions.parquet"
    assert week2["header_variant"] == "completejourney"
    reasons = wh.scan("raw_transactions_quarantine").collect()["reason"].sort().to_list()
    assert reasons == [
        "excluded:fuel_or_coupon_department",
        "unknown_product",
    ]
    kept = wh.scan("raw_transactions").collect()
    assert kept["store_id"].to_list() == ["STORE00330", "STORE00331"] and kept[
        "week"
    ].to_list() == [2, 3]
    promo2 = wh.manifest("source_promotions/cells", 2)
    assert (promo2["rows_read"], promo2["rows_kept"], promo2["rows_rejected"]) == (3, 2, 1)
    assert promo2["status"] == "ok" and promo2["cells"] == 1
    cells = wh.scan("source_promotions/cells").collect().sort("week")
    assert cells.select("week", "store_id", "display", "mailer").rows() == [
        (2, "STORE00330", True, True),
        (3, "STORE00331", False, True),
    ]
    assert wh.scan("source_promotions/quarantine").collect()["reason"].to_list() == [
        "excluded:fuel_or_coupon_department"
    ]

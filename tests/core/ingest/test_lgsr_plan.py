"""An LGSR-format source's weekly plan files: cells, merged duplicates, every quarantine reason,
the row accounting, and weeks without a file ("no_table", never "nothing promoted")."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retailsim_core.ingest.file_reader import WeekFileError
from retailsim_core.ingest.lgsr_plan import LgsrPlanFiles, plan_cells
from retailsim_core.ingest.promotion_plan import (
    PROMOTIONS_QUARANTINE_SCHEMA,
    SOURCE_PROMOTIONS_SCHEMA,
)
from retailsim_core.pipeline.data.promotion_weeks import ingest_promotions, known_promotion_weeks
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PROMOTION_CELLS_TABLE

HEADER = "PROD_CODE,STORE_CODE,DISPLAY,MAILER\n"


def _write(folder: Path, name: str, *lines: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(HEADER + "".join(f"{line}\n" for line in lines))
    return folder / name


def test_rows_become_cells_and_duplicates_merge(tmp_path):
    _write(tmp_path, "promotions_200607.csv", "PRD0900001,STORE00001,1,0",
           "PRD0900001,STORE00001,0,1", "PRD0900002,STORE00001,1,0")  # fmt: skip
    cells, quarantine, read = LgsrPlanFiles(tmp_path).week(1)
    assert read == 3 and quarantine.is_empty() and cells.schema == SOURCE_PROMOTIONS_SCHEMA
    assert cells.select("week", "product_id", "store_id", "display", "mailer").rows() == [
        (1, "PRD0900001", "STORE00001", True, True),
        (1, "PRD0900002", "STORE00001", True, False),
    ]
    assert cells["source_rows"].to_list() == [2, 1]


def test_every_failing_rule_is_named_in_quarantine(tmp_path):
    _write(tmp_path, "promotions_200607.csv", "PRD09X0001,STORE00001,1,0",
           "PRD0900001,STORE1,2,0", "PRD0900001,STORE00001,0,0", ",STORE00001,1,")  # fmt: skip
    cells, quarantine, read = LgsrPlanFiles(tmp_path).week(1)
    assert cells.is_empty() and read == 4 and quarantine.schema == PROMOTIONS_QUARANTINE_SCHEMA
    assert quarantine.select("record_number", "reason").rows() == [
        (2, "invalid:PROD_CODE"),
        (3, "invalid:STORE_CODE;invalid:DISPLAY"),
        (4, "not_a_promotion"),
        (5, "invalid:PROD_CODE;invalid:MAILER"),
    ]


def test_a_plan_file_without_its_columns_is_refused(tmp_path):
    (tmp_path / "promotions_200607.csv").write_text("PROD_CODE,STORE_CODE\nPRD0900001,STORE00001\n")
    with pytest.raises(WeekFileError, match="lacks the columns"):
        LgsrPlanFiles(tmp_path).week(1)


def test_weeks_without_a_file_are_unknown_and_real_lgsr_has_none(tmp_path):
    raw = tmp_path / "raw"
    _write(raw, "promotions_200607.csv", "PRD0900001,STORE00001,1,1")
    (raw / "transactions_200608.csv").write_text("")  # a week's sales, not its plan
    wh = Warehouse(tmp_path / "wh")
    report, _ = ingest_promotions(raw, wh, [1, 2], "lgsr")
    assert report.select("week", "status", "rows_read", "cells", "mailer_cells").rows() == [
        (1, "ok", 1, 1, 1),
        (2, "no_table", 0, 0, 0),
    ]
    assert known_promotion_weeks(wh, [1, 2]) == [1]
    manifest = wh.manifest(PROMOTION_CELLS_TABLE, 1)
    assert manifest["source_rows"] is None and len(manifest["source_sha256"]) == 64
    empty = tmp_path / "lgsr"
    empty.mkdir()
    assert not LgsrPlanFiles(empty).present


FLAG = st.sampled_from(["0", "1", "2", "", "yes"])
CODE = st.sampled_from(["PRD0900001", "PRD0900002", "PRD09", "", "STORE00001"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(CODE, st.sampled_from(["STORE00001", "STORE00002", "S"]), FLAG, FLAG),
                max_size=12))  # fmt: skip
def test_rows_read_are_rows_kept_plus_rows_quarantined(rows):
    frame = pl.DataFrame(
        [(i + 2, *r) for i, r in enumerate(rows)],
        schema={"record_number": pl.Int64, **dict.fromkeys(
            ("PROD_CODE", "STORE_CODE", "DISPLAY", "MAILER"), pl.String)},
        orient="row",
    ).with_columns(pl.col(pl.String).replace("", None))  # fmt: skip
    cells, quarantine = plan_cells(frame, 5)
    assert int(cells["source_rows"].sum()) + quarantine.height == len(rows)
    assert (cells["display"] | cells["mailer"]).all()

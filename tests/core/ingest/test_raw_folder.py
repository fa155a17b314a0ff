"""The raw folder as a source: its checks, file-name case, links, and what error messages show."""

from __future__ import annotations

import shutil

import pytest

from retailsim_core.ingest.raw_files import list_week_files
from retailsim_core.ingest.week_file import (
    LGSRFileError,
    RawFolderError,
    check_raw_folder,
    ingest_week,
)

WEEK_1 = "transactions_200607.csv"


def _raw_with_week_1(tiny_dataset, tmp_path, name: str = WEEK_1):
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(tiny_dataset["raw"] / WEEK_1, raw / name)
    return raw


def test_a_missing_or_empty_raw_folder_is_refused_naming_the_setting(tmp_path):
    with pytest.raises(RawFolderError, match="RETAILSIM_RAW_DIR.*does not exist"):
        check_raw_folder(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    with pytest.raises(RawFolderError, match=r"RETAILSIM_RAW_DIR.*holds no LGSR week file"):
        check_raw_folder(tmp_path / "empty")


def test_file_name_case_variants_are_the_same_week(tiny_dataset, tmp_path):
    raw = _raw_with_week_1(tiny_dataset, tmp_path, "Transactions_200607.CSV")
    check_raw_folder(raw)
    assert [f.week for f in list_week_files(raw)] == [1]
    result = ingest_week(raw, 1)
    assert result.source_file == "Transactions_200607.CSV" and result.kept.height > 0
    shutil.copy(raw / "Transactions_200607.CSV", raw / WEEK_1)
    with pytest.raises(LGSRFileError, match="keep one"):
        ingest_week(raw, 1)


def test_a_link_inside_the_raw_folder_is_followed_one_leaving_it_is_refused(tiny_dataset, tmp_path):
    raw = tmp_path / "raw"
    (raw / "store").mkdir(parents=True)
    shutil.copy(tiny_dataset["raw"] / WEEK_1, raw / "store" / "w1.csv")
    (raw / WEEK_1).symlink_to(raw / "store" / "w1.csv")
    assert ingest_week(raw, 1).kept.height > 0
    (raw / WEEK_1).unlink()
    (raw / WEEK_1).symlink_to(tiny_dataset["raw"] / WEEK_1)
    with pytest.raises(LGSRFileError, match="link to a file outside the raw folder"):
        ingest_week(raw, 1)


def test_a_file_that_is_not_lgsr_is_refused_without_echoing_its_content(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / WEEK_1).write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin\n")
    with pytest.raises(LGSRFileError) as err:
        ingest_week(raw, 1)
    message = str(err.value).replace(str(raw), "")
    assert "malformed LGSR header" in message and "root" not in message


def test_an_unparseable_spend_has_one_reason_not_a_spurious_sign_reason(tiny_dataset, tmp_path):
    raw = _raw_with_week_1(tiny_dataset, tmp_path)
    lines = (raw / WEEK_1).read_text().splitlines()
    header = lines[0].split(",")
    spend, hour, date = header.index("SPEND"), header.index("SHOP_HOUR"), header.index("SHOP_DATE")
    row = lines[1].split(",")
    row[spend], row[hour] = "abc", "late"
    row2 = lines[2].split(",")
    row2[date] = "not-a-date"
    edited = [lines[0], ",".join(row), ",".join(row2), *lines[3:]]
    (raw / WEEK_1).write_text("\n".join(edited) + "\n")
    q = ingest_week(raw, 1).quarantine.sort("record_number")
    reasons = [set(r.split(";")) for r in q["reason"]]
    assert {"unparseable:SPEND", "unparseable:SHOP_HOUR"} <= reasons[0]
    assert not reasons[0] & {"spend_negative", "hour_out_of_range"}
    assert "unparseable:SHOP_DATE" in reasons[1]
    assert not reasons[1] & {"date_outside_week", "weekday_mismatch"}


def test_a_week_file_name_needs_ascii_digits():
    from retailsim_core.ingest.raw_files import WEEK_FILE

    assert WEEK_FILE.match("transactions_200607.csv")
    assert WEEK_FILE.match("transactions_\u0662\u0660\u0660\u0666\u0660\u0667.csv") is None

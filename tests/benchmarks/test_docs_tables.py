"""The docs' figure tables: generated from benchmarks/results, and the pages agree with them."""

import json

import pytest

from benchmarks.docs_tables import cell, render_table, run, update
from benchmarks.results import RESULTS_DIR, load, record, table

MEASURED = {"commit": "abc1234", "date": "2026-11-28", "machine": "2 cores, 24 GiB"}


def _write(folder, area="speed", rows=None):
    rows = rows or [["a | b", 1234, 0.51234], ["c", None, 2.0]]
    return record(
        area,
        title="Speed",
        command="python -m benchmarks.bench_speed --record",
        tables={"main": table(["step", "rows", "wall s"], rows, {"wall s": ".2f"})},
        results_dir=folder,
        measured=MEASURED,
    )


def test_the_repository_docs_agree_with_the_results_files():
    """Every marked table of docs/*.md is what its results file renders, and every results
    file is shown on some page (run `python -m benchmarks.docs_tables` after a benchmark)."""
    changed, unused = run(check=True)
    assert changed == [], f"regenerate with `python -m benchmarks.docs_tables`: {changed}"
    assert unused == [], f"results no page shows: {unused}"
    assert load(RESULTS_DIR), "no results files"


def test_a_table_renders_numbers_right_aligned_and_escapes_pipes():
    tab = table(
        ["step", "rows", "wall s"], [["a | b", 1234, 0.51234], ["c", None, 2.0]], {"wall s": ".2f"}
    )
    assert render_table(tab).splitlines() == [
        "| step | rows | wall s |",
        "|---|---:|---:|",
        "| a \\| b | 1,234 | 0.51 |",
        "| c | — | 2.00 |",
    ]
    assert cell(3, None) == "3" and cell(0.123456, None) == "0.1235" and cell("x", ".2f") == "x"


def test_a_table_rejects_ragged_rows_and_unknown_formats():
    with pytest.raises(ValueError, match="columns"):
        table(["a", "b"], [[1]])
    with pytest.raises(ValueError, match="formats"):
        table(["a"], [[1]], {"b": ".1f"})


def test_record_writes_the_same_bytes_for_the_same_figures(tmp_path):
    first = _write(tmp_path).read_bytes()
    assert _write(tmp_path).read_bytes() == first
    doc = json.loads(first)
    assert doc["measured"] == MEASURED and doc["area"] == "speed"
    assert not list(tmp_path.glob("*.tmp"))  # renamed into place, nothing left behind


def test_update_regenerates_a_stale_block_and_is_then_idempotent(tmp_path):
    _write(tmp_path)
    results = load(tmp_path)
    page = "intro\n<!-- results speed/main -->\nold figures\n<!-- /results -->\nafter\n"
    new, changed = update(page, results)
    assert changed == ["page: speed/main"]
    assert "| a \\| b | 1,234 | 0.51 |" in new and "old figures" not in new
    assert "measured at abc1234 on 2026-11-28 (2 cores, 24 GiB)" in new
    assert new.startswith("intro\n") and new.endswith("after\n")
    assert update(new, results) == (new, [])
    _write(tmp_path, rows=[["a", 1, 9.0]])  # a new measurement: the page is stale again
    assert update(new, load(tmp_path))[1] == ["page: speed/main"]


def test_a_block_naming_a_missing_area_or_table_is_an_error(tmp_path):
    _write(tmp_path)
    results = load(tmp_path)
    with pytest.raises(KeyError, match="no results file"):
        update("<!-- results nothing/main -->\n<!-- /results -->", results)
    with pytest.raises(KeyError, match="no table"):
        update("<!-- results speed/other -->\n<!-- /results -->", results)


def test_run_checks_pages_and_reports_unshown_results(tmp_path):
    docs, res = tmp_path / "docs", tmp_path / "results"
    docs.mkdir()
    _write(res)
    _write(res, area="unshown")
    page = docs / "p.md"
    page.write_text("<!-- results speed/main -->\n<!-- /results -->\n")
    changed, unused = run(docs, res, check=True)
    assert changed == ["p.md: speed/main"] and unused == ["unshown"]
    assert page.read_text() == "<!-- results speed/main -->\n<!-- /results -->\n"  # untouched
    run(docs, res)
    assert run(docs, res, check=True)[0] == []


def test_a_results_file_must_be_named_after_its_area(tmp_path):
    path = _write(tmp_path)
    path.rename(tmp_path / "other.json")
    with pytest.raises(ValueError, match="not the file's name"):
        load(tmp_path)


def test_a_record_marks_its_commit_dirty_for_code_not_for_other_records(tmp_path):
    """Two benchmarks recording side by side must not mark each other's commit with ``+``."""
    import subprocess

    from benchmarks.results import commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "a.json").write_text("{}\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    assert not commit(tmp_path).endswith("+")
    (tmp_path / "benchmarks" / "results" / "a.json").write_text('{"b": 1}\n')
    assert not commit(tmp_path).endswith("+")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert commit(tmp_path).endswith("+")

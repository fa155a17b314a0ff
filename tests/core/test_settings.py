"""Settings: an unknown or impossible RETAILSIM_* value fails naming the variable."""

import re
from pathlib import Path

import pytest

from retailsim_core.calendar import COMPLETE_JOURNEY, LGSR
from retailsim_core.settings import (
    Settings,
    SettingsError,
    check_environment,
    documented,
    load_settings,
    source_calendar,
)
from retailsim_core.split import TemporalSplit


def test_the_defaults_and_every_known_setting_pass(tmp_path):
    check_environment({})
    check_environment(
        {
            "RETAILSIM_RAW_DIR": str(tmp_path),
            "RETAILSIM_TRUTH_DIR": "",
            "RETAILSIM_TRAIN_END": "70",
            "RETAILSIM_VALID_END": "90",
            "RETAILSIM_COMPILED_SCAN": "0",
            "RETAILSIM_KERNEL_CACHE": str(tmp_path),
        }
    )


@pytest.mark.parametrize(
    ("env", "named", "says"),
    [
        ({"RETAILSIM_RAW_DIRS": "x"}, "RETAILSIM_RAW_DIRS", "did you mean RETAILSIM_RAW_DIR"),
        ({"RETAILSIM_WAREHOUSE": "x"}, "RETAILSIM_WAREHOUSE", "RETAILSIM_WAREHOUSE_DIR"),
        ({"RETAILSIM_FOO": "1"}, "RETAILSIM_FOO", "known:"),
        ({"RETAILSIM_TRAIN_END": "eighty"}, "RETAILSIM_TRAIN_END", "not a week number"),
        ({"RETAILSIM_VALID_END": "200"}, "RETAILSIM_VALID_END", "outside the calendar"),
        ({"RETAILSIM_TRAIN_END": "99"}, "RETAILSIM_TRAIN_END", "train_end < valid_end"),
        ({"RETAILSIM_COMPILED_PRICES": "yes"}, "RETAILSIM_COMPILED_PRICES", "use 0"),
        ({"RETAILSIM_TRUTH_DIR": "/no/such/truth"}, "RETAILSIM_TRUTH_DIR", "no such folder"),
    ],
)
def test_a_bad_setting_fails_naming_it(env, named, says):
    with pytest.raises(SettingsError) as err:
        check_environment(env)
    assert named in str(err.value) and says in str(err.value)


def test_a_warehouse_root_that_is_a_file_fails(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(SettingsError, match="RETAILSIM_WAREHOUSE_DIR"):
        check_environment({"RETAILSIM_WAREHOUSE_DIR": str(tmp_path / "f")})


def test_the_split_reads_its_weeks_through_the_settings():
    assert load_settings({}).split == TemporalSplit()
    assert load_settings(
        {"RETAILSIM_TRAIN_END": "60", "RETAILSIM_VALID_END": "70"}
    ).split == TemporalSplit(60, 70)


def test_the_source_picks_its_calendar_and_default_split():
    assert load_settings({}).calendar == LGSR
    cj = load_settings({"RETAILSIM_SOURCE": "completejourney"})
    assert cj.calendar == COMPLETE_JOURNEY and cj.split == TemporalSplit(36, 43, 53)
    assert list(cj.split.test_weeks) == list(range(44, 54))  # the source's last week, not 117
    mine = load_settings({"RETAILSIM_SOURCE": "completejourney", "RETAILSIM_TRAIN_END": "30"})
    assert mine.split == TemporalSplit(30, 43, 53)
    assert source_calendar({}) == LGSR
    assert source_calendar({"RETAILSIM_SOURCE": "completejourney"}) == COMPLETE_JOURNEY


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"RETAILSIM_SOURCE": "dunnhumby"}, "not a source; use one of lgsr, completejourney"),
        (
            {"RETAILSIM_SOURCE": "completejourney", "RETAILSIM_VALID_END": "60"},
            "valid_end < 53",
        ),
    ],
)
def test_a_source_or_split_outside_its_calendar_fails_naming_it(env, says):
    with pytest.raises(SettingsError, match="RETAILSIM_(SOURCE|TRAIN_END)") as err:
        check_environment(env)
    assert says in str(err.value)
    if "dunnhumby" in env.get("RETAILSIM_SOURCE", ""):
        with pytest.raises(SettingsError, match="RETAILSIM_SOURCE='dunnhumby'"):
            source_calendar(env)


def _operations_table() -> dict[str, tuple[str, str]]:
    operations = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    rows = re.findall(r"^\| `(RETAILSIM_\w+)` \| (.+?) \| (.+?) \|$", operations, re.M)
    return {name: (sets, default.strip("`")) for name, sets, default in rows}


def test_every_setting_is_documented():
    table = _operations_table()
    assert [name for name, _, _ in documented() if name not in table] == []


def test_the_docs_table_is_the_settings_one_row_each():
    """docs/operations.md's table says what ``Settings`` says: no row for a variable nobody
    reads, and each row's text and default are the field's."""
    assert _operations_table() == {name: (sets, shown) for name, sets, shown in documented()}


def test_the_process_environment_is_read_by_pydantic_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("RETAILSIM_TRAIN_END", "50")
    monkeypatch.setenv("RETAILSIM_SERVE_ONNX", "1")
    monkeypatch.setenv("RETAILSIM_KERNEL_CACHE", str(tmp_path))
    settings = load_settings()
    assert isinstance(settings, Settings)
    assert (settings.train_end, settings.serve_onnx, settings.kernel_folder) == (50, True, tmp_path)
    assert settings == load_settings(
        {
            "RETAILSIM_TRAIN_END": "50",
            "RETAILSIM_SERVE_ONNX": "1",
            "RETAILSIM_KERNEL_CACHE": str(tmp_path),
        }
    )


def test_names_are_read_in_any_letter_case_by_both_paths(monkeypatch):
    monkeypatch.setenv("retailsim_train_end", "40")
    assert load_settings().train_end == 40  # pydantic-settings ignores the case
    assert load_settings({"retailsim_train_end": "40"}).train_end == 40
    with pytest.raises(SettingsError, match="unknown setting retailsim_trian_end.*TRAIN_END"):
        check_environment({"retailsim_trian_end": "40"})


def test_the_source_is_read_one_way_everywhere(monkeypatch):
    """The partitions' calendar and the run's settings read the source alike (D113): a name in
    lower case cannot give Complete Journey settings over LGSR partitions."""
    monkeypatch.delenv("RETAILSIM_SOURCE", raising=False)
    monkeypatch.setenv("retailsim_source", "completejourney")
    assert source_calendar().source == load_settings().source == "completejourney"
    env = {"retailsim_source": "completejourney"}
    assert source_calendar(env).source == load_settings(env).source == "completejourney"


def test_one_setting_given_twice_with_different_values_is_refused():
    env = {"RETAILSIM_SOURCE": "lgsr", "retailsim_source": "completejourney"}
    for read in (load_settings, source_calendar):
        with pytest.raises(SettingsError, match="one setting given twice"):
            read(env)
    assert load_settings({"RETAILSIM_SOURCE": "lgsr", "retailsim_source": "lgsr"}).source == "lgsr"


def test_empty_means_default_for_numbers_and_no_truth_for_the_truth_folder():
    settings = load_settings({"RETAILSIM_TRAIN_END": "", "RETAILSIM_TRUTH_DIR": ""})
    assert settings.split.train_end == TemporalSplit.train_end and settings.truth is None


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"RETAILSIM_SERVE_PORT": "0"}, "RETAILSIM_SERVE_PORT='0': use a whole number"),
        ({"RETAILSIM_SERVE_MAX_K": "ten"}, "RETAILSIM_SERVE_MAX_K='ten': use a whole number"),
        ({"RETAILSIM_SERVE_ONNX": "true"}, "RETAILSIM_SERVE_ONNX='true': use 0 (off) or 1"),
    ],
)
def test_a_bad_serving_limit_fails_naming_it(env, says):
    with pytest.raises(SettingsError, match=re.escape(says)):
        load_settings(env)


def test_no_module_but_settings_reads_a_retailsim_variable():
    """One reader: every other module asks ``load_settings`` (a message may still name one)."""
    root = Path(__file__).resolve().parents[2]
    readers = [
        str(path.relative_to(root))
        for package in ("retailsim_core", "retailsim_dagster", "retailsim_serve")
        for path in (root / package).rglob("*.py")
        if path.name != "settings.py"
        and re.search(r"(\.get|getenv|environ)\s*[\[(]\s*[\"']RETAILSIM_", path.read_text())
    ]
    assert readers == []


def test_reading_settings_never_checks_folders(tmp_path):
    """Only a run's start checks folders, and only those that are set: a default folder that
    does not exist yet (a fresh clone has no data/ground_truth) must not break a reader such
    as a kernel's switch. Settings validate their defaults (pydantic-settings does)."""
    missing = str(tmp_path / "absent")
    settings = load_settings({"RETAILSIM_TRUTH_DIR": missing})
    assert settings.truth == Path(missing)
    with pytest.raises(SettingsError, match="RETAILSIM_TRUTH_DIR"):
        check_environment({"RETAILSIM_TRUTH_DIR": missing})

    class FreshClone(Settings):  # the default truth folder not generated yet
        truth_dir: str = missing

    assert FreshClone().truth == Path(missing)


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("RETAILSIM_WAREHOUSE_DIR", "", "empty: name a folder"),
        ("RETAILSIM_RAW_DIR", " ", "empty: name a folder"),
        ("RETAILSIM_SERVE_HOST", "", "empty: use 127.0.0.1"),
        ("RETAILSIM_SERVE_HOST", "not a host", "not an IP address or a host name"),
        ("RETAILSIM_SERVE_HOST", "host\n", "not an IP address or a host name"),
        ("RETAILSIM_SERVE_PORT", "70000", "1..65,535"),
        ("RETAILSIM_SERVE_PORT", "٨٠٠٠", "ASCII digits"),  # Arabic-Indic digits
        ("RETAILSIM_SERVE_RELOAD_SECONDS", "100000000000", "1..86,400"),
        ("RETAILSIM_SERVE_THREADS", "100000", "1..256"),
        ("RETAILSIM_SERVE_MAX_BODY_BYTES", "100000000000000000000", "1..1,073,741,824"),
    ],
)
def test_settings_that_cannot_be_right_are_refused_by_name(variable, value, says):
    with pytest.raises(SettingsError, match=re.escape(variable)) as err:
        load_settings({variable: value})
    assert says in str(err.value)


def test_hosts_and_bounds_that_are_right_are_kept():
    s = load_settings(
        {"RETAILSIM_SERVE_HOST": "::1", "RETAILSIM_SERVE_PORT": "65535"}
        | {"RETAILSIM_SERVE_RELOAD_SECONDS": "86400", "RETAILSIM_SERVE_THREADS": "256"}
    )
    assert (s.serve_host, s.serve_port, s.serve_reload_seconds, s.serve_threads) == (
        "::1",
        65535,
        86400,
        256,
    )
    assert load_settings({"RETAILSIM_SERVE_HOST": "serve-1.internal"}).serve_host


def test_a_host_beyond_loopback_is_said_at_start():
    from retailsim_serve.__main__ import exposure_note

    assert exposure_note("127.0.0.1") is None and exposure_note("::1") is None
    assert exposure_note("localhost") is None
    assert "not loopback" in exposure_note("0.0.0.0")
    assert "not loopback" in exposure_note("serve-1.internal")

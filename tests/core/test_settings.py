"""Settings: an unknown or impossible RETAILSIM_* value fails naming the variable."""

import pytest

from retailsim_core.settings import SETTINGS, SettingsError, check_environment
from retailsim_core.split import TemporalSplit, default_split


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
    assert default_split({}) == TemporalSplit()
    assert default_split(
        {"RETAILSIM_TRAIN_END": "60", "RETAILSIM_VALID_END": "70"}
    ) == TemporalSplit(60, 70)


def test_every_setting_is_documented():
    from pathlib import Path

    operations = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    assert [name for name in SETTINGS if f"`{name}`" not in operations] == []

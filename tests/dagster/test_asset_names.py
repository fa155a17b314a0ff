"""Asset and table names are written once, as constants next to the code that writes them."""

import re
from pathlib import Path

from retailsim_dagster.definitions import defs

ROOT = Path(__file__).resolve().parents[2]


def test_no_asset_name_is_a_bare_string_outside_its_constant():
    names = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    quoted = re.compile(r'"(' + "|".join(sorted(names)) + r')"')
    places = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for package in ("retailsim_core", "retailsim_dagster", "retailsim_serve")
        for path in (ROOT / package).rglob("*.py")
        for line in path.read_text().splitlines()
        if quoted.search(line) and not re.match(r"\s*[A-Z_]+_TABLE = ", line)
    ]
    assert places == []

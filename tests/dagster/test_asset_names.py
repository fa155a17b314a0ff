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


def test_the_table_registry_covers_every_asset_with_its_partitioning():
    from retailsim_core.tables import TABLES

    graph = defs.resolve_asset_graph()
    assets = {k.to_user_string(): graph.get(k) for k in graph.get_all_asset_keys()}
    assert {t.asset for t in TABLES.values()} == set(assets)
    for table in TABLES.values():
        assert table.weekly == (assets[table.asset].partitions_def is not None), table.name

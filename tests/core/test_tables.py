"""Every Parquet table the pipeline writes has the schema its registry entry says."""

import polars as pl

from retailsim_core.tables import TABLES


def test_written_tables_match_the_registry(tiny_warehouse):
    wh = tiny_warehouse["warehouse"]
    checked = []
    for table in TABLES.values():
        if table.schema is None:
            continue
        if table.weekly:
            weeks = wh.weeks(table.name)
            if not weeks:
                continue
            schema = wh.scan(table.name, weeks[-1:]).collect_schema()
        elif wh.manifest(table.name) is not None:
            schema = wh.read_table(table.name).schema
        else:
            continue
        assert dict(schema) == dict(table.schema), table.name
        checked.append(table.name)
    # Everything the tiny world materializes (the pseudo-brands asset is not part of it).
    assert len(checked) >= 12, checked


def test_registry_names_are_unique_folders():
    names = [t.name for t in TABLES.values()]
    assert len(names) == len(set(names)) and all(
        isinstance(t.schema, (pl.Schema, type(None))) for t in TABLES.values()
    )

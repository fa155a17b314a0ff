"""The Dagster definitions against a committed snapshot: every asset (group, partitioning,
upstream assets, pool), check, job, schedule and sensor. A change to the graph must be
deliberate: regenerate the snapshot with ``python tests/dagster/test_definitions_snapshot.py``
and commit it with the change."""

import json
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("definitions_snapshot.json")


def definitions_snapshot() -> dict:
    from retailsim_dagster.definitions import defs

    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        partitions = node.partitions_def
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "partitions": None if partitions is None else type(partitions).__name__,
            "partition_count": None if partitions is None else len(partitions.get_partition_keys()),
            "upstream": sorted(k.to_user_string() for k in node.parent_keys),
            "pools": sorted(node.pools or []),
        }
    checks = sorted(f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys)
    jobs = sorted(j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__"))
    schedules = {
        s.name: {"cron": s.cron_schedule, "default_status": s.default_status.value}
        for s in defs.schedules
    }
    sensors = {s.name: {"default_status": s.default_status.value} for s in defs.sensors}
    return {
        "assets": assets,
        "checks": checks,
        "jobs": jobs,
        "schedules": schedules,
        "sensors": sensors,
    }


def test_definitions_match_the_committed_snapshot():
    current = definitions_snapshot()
    committed = json.loads(SNAPSHOT.read_text())
    for part in ("assets", "checks", "jobs", "schedules", "sensors"):
        assert current[part] == committed[part], (
            f"the Dagster {part} changed; if deliberate, run "
            "`python tests/dagster/test_definitions_snapshot.py` and commit the snapshot"
        )


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(definitions_snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")

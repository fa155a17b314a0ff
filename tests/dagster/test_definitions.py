import dagster as dg

from retailsim_dagster.definitions import defs
from retailsim_dagster.partitions import weekly_partitions


def test_definitions_load():
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"raw_transactions", "raw_transactions_quarantine"} <= keys
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.partitions_def is not None:
            assert node.partitions_def == weekly_partitions
            assert node.backfill_policy == dg.BackfillPolicy.single_run()


def test_weekly_partitions_are_the_117_lgsr_weeks():
    keys = weekly_partitions.get_partition_keys()
    assert len(keys) == 117 and keys[0] == "2006-04-10" and keys[-1] == "2008-06-30"

"""Everything Dagster loads: ``dagster dev``, ``dagster asset materialize -m
retailsim_dagster.definitions``.
"""

import dagster as dg

from retailsim_dagster.assets import (
    customer_snapshots,
    demand_forecast,
    derived_prices,
    features,
    model,
    pricing,
    product_graph,
    raw_transactions,
    refreshed_model,
    source_promotions,
    training_data,
)
from retailsim_dagster.automation import new_week_file_sensor, weekly_job, weekly_refresh_schedule
from retailsim_dagster.partitions import CPU_HEAVY_LIMIT
from retailsim_dagster.recovery import dead_run_sweeper
from retailsim_dagster.resources import default_resources

# Local scale-out: steps in separate processes, two at a time on this 2-core machine, forked
# from a forkserver that imported these definitions once (a spawned step would spend ~8 s of CPU
# importing torch, DGL, Polars and Dagster; a full run has about 25 steps). Within a run, at most
# one step tagged CPU_HEAVY runs at a time (the time-budgeted training and whole-test-set
# scoring), whatever instance the run uses; across runs the instance's pool keeps them apart
# (dagster.yaml). Dagster's own executor and settings only: no private module is patched (D106).
STEP_IMPORTS = [
    "retailsim_dagster.definitions",
    "fsspec.implementations.local",
    "upath.implementations.local",
    "watchdog.observers.polling",
    "watchdog.utils.dirsnapshot",
    "retailsim_dagster.step_preload",  # last: freezes what the imports above made (gc.freeze)
]
STEP_PROCESSES = {
    "max_concurrent": 2,
    "tag_concurrency_limits": [{**CPU_HEAVY_LIMIT, "limit": 1}],
    "start_method": {"forkserver": {"preload_modules": STEP_IMPORTS}},
}

# One module per domain: its assets and, next to them, their checks.
DOMAINS = [
    raw_transactions,
    source_promotions,
    derived_prices,
    product_graph,
    customer_snapshots,
    features,
    training_data,
    model,
    refreshed_model,
    pricing,
    demand_forecast,
]

defs = dg.Definitions(
    assets=dg.load_assets_from_modules(DOMAINS),
    asset_checks=dg.load_asset_checks_from_modules(DOMAINS),
    jobs=[weekly_job],
    schedules=[weekly_refresh_schedule],
    sensors=[new_week_file_sensor, model.model_retraining_sensor, dead_run_sweeper],
    resources=default_resources(),
    executor=dg.multiprocess_executor.configured(STEP_PROCESSES),
)

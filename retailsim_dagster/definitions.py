"""Everything Dagster loads: ``dagster dev``, ``dagster asset materialize -m
retailsim_dagster.definitions``.
"""

import dagster as dg

from retailsim_dagster.assets import (
    customer_snapshots,
    derived_prices,
    features,
    model,
    pricing,
    product_graph,
    raw_transactions,
    source_promotions,
    training_data,
)
from retailsim_dagster.automation import new_week_file_sensor, weekly_job, weekly_refresh_schedule
from retailsim_dagster.executor import prompt_multiprocess_executor
from retailsim_dagster.recovery import dead_run_sweeper
from retailsim_dagster.resources import default_resources

# Local scale-out: steps in separate processes, two at a time on this 2-core machine. Each step
# forks from a process that imported these definitions once: the run's own where that is safe
# (D105), else a forkserver that preloads the modules below. A spawned step would spend ~8 s of
# CPU importing torch, DGL, Polars and Dagster, and a full run has about 25 steps.
# A step then opens the instance with imports Dagster makes lazily (SQLAlchemy, Alembic, its
# SQLite storage, UPath, the compute-log watcher): ~1 s of CPU a step, 0.08 s preloaded (D99).
STEP_IMPORTS = [
    "retailsim_dagster.definitions",
    "retailsim_dagster.instance_storage",
    "dagster._core.instance.factory",
    "dagster._core.secrets.env_file",
    "dagster._core.storage.local_compute_log_manager",
    "dagster._core.storage.migration.utils",
    "dagster._core.storage.root",
    "fsspec.implementations.local",
    "upath.implementations.local",
    "watchdog.observers.polling",
    "watchdog.utils.dirsnapshot",
]
STEP_PROCESSES = {
    "max_concurrent": 2,
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
    pricing,
]

defs = dg.Definitions(
    assets=dg.load_assets_from_modules(DOMAINS),
    asset_checks=dg.load_asset_checks_from_modules(DOMAINS),
    jobs=[weekly_job],
    schedules=[weekly_refresh_schedule],
    sensors=[new_week_file_sensor, model.model_retraining_sensor, dead_run_sweeper],
    resources=default_resources(),
    executor=prompt_multiprocess_executor.configured(STEP_PROCESSES),
)

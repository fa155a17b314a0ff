"""Everything Dagster loads: ``dagster dev``, ``dagster asset materialize -m
retailsim_dagster.definitions``.
"""

import dagster as dg

from retailsim_dagster.assets import (
    customer_snapshots,
    derived_prices,
    features,
    model,
    product_graph,
    raw_transactions,
    training_data,
)
from retailsim_dagster.automation import new_week_file_sensor, weekly_job, weekly_refresh_schedule
from retailsim_dagster.recovery import dead_run_sweeper
from retailsim_dagster.resources import default_resources

# One module per domain: its assets and, next to them, their checks.
DOMAINS = [
    raw_transactions,
    derived_prices,
    product_graph,
    customer_snapshots,
    features,
    training_data,
    model,
]

defs = dg.Definitions(
    assets=dg.load_assets_from_modules(DOMAINS),
    asset_checks=dg.load_asset_checks_from_modules(DOMAINS),
    jobs=[weekly_job],
    schedules=[weekly_refresh_schedule],
    sensors=[new_week_file_sensor, model.model_retraining_sensor, dead_run_sweeper],
    resources=default_resources(),
    # Local scale-out: steps in separate processes, two at a time on this 2-core machine.
    executor=dg.multiprocess_executor.configured({"max_concurrent": 2}),
)

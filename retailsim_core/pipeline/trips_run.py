"""``trip_forecast``: the trips check over the warehouse's test weeks (issue #61).

Reads ``customer_trips``, the promotion plan and, on synthetic data, the planted world; writes
``trip_forecast.parquet`` (each test customer-week: visited, trips, the model's visit
probability with and without the week's mailer, expected trips and the baselines' rates),
``store_shares.parquet`` (each test customer-week's stores and their shares, from the
tuned half-life: where the world model's demand puts the expected trips) and ``scores.json``
(visit log-loss, store-choice accuracy, intervals, the tuned half-life; the planted traffic
response's recovery where a world is given).
"""

from __future__ import annotations

import time
from pathlib import Path

from retailsim_core.demand.cells.known_inputs import calendar_frame
from retailsim_core.demand.response_recovery import lift_recovery, planted_visit_lift
from retailsim_core.demand.trips.mailer import mailer_products, mailer_staples
from retailsim_core.demand.trips.trip_check import store_scores, tuned_store_choice, visit_scores
from retailsim_core.demand.trips.visits import (
    TripsConfig,
    chosen_features,
    store_shares,
    visit_features,
    visit_forecasts,
    visit_panel,
)
from retailsim_core.ingest.promotion_plan import SOURCE_PROMOTIONS_SCHEMA
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.io import atomic_write_parquet
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import PROMOTION_CELLS_TABLE, TRIPS_TABLE
from retailsim_core.training.checkpoints.checkpoint import write_json


def run_trip_check(
    warehouse: Warehouse,
    split: TemporalSplit,
    folder: Path,
    n_boot: int = 500,
    seed: int = 0,
    cfg: TripsConfig | None = None,
    world=None,
) -> dict:
    """Forecast every test week's visits and every test trip's store; write and return the
    scores (``seconds`` included). ``world``: the planted world the data was generated from,
    whose traffic response the visit model's is scored against (None: real data)."""
    start = time.perf_counter()
    cfg = cfg or TripsConfig(seed=seed)
    first, last = split.valid_end + 1, max(warehouse.weeks(TRIPS_TABLE))
    trips = warehouse.scan(TRIPS_TABLE).select(
        "customer_id", "week", "basket_id", "store_id", "shop_date", "shop_hour"
    )
    plan = warehouse.scan(PROMOTION_CELLS_TABLE, schema=SOURCE_PROMOTIONS_SCHEMA)
    panel = visit_panel(trips, first_forecast_week=first, last_week=last)
    valid_weeks = (split.train_end + 1, split.valid_end)
    # From the weeks the feature choice is fitted on (before the validation weeks) to the last.
    staples = mailer_staples(
        panel,
        warehouse.scan(TRIPS_TABLE).select(*trips.collect_schema().names(), "store_region",
                                           "products"),
        plan,
        weeks=(valid_weeks[0] - cfg.train_weeks, last),
    )  # fmt: skip
    frame = panel.pipe(
        visit_features,
        calendar_frame(warehouse.calendar, range(1, last + 1)),
        mailer_products(plan),
        staples,
        smoothing=cfg.smoothing,
    ).collect()
    features, valid_losses = chosen_features(frame, valid_weeks=valid_weeks, cfg=cfg)
    visits = visit_forecasts(frame, first_forecast_week=first, cfg=cfg, features=features)
    stores, half_life, valid_accuracy = tuned_store_choice(
        trips, valid_weeks=valid_weeks, test_weeks=(first, last),
        cfg=cfg,
    )  # fmt: skip
    scores = {
        "visits": visit_scores(visits, n_boot=n_boot, seed=seed),
        "stores": store_scores(stores, n_boot=n_boot, seed=seed)
        | {
            "half_life": half_life,
            "validation_accuracy": {str(k): v for k, v in valid_accuracy.items()},
        },
        "test_weeks": [first, last],
        "visit_features": {"chosen": list(features), "validation_log_loss": valid_losses},
    }
    if world is not None:  # the planted traffic response (D132)
        lifts = planted_visit_lift(world, visits)
        scores["planted_traffic"] = lift_recovery(lifts, "customer_id", n_boot=n_boot, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(visits, folder / "trip_forecast.parquet")
    at = visits.lazy().select("customer_id", "week")
    shares = store_shares(trips, at, half_life=half_life, max_stores=cfg.max_stores,
                          min_share=cfg.min_share)  # fmt: skip
    atomic_write_parquet(shares.collect(), folder / "store_shares.parquet")
    scores["seconds"] = round(time.perf_counter() - start, 1)
    write_json(folder / "scores.json", scores)
    return scores

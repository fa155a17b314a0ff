"""The price-checks stage: the model's elasticities, a check of simulated baskets against the
observed ones, and the model's own- and cross-price response against the test weeks'
promotions (planted elasticities too when the truth is bound)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.evaluation.observed_response import observed_check
from retailsim_core.evaluation.price_response import price_response, simulation_check
from retailsim_core.evaluation.tasks import EvalTasks
from retailsim_core.pipeline.feature_weeks import PRICE_FEATURES_TABLE
from retailsim_core.pipeline.graph_tables import load_graph
from retailsim_core.pipeline.price_weeks import PRICES_TABLE, promotion_cells
from retailsim_core.simulation import expected_basket_size
from retailsim_core.split import TemporalSplit
from retailsim_core.warehouse import Warehouse

SIMULATED_CONTEXTS = 512  # test baskets the simulation check draws for
OBSERVED_CONTEXTS = 128  # test contexts of the held-out promotion check


def price_checks(
    tasks: EvalTasks,
    rows: np.ndarray,
    warehouse: Warehouse,
    split: TemporalSplit,
    truth_dir: Path | None,
    seed: int,
    log: Callable[[str], None],
) -> tuple[dict, dict]:
    """(price response with its "observed" check, simulation check) on scored test ``rows``;
    ``truth_dir``: the planted truth when the oracles run, else None."""
    model, data, samples = tasks.model, tasks.data, tasks.samples
    response = price_response(model, data, rows, tasks.categories, truth_dir)
    sim_rows = rows[:: max(len(rows) // SIMULATED_CONTEXTS, 1)][:SIMULATED_CONTEXTS]
    sim_samples = samples[sim_rows]
    sim_prices = (
        warehouse.scan(PRICE_FEATURES_TABLE, sorted(set(sim_samples["week"].to_list())))
        .filter(pl.col("store_id").is_in(sim_samples["store_id"].unique().implode()))
        .collect()
    )
    simulation = simulation_check(
        model,
        data,
        sim_rows,
        sim_prices,
        sim_samples["store_id"].to_list(),
        sim_samples["week"].to_list(),
        seed=seed,
    )
    response["observed"] = observed_response(warehouse, split, tasks, rows, seed)
    log(
        f"elasticities for {response['context']}; simulation check {simulation['summary']}; "
        f"against held-out weeks {response['observed']}"
    )
    return response, simulation


def observed_response(
    warehouse: Warehouse, split: TemporalSplit, tasks: EvalTasks, rows: np.ndarray, seed: int
) -> dict:
    """The model's own- and cross-price response against the test weeks' promotions (128 test
    contexts; the substitution edges of the product graph)."""
    weeks = [w for w in warehouse.weeks(PRICES_TABLE) if w > split.valid_end]
    if not weeks:
        return {"note": "no test week of derived_prices is materialized"}
    cells = promotion_cells(warehouse, weeks)
    batch = tasks.data[rows[:: max(len(rows) // OBSERVED_CONTEXTS, 1)][:OBSERVED_CONTEXTS]]
    size = expected_basket_size(tasks.model, batch)
    return {
        "weeks": [weeks[0], weeks[-1]],
        **observed_check(
            tasks.model,
            batch,
            size,
            tasks.data.vocab,
            cells,
            load_graph(warehouse).edges,
            seed=seed,
        ),
    }

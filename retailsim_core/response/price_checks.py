"""The price-checks stage: the model's elasticities, a check of simulated baskets against the
observed ones, and the model's own- and cross-price response against the test weeks'
promotions (planted elasticities too when the truth is bound).

Its inputs from the warehouse (``PriceInputs``) are read by the pipeline for the contexts this
stage draws (``simulation_rows``), never here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from retailsim_core.counterfactual.simulate import sizes_and_units
from retailsim_core.next_basket.tasks import EvalTasks
from retailsim_core.response.observed_response import observed_check
from retailsim_core.response.price_response import (
    expected_size_check,
    price_response,
    rows_of,
    simulation_check,
)
from retailsim_core.storage.heap import release_free_heap
from retailsim_core.synth.world import PlantedTruth

SIMULATED_CONTEXTS = 512  # test baskets the simulation check draws for
OBSERVED_CONTEXTS = 128  # test contexts of the held-out promotion check


@dataclass(frozen=True)
class PriceInputs:
    """What the stage reads besides the tasks, loaded by the pipeline."""

    sim_prices: pl.DataFrame  # price_features of the simulated contexts' stores and weeks
    promotion_weeks: list[int]  # the test weeks of derived_prices ([] when none is materialized)
    promotion_cells: pl.LazyFrame | None  # their cells (``promotion_cells``: a lazy scan)
    edges: pl.DataFrame  # the product graph's edges (substitutes)
    trips: pl.DataFrame | None = None  # the trip store: basket_id, store_id, week, products
    promotions: pl.LazyFrame | None = None  # PROMOTIONS_SCHEMA cells known before the sales
    promotion_source: str = ""  # where ``promotions`` come from (the report says it)
    fit_baskets: pl.Series | None = None  # training weeks' sample baskets the baselines fit on


def simulation_rows(rows: np.ndarray) -> np.ndarray:
    """The scored test rows the simulation check draws its contexts from."""
    return rows[:: max(len(rows) // SIMULATED_CONTEXTS, 1)][:SIMULATED_CONTEXTS]


def price_checks(
    tasks: EvalTasks,
    rows: np.ndarray,
    inputs: PriceInputs,
    truth: PlantedTruth | None,
    seed: int,
    log: Callable[[str], None],
    chunk: int | None = None,
) -> tuple[dict, dict]:
    """(price response with its "observed" check, simulation check) on scored test ``rows``;
    ``truth``: the planted truth when the oracles run, else None; ``chunk``: contexts
    differentiated or simulated at once (None: every one; D127)."""
    model, data, samples = tasks.model, tasks.data, tasks.samples
    response = price_response(model, data, rows, tasks.categories, truth, chunk=chunk)
    release_free_heap()  # each check's freed buffers before the next's (D126)
    sim_rows = simulation_rows(rows)
    sim_samples = samples[sim_rows]
    simulation = simulation_check(
        model,
        data,
        sim_rows,
        inputs.sim_prices,
        sim_samples["store_id"].to_list(),
        sim_samples["week"].to_list(),
        seed=seed,
        chunk=chunk,
    )
    simulation["summary"] |= expected_size_check(model, data, rows, seed=seed, chunk=chunk)
    release_free_heap()
    response["observed"] = observed_response(inputs, tasks, rows, seed, chunk)
    log(
        f"elasticities for {response['context']}; simulation check {simulation['summary']}; "
        f"against held-out weeks {response['observed']}"
    )
    return response, simulation


def observed_response(
    inputs: PriceInputs, tasks: EvalTasks, rows: np.ndarray, seed: int, chunk: int | None = None
) -> dict:
    """The model's own- and cross-price response against the test weeks' promotions (128 test
    contexts, ``chunk`` of them per backward pass; the substitution edges of the product
    graph)."""
    weeks = inputs.promotion_weeks
    if not weeks:
        return {"note": "no test week of derived_prices is materialized"}
    picked = rows[:: max(len(rows) // OBSERVED_CONTEXTS, 1)][:OBSERVED_CONTEXTS]
    contexts = rows_of(tasks.data, picked)  # a chunk's batch at a time (D127)
    size, _ = sizes_and_units(tasks.model, contexts, len(picked), chunk)
    return {
        "weeks": [weeks[0], weeks[-1]],
        **observed_check(
            tasks.model,
            contexts,
            size,
            tasks.data.vocab,
            inputs.promotion_cells,
            inputs.edges,
            seed=seed,
            chunk=chunk,
        ),
    }

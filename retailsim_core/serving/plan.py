"""What the service knows of a forecast for a plan (``/v1/forecast``, D130): a product's plan,
the shelf cells a plan starts from, and the planner the pipeline gives the service (the demand
forecast's inputs, ``demand/world/plan_forecast.py``, a layer above this one).

Glossary: P asked products, S shelf features.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import polars as pl
import torch

from retailsim_core.serving.context import CONTEXT_SCHEMA, ServingData


@dataclass(frozen=True)
class PlanChange:
    """One product's plan at the store that week; None keeps the plan on file."""

    display: bool | None = None
    mailer: bool | None = None
    price_multiplier: float = 1.0  # of the shelf price on file

    @property
    def changes(self) -> bool:
        return self != PlanChange()


class Planner(Protocol):
    """Forecasts a store-week's units under a plan (``plan_forecast.DemandInputs``)."""

    def weeks(self) -> list[int]: ...

    def expected_trips(self, store_id: str, week: int) -> float: ...

    def forecast(
        self, model, data: ServingData, store_id: str, date: dt.date, tokens: np.ndarray,
        changes: list[PlanChange],
    ) -> pl.DataFrame: ...  # fmt: skip


def shelf_cells(
    data: ServingData, store_id: str, date: dt.date, tokens: np.ndarray
) -> torch.Tensor:
    """(P, S) the shelf cells of ``tokens`` at the store in the week of ``date``: the plan on
    file, the prices known before the week (every context of a store-week reads the same)."""
    one = pl.DataFrame(
        {"customer_id": [None], "store_id": [store_id], "date": [date], "hour": [12]},
        schema=CONTEXT_SCHEMA,
    )
    return data.batch(one)["shelf"][0, torch.as_tensor(np.asarray(tokens, dtype=np.int64))]

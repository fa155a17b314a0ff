"""A forecast for a plan (issue #61): the units a store sells of some products in a week, made
as the world model's demand forecast makes them (``world_demand``), under the promotion plan on
file and under a plan the caller proposes: products put on display or taken off it, into the
mailer or out of it, at another price.

    units = c · sum over the store-week's shoppers of E[trips] · P(basket holds p) · E[q]

The shoppers and their expected trips are the trip forecast's for that store-week, as
``world_model_demand`` wrote them (``DemandInputs``), with its calibration factor c and the
units per line before the forecast weeks. A plan moves what goes in the baskets (the changed
products' and their substitutes' price terms, ``shopper_units.held_units``) and the units per
line (the quantity model's display, mailer and stock-up effects), not who comes: the visit
forecast is the trip forecast's of the plan on file (D130).

Glossary: B contexts of a batch, P asked products, K changed (context, product) cells, S shelf
features.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import torch

from retailsim_core.datasets.shelf import SHELF_FEATURES, with_price_multipliers
from retailsim_core.demand.world.shopper_units import held_units
from retailsim_core.demand.world.world_demand import CONTEXT_COLUMNS, cell_quantity, median_units
from retailsim_core.models.world_model import WorldModel
from retailsim_core.serving.context import ServingData
from retailsim_core.serving.plan import PlanChange, shelf_cells
from retailsim_core.storage.io import atomic_write_parquet
from retailsim_core.training.checkpoints.checkpoint import read_json, write_json

CONTEXTS_FILE, LINES_FILE, INPUTS_FILE = (
    "forecast_contexts.parquet", "line_quantities.parquet", "plan_inputs.json"
)  # fmt: skip
DISPLAY, MAILER, AVAILABLE, DEPTH = (
    SHELF_FEATURES.index(f) for f in ("display", "mailer", "available", "discount_depth")
)


@dataclass(frozen=True)
class DemandInputs:
    """What ``world_model_demand`` forecast the test weeks with, for plans of those weeks."""

    contexts: pl.DataFrame  # customer_id, store_id, week, date, hour, weight (expected trips)
    lines: pl.DataFrame  # product_id, mean_quantity, median_quantity (units per line)
    coefficients: dict  # the quantity model's display and mailer effects
    mean_quantity: float  # every line's mean units: a product never sold before
    factor: float  # the calibration factor c

    def write(self, folder: Path) -> None:
        atomic_write_parquet(self.contexts, folder / CONTEXTS_FILE)
        atomic_write_parquet(self.lines, folder / LINES_FILE)
        write_json(folder / INPUTS_FILE, {
            "coefficients": self.coefficients, "mean_quantity": self.mean_quantity,
            "factor": self.factor, "weeks": self.weeks(),
        })  # fmt: skip

    def weeks(self) -> list[int]:
        return sorted(self.contexts["week"].unique().to_list())

    def expected_trips(self, store_id: str, week: int) -> float:
        """The trip forecast's trips of every shopper to the store that week."""
        here = (pl.col("store_id") == store_id) & (pl.col("week") == week)
        return float(self.contexts.filter(here)["weight"].sum())

    def forecast(
        self, model: WorldModel, data: ServingData, store_id: str, date: dt.date,
        tokens: np.ndarray, changes: list[PlanChange],
    ) -> pl.DataFrame:  # fmt: skip
        """``plan_forecast`` with these inputs (the service's ``Planner``)."""
        return plan_forecast(model, data, self, store_id, date, tokens, changes)

    @classmethod
    def read(cls, folder: Path) -> DemandInputs | None:
        """The inputs ``write`` left in ``folder``; None when it has not (no demand forecast)."""
        if not all((folder / f).exists() for f in (CONTEXTS_FILE, LINES_FILE, INPUTS_FILE)):
            return None
        meta = read_json(folder / INPUTS_FILE)
        return cls(
            pl.read_parquet(folder / CONTEXTS_FILE), pl.read_parquet(folder / LINES_FILE),
            meta["coefficients"], float(meta["mean_quantity"]), float(meta["factor"]),
        )  # fmt: skip


def planned_cells(cells: torch.Tensor, changes: list[PlanChange]) -> torch.Tensor:
    """(K, S) shelf cells under each cell's change: the price multiplied (the depth and promo
    flag follow, ``with_price_multipliers``), display and mailer set where the change says;
    an unavailable cell stays so."""
    log_m = torch.tensor([np.log(c.price_multiplier) for c in changes], dtype=cells.dtype)
    out = with_price_multipliers(cells, log_m)
    for column, flags in ((DISPLAY, [c.display for c in changes]),
                          (MAILER, [c.mailer for c in changes])):  # fmt: skip
        told = torch.tensor([f is not None for f in flags])
        value = torch.tensor([bool(f) for f in flags], dtype=cells.dtype) * cells[:, AVAILABLE]
        out[:, column] = torch.where(told, value, out[:, column])
    return out


@torch.no_grad()
def plan_forecast(
    model: WorldModel,
    data: ServingData,
    inputs: DemandInputs,
    store_id: str,
    date: dt.date,
    tokens: np.ndarray,
    changes: list[PlanChange],
    batch_size: int = 256,
) -> pl.DataFrame:
    """One row per asked token (P,): product_id, promotion and units per line on file and under
    the plan, the expected buyers (c · weighted baskets holding it) and units both ways, the
    median units under the plan. ``changes``: (P,) the plan of each asked product. A
    store-week the trip forecast sends no shopper to sells nothing."""
    week = data.calendar.week_of_date(date)
    contexts = inputs.contexts.filter((pl.col("store_id") == store_id) & (pl.col("week") == week))
    tokens = torch.as_tensor(np.asarray(tokens, dtype=np.int64))
    moved = [i for i, c in enumerate(changes) if c.changes]
    buyers = torch.zeros(len(tokens), dtype=torch.float64)
    planned = buyers.clone()
    model.train(False)
    for lo in range(0, contexts.height, batch_size):
        chunk = contexts.slice(lo, batch_size)
        batch = data.batch(chunk.select(CONTEXT_COLUMNS))
        n = len(chunk)
        b = torch.arange(n).repeat_interleave(len(moved))  # (K,) every context × moved product
        t = tokens[moved].repeat(n)
        cell_changes = [changes[i] for i in moved] * n
        held, held_plan = held_units(
            model, batch, b, t, lambda cells, c=cell_changes: planned_cells(cells, c)
        )  # (B, V') each
        weight = torch.tensor(chunk["weight"].to_numpy())[:, None]  # (B, 1)
        buyers += (held[:, tokens].double() * weight).sum(0)
        planned += (held_plan[:, tokens].double() * weight).sum(0)
    shelf = shelf_cells(data, store_id, date, tokens.numpy())
    return _table(data, inputs, tokens.numpy(), changes, shelf, buyers.numpy(), planned.numpy())


def _kind(display: np.ndarray, mailer: np.ndarray) -> list[str]:
    names = {(0, 0): "none", (1, 0): "display", (0, 1): "mailer", (1, 1): "display+mailer"}
    return [names[(int(d), int(m))] for d, m in zip(display, mailer, strict=True)]


def _table(data, inputs, tokens, changes, shelf, buyers, planned) -> pl.DataFrame:
    """The forecast rows (see ``plan_forecast``)."""
    display, mailer = shelf[:, DISPLAY].numpy() > 0, shelf[:, MAILER].numpy() > 0
    # The discounts on file and under the plan: units per line stock up on a cut.
    depth_on_file = shelf[:, DEPTH].double().numpy()
    repriced = np.array([c.price_multiplier != 1.0 for c in changes])  # the rest keep their bits
    planned_depth = planned_cells(shelf, changes)[:, DEPTH].double().numpy()
    depth = np.where(repriced, planned_depth, depth_on_file)
    plan_display = [
        d if c.display is None else c.display for d, c in zip(display, changes, strict=True)
    ]
    plan_mailer = [
        m if c.mailer is None else c.mailer for m, c in zip(mailer, changes, strict=True)
    ]
    products = pl.DataFrame({"token": tokens.astype(np.int32)}).join(
        data.vocab.frame(), on="token", how="left", maintain_order="left"
    )["product_id"]
    rows = pl.DataFrame({
        "product_id": products,
        "promotion_on_file": _kind(display, mailer),
        "promotion": _kind(np.asarray(plan_display), np.asarray(plan_mailer)),
        "depth_on_file": depth_on_file, "depth": depth,
    })  # fmt: skip
    coef, overall = inputs.coefficients, inputs.mean_quantity
    lines = inputs.lines.lazy()

    def per_line(kind: str) -> pl.Series:
        depth = "depth_on_file" if kind == "promotion_on_file" else "depth"
        return cell_quantity(
            rows.lazy().select("product_id", promotion=kind, depth=depth), lines, coef, overall
        ).collect()["quantity"]

    median = rows.join(inputs.lines, on="product_id", how="left", maintain_order="left")[
        "median_quantity"
    ].fill_null(1.0)
    on_file, plan = inputs.factor * buyers, inputs.factor * planned
    return rows.with_columns(
        buyers_on_file=pl.Series(on_file), buyers=pl.Series(plan),
        units_per_line_on_file=per_line("promotion_on_file"),
        units_per_line=per_line("promotion"),
    ).with_columns(
        units_on_file=pl.col("buyers_on_file") * pl.col("units_per_line_on_file"),
        units=pl.col("buyers") * pl.col("units_per_line"),
        units_median=median_units(plan, median.to_numpy()),
    ).drop("depth_on_file", "depth")  # fmt: skip

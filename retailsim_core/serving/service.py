"""The world model as a service, without any web code: next-basket recommendations, simulated
baskets (optionally at counterfactual prices), price elasticities, a store-week's units under a
promotion and price plan, and model information for contexts (customer, store, date, hour).
The web app (``retailsim_serve``) only translates HTTP.

Every request is checked against what the service knows before any work; a problem raises
``RequestError`` naming the field (the app answers 4xx with it).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from retailsim_core.counterfactual.simulate import elasticities as price_elasticities
from retailsim_core.counterfactual.simulate import expected_basket_size, generate
from retailsim_core.datasets.batch import Batch
from retailsim_core.datasets.shelf import SHELF_FEATURES
from retailsim_core.serving.context import CONTEXT_SCHEMA, ServingData
from retailsim_core.serving.onnx_scoring import OnnxScorer
from retailsim_core.serving.plan import PlanChange, Planner, shelf_cells
from retailsim_core.serving.scorer import world_model_scorer
from retailsim_core.settings import load_settings
from retailsim_core.tables import WORLD_DEMAND_TABLE

CHUNK = 128  # contexts scored together in a large batch


class RequestError(ValueError):
    """A request the service cannot answer; ``field`` names the offending input."""

    def __init__(self, field: str, message: str, status: int = 422):
        super().__init__(f"{field}: {message}")
        self.field, self.message, self.status = field, message, status


@dataclass(frozen=True)
class Context:
    customer_id: str | None  # None: a new customer
    store_id: str
    date: dt.date
    hour: int = 12


class WorldModelService:
    """Built by the pipeline (``pipeline/serving_inputs.load_service``) from what it read: the
    checkpoint's model, vocabulary and config, the served weeks' inputs, the token categories,
    the ONNX scorer when asked for and available (``onnx_note`` says why not), and the
    evaluation's headline metrics."""

    def __init__(
        self,
        model,
        vocab,
        config: dict,
        data: ServingData,
        checkpoint_id: str,
        categories: np.ndarray,
        onnx: OnnxScorer | None = None,
        onnx_note: str = "",
        evaluation: dict | None = None,
        demand: Planner | None = None,
    ):
        self.model, self.vocab, self.config, self.data = model, vocab, config, data
        self.checkpoint_id = checkpoint_id
        self.onnx, self.onnx_note = onnx, onnx_note
        self._score = world_model_scorer(model)
        self._products = pl.DataFrame({"product_id": list(vocab.products)})
        self._names = np.asarray(vocab.products)  # (V - 1,) product of each token - 1: built once
        self.categories = categories  # (V,) category code of every token
        self.evaluation = evaluation or {}
        self.demand = demand  # world_model_demand's inputs: plans of its weeks are forecast

    # ---- checks -------------------------------------------------------------------------
    def check(self, contexts: list[Context], prefix: str = "requests[{i}].") -> None:
        """Raise ``RequestError`` for the first context the service cannot answer, naming the
        field as the request spells it: ``prefix`` formatted with the position, then the field."""
        first, last = self.data.dates
        customers, stores = self.data.lookups["customer"], self.data.lookups["store"]
        for i, c in enumerate(contexts):
            where = prefix.format(i=i)
            if c.customer_id is not None and c.customer_id not in customers:
                raise RequestError(
                    f"{where}customer_id",
                    f"unknown customer {c.customer_id!r}; omit customer_id for a new customer",
                    404,
                )
            if c.store_id not in stores:
                raise RequestError(f"{where}store_id", f"unknown store {c.store_id!r}", 404)
            if not first <= c.date <= last:
                raise RequestError(
                    f"{where}date", f"{c.date} is outside the served calendar {first}..{last}"
                )

    def contexts_frame(
        self, contexts: list[Context], prefix: str = "requests[{i}]."
    ) -> pl.DataFrame:
        """The contexts as a frame (CONTEXT_SCHEMA), after ``check``."""
        self.check(contexts, prefix)
        return pl.DataFrame(
            {
                "customer_id": [c.customer_id for c in contexts],
                "store_id": [c.store_id for c in contexts],
                "date": [c.date for c in contexts],
                "hour": [c.hour for c in contexts],
            },
            schema=CONTEXT_SCHEMA,
        )

    def tokens_of(self, product_ids: list[str], field: str) -> np.ndarray:
        found = pl.DataFrame({"product_id": product_ids}, schema={"product_id": pl.String}).join(
            self.vocab.frame(), on="product_id", how="left", maintain_order="left"
        )
        missing = found.filter(pl.col("token").is_null())["product_id"]
        if len(missing):
            raise RequestError(field, f"unknown product {missing[0]!r}", 404)
        return found["token"].to_numpy().astype(np.int64)

    # ---- answers ------------------------------------------------------------------------
    @torch.inference_mode()
    def log_probs(self, batch: Batch) -> torch.Tensor:
        """(B, V) next-basket log-probabilities; [PAD]/[MASK]/[EOS] at -inf."""
        if self.onnx is not None:
            log_p = self.onnx(batch).double()
            return log_p.masked_fill(self.model.excluded(len(log_p)), -torch.inf)
        return self._score(np.arange(len(batch["basket_labels"])), batch)

    def recommend(self, contexts: list[Context], k: int) -> list[dict]:
        """Top-k products of each context. A large batch is scored in chunks of contexts with
        similar history lengths: each chunk pads its customers' history products (U) to its own
        longest, not the batch's (5x less padding on the default data)."""
        frame = self.contexts_frame(contexts)
        order = (
            np.argsort(self.data.history_trips(frame), kind="stable")
            if len(contexts) > CHUNK
            else np.arange(len(contexts))
        )
        width = self.data.tensor_cfg.max_history_trips if self.onnx is not None else None
        k = min(k, self.vocab.n_products)
        names = self._names
        out: list[dict] = [{}] * len(contexts)
        for part in np.array_split(order, max(1, -(-len(order) // CHUNK))):
            batch = self.data.batch(frame[part], history_width=width)
            top = torch.topk(self.log_probs(batch), k, dim=1)
            products = names[top.indices.numpy() - 1]
            scores = top.values.exp().numpy()
            cold = batch["cold_start"].numpy()
            for j, i in enumerate(part):
                out[i] = {
                    "products": products[j].tolist(),
                    "scores": scores[j].tolist(),
                    "cold_start": bool(cold[j]),
                }
        return out

    def _repricing(self, changes: dict[str, float] | None) -> torch.Tensor | None:
        if not changes:
            return None
        tokens = self.tokens_of(list(changes), "price_multipliers")
        log_m = torch.zeros(self.vocab.size)
        log_m[torch.as_tensor(tokens)] = torch.log(torch.tensor(list(changes.values())))
        return log_m

    def simulate(
        self,
        context: Context,
        n: int,
        seed: int,
        price_multipliers: dict[str, float] | None = None,
        temperature: float = 1.0,
    ) -> list[list[str]]:
        frame = self.contexts_frame([context], "context.")
        log_m = self._repricing(price_multipliers)
        batch = self.data.batch(pl.concat([frame] * n))
        week = self.data.calendar.week_of_date(context.date)
        book = self.data.price_book([context.store_id] * n, [week] * n)
        baskets = generate(
            self.model, batch, book, seed=seed, log_multiplier=log_m, temperature=temperature
        )
        names = self._names
        return [names[np.asarray(b, dtype=np.int64) - 1].tolist() for b in baskets]

    def elasticities(self, context: Context, product_ids: list[str]) -> pl.DataFrame:
        frame = self.contexts_frame([context], "context.")
        tokens = self.tokens_of(product_ids, "product_ids")
        batch = self.data.batch(frame)
        off_shelf = np.flatnonzero(
            batch["shelf"][0, tokens, SHELF_FEATURES.index("available")] == 0
        )
        if len(off_shelf):  # no shelf price before the week: its elasticity is not defined
            raise RequestError(
                f"product_ids[{off_shelf[0]}]",
                f"{product_ids[off_shelf[0]]!r} is not on the shelf of store {context.store_id!r} "
                "that week (no price before it)",
                404,
            )
        size = expected_basket_size(self.model, batch)
        table = price_elasticities(self.model, batch, size, tokens, self.categories)
        names = self.vocab.frame()
        return (
            table.join(names.rename({"token": "product"}), on="product")
            .join(names.rename({"token": "other", "product_id": "other_id"}), on="other")
            .select("product_id", "other_id", "elasticity", "kind")
            .sort("product_id", "other_id")
        )

    def forecast(
        self, store_id: str, date: dt.date, product_ids: list[str], plan: dict[str, PlanChange]
    ) -> tuple[int, float, pl.DataFrame]:
        """(week, the shoppers' expected trips at the store, one row per product: units on
        file and under ``plan``; ``plan_forecast``). Only the weeks the demand forecast made
        its trips for can be planned: their shoppers are forecast, not observed."""
        self.contexts_frame([Context(None, store_id, date)], "")
        if self.demand is None:
            raise RequestError("date", f"no demand forecast in the warehouse: materialize "
                               f"{WORLD_DEMAND_TABLE}", 404)  # fmt: skip
        week = self.data.calendar.week_of_date(date)
        weeks = self.demand.weeks()
        if week not in weeks:
            raise RequestError(
                "date", f"week {week} is not a forecast week ({weeks[0]}..{weeks[-1]})"
            )
        unknown = [p for p in plan if p not in set(product_ids)]
        if unknown:
            raise RequestError(f"plan.{unknown[0]}", "a planned product must be asked for")
        tokens = self.tokens_of(product_ids, "product_ids")
        shelf = shelf_cells(self.data, store_id, date, tokens)
        for i, product in enumerate(product_ids):
            if product in plan and shelf[i, SHELF_FEATURES.index("available")] == 0:
                raise RequestError(
                    f"plan.{product}",
                    f"{product!r} is not on the shelf of store {store_id!r} that week",
                    404,
                )  # fmt: skip
        changes = [plan.get(p, PlanChange()) for p in product_ids]
        table = self.demand.forecast(self.model, self.data, store_id, date, tokens, changes)
        return week, self.demand.expected_trips(store_id, week), table

    def info(self) -> dict:
        first, last = self.data.dates
        split = self.config.get("split") or load_settings().split.__dict__
        return {
            "checkpoint_id": self.checkpoint_id,
            "model": self.config["model"],
            "parameters": self.config["summary"].get("parameters"),
            "training_weeks": [1, split.get("train_end")],
            "validation_weeks": [split.get("train_end", 0) + 1, split.get("valid_end")],
            "served_dates": [first.isoformat(), last.isoformat()],
            "vocabulary": self.vocab.n_products,
            "customers": len(self.data.lookups["customer"]),
            "stores": len(self.data.lookups["store"]),
            "evaluation": self.evaluation,
            "scoring": "onnxruntime" if self.onnx is not None else "pytorch",
            "scoring_note": self.onnx_note,
            "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }

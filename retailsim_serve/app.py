"""The FastAPI app: next-basket recommendations, batch scoring, basket simulation, price
elasticities, a store-week's units under a plan, health and model information. ``create_app``
builds it around a service loader; ``app_from_environment`` around the warehouse the
``RETAILSIM_*`` settings name.

Bad input is answered 4xx with the field it concerns: 422 for an invalid value (FastAPI's
validation, or a limit of ``ServeSettings``), 404 for an unknown customer, store or product,
413 for a body over ``max_body_bytes`` or a batch over ``max_batch``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path

import torch
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from retailsim_core.serving.plan import PlanChange
from retailsim_core.serving.service import Context, RequestError, WorldModelService
from retailsim_serve import schemas as s
from retailsim_serve.runtime import Admission, Busy, MicroBatcher, ServeSettings, ServiceHolder


def _context(body: s.TripContext) -> Context:
    return Context(body.customer_id, body.store_id, body.date, body.hour)


def _limit(field: str, value: int, most: int, status: int = 422) -> None:
    if value > most:
        raise RequestError(field, f"{value} is over the limit of {most}", status)


class BodyLimit:
    """Pure ASGI middleware: a request body over ``limit`` bytes is answered 413 before the app
    sees any of it. A declared Content-Length over the limit is refused unread; otherwise the
    body is received here, at most ``limit`` bytes of it, and replayed to the app, so a chunked
    body (no Content-Length) past the limit is a 413 too, not a parse error (a 400)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._too_large(send)
        parts, seen, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            parts.append(message.get("body", b""))
            seen += len(parts[-1])
            if seen > self.limit:
                return await self._too_large(send)
            more = message.get("more_body", False)
        body, replayed = b"".join(parts), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: wait for the disconnect, as Starlette does

        await self.app(scope, replay, send)

    async def _too_large(self, send):
        response = AsciiJSON(
            {"field": "body", "message": f"request body over {self.limit} bytes"}, 413
        )
        await response({"type": "http"}, None, send)


class AsciiJSON(JSONResponse):
    """JSON with non-ASCII characters escaped: whatever text a response repeats (an id in a
    404, a mapping key in a 422's ``loc``) is written, never a UnicodeEncodeError (a 500)."""

    def render(self, content) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode()


def create_app(
    load: Callable[[], WorldModelService],
    checkpoint: Path | Callable[[], Path],
    settings: ServeSettings = ServeSettings(),
    watch: bool = True,
) -> FastAPI:
    state: dict = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # One intra-op thread by default: on 2 cores, two PyTorch threads fight the HTTP event
        # loop for the CPU (p50 46 -> 30 ms at 8 clients on the default data).
        torch.set_num_threads(settings.threads)
        holder = await run_in_threadpool(ServiceHolder, load, checkpoint)
        state["holder"] = app.state.holder = holder
        state["batcher"] = MicroBatcher(holder, settings.max_batch)
        # Made here, on the server's event loop, which its semaphore belongs to.
        state["admission"] = app.state.admission = Admission(
            settings.max_concurrent, settings.max_queued
        )
        if watch:
            holder.watch(settings.reload_seconds)
        yield
        holder.stop()

    app = FastAPI(
        title="RetailSim world model",
        version="1",
        lifespan=lifespan,
        default_response_class=AsciiJSON,
        description="What will this customer buy at this store? Next-basket rankings, simulated "
        "baskets at actual or counterfactual prices, price elasticities, and a store-week's "
        "units under a promotion and price plan, from the trained "
        "world model. Predictions see only what is known before the trip (the customer's "
        "earlier weeks, the store, date and hour, the shelf prices).",
    )
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    _add_error_handlers(app, settings)
    _add_routes(app, state, settings)
    return app


def app_from_environment() -> FastAPI:
    """The app over the warehouse of ``RETAILSIM_WAREHOUSE_DIR`` (uvicorn's factory)."""
    from retailsim_core.pipeline.model_refresh import newest_model
    from retailsim_core.pipeline.readers.serving_inputs import load_service
    from retailsim_core.settings import check_environment
    from retailsim_core.storage.warehouse import Warehouse
    from retailsim_core.tables import REPORT_TABLE

    environment = check_environment()
    settings = ServeSettings.from_settings(environment)
    warehouse = Warehouse(environment.warehouse_dir, environment.calendar)

    def checkpoint():  # the newest refresh, else the trained checkpoint (D111)
        return newest_model(warehouse)

    def load() -> WorldModelService:
        return load_service(
            warehouse, checkpoint(), warehouse.table_dir(REPORT_TABLE), onnx=settings.onnx
        )

    return create_app(load, checkpoint, settings)


def _add_error_handlers(app: FastAPI, settings: ServeSettings) -> None:
    """Bad requests answer with the field at fault; a full server answers 503 and when to retry."""

    @app.exception_handler(RequestError)
    async def request_error(_: Request, err: RequestError):
        return AsciiJSON({"field": err.field, "message": err.message}, err.status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, err: RequestValidationError):
        """FastAPI's 422 ``detail`` list without the offending input: echoing it failed on
        non-finite numbers (NaN, 1e309) and would repeat whatever a client sent (D79)."""
        detail = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
            for e in err.errors()
        ]
        return AsciiJSON({"detail": detail}, 422)

    @app.exception_handler(Busy)
    async def busy(_: Request, __: Busy):
        message = f"{settings.max_concurrent} requests computing and {settings.max_queued} waiting"
        return AsciiJSON({"field": "request", "message": message}, 503, {"Retry-After": "1"})


def _add_routes(app: FastAPI, state: dict, settings: ServeSettings) -> None:
    """The endpoints; ``state`` holds the service holder, the batcher and the admission gate
    once the app's lifespan has started."""

    async def heavy(work: Callable, *args):
        """``work`` on a worker thread once a slot is free (``Admission``)."""
        async with state["admission"].slot():
            return await run_in_threadpool(work, *args)

    def service() -> WorldModelService:
        return state["holder"].service

    # Async, so they are answered on the event loop even when every worker thread computes.
    @app.get("/health", response_model=s.Health)
    async def health():
        return {"status": "ok", "checkpoint_id": service().checkpoint_id}

    @app.get("/v1/model")
    async def model_info() -> dict:
        """Checkpoint id, model config, training and served weeks, evaluation metrics."""
        return service().info() | {"limits": settings.__dict__, "reloads": state["holder"].reloads}

    @app.post(
        "/v1/next-basket",
        response_model=s.NextBasketResponse,
        responses={404: {"model": s.Problem}, 422: {"model": s.Problem}},
    )
    async def next_basket(body: s.NextBasketRequest):
        """Top-k products of the coming basket (the honest protocol: nothing of the basket)."""
        _limit("k", body.k, settings.max_k)
        context = _context(body)
        service().check([context], "")  # a bad context fails alone, before the batcher
        return await asyncio.wrap_future(state["batcher"].submit(context, body.k))

    @app.post("/v1/next-basket/batch", response_model=s.BatchResponse)
    async def batch(body: s.BatchRequest):
        """Many contexts in one call, scored in one pass."""
        _limit("k", body.k, settings.max_k)
        _limit("requests", len(body.requests), settings.max_batch, 413)
        svc = service()
        contexts = [_context(r) for r in body.requests]
        results = await heavy(svc.recommend, contexts, body.k)
        # Built here, not re-validated by the response model: that doubled the time of a batch.
        return AsciiJSON({"results": results, "checkpoint_id": svc.checkpoint_id})

    @app.post("/v1/simulate", response_model=s.SimulateResponse)
    async def simulate(body: s.SimulateRequest):
        """Sampled baskets for a context, at the week's or counterfactual prices; seeded."""
        _limit("n_baskets", body.n_baskets, settings.max_simulations)
        svc = service()
        baskets = await heavy(
            svc.simulate,
            _context(body.context),
            body.n_baskets,
            body.seed,
            body.price_multipliers,
            body.temperature,
        )
        return {"baskets": baskets, "checkpoint_id": svc.checkpoint_id}

    @app.post(
        "/v1/forecast",
        response_model=s.ForecastResponse,
        responses={404: {"model": s.Problem}, 422: {"model": s.Problem}},
    )
    async def forecast(body: s.ForecastRequest):
        """Units a store sells of some products in a forecast week: the shoppers the trip
        forecast sends there, the model's baskets on the week's shelf, units per line; under
        the plan on file and under the request's promotions and prices."""
        _limit("product_ids", len(body.product_ids), settings.max_products)
        if len(set(body.product_ids)) != len(body.product_ids):
            raise RequestError("product_ids", "a product is listed twice")
        plan = {p: PlanChange(**c.model_dump()) for p, c in body.plan.items()}
        svc = service()
        week, trips, table = await heavy(
            svc.forecast, body.store_id, body.date, body.product_ids, plan
        )
        return {"week": week, "store_id": body.store_id, "expected_trips": trips,
                "forecasts": table.to_dicts(), "checkpoint_id": svc.checkpoint_id}  # fmt: skip

    @app.post("/v1/elasticities", response_model=s.ElasticityResponse)
    async def elasticities(body: s.ElasticityRequest):
        """Own and cross price elasticities of the expected units of a product set (404 for a
        product not on the store's shelf that week: its elasticity is not defined)."""
        _limit("product_ids", len(body.product_ids), settings.max_products)
        if len(set(body.product_ids)) != len(body.product_ids):
            raise RequestError("product_ids", "a product is listed twice")
        svc = service()
        table = await heavy(svc.elasticities, _context(body.context), body.product_ids)
        return {"elasticities": table.to_dicts(), "checkpoint_id": svc.checkpoint_id}

"""Load test of the serving app over real HTTP: single next-basket requests from concurrent
clients (latency percentiles) and batch scoring (contexts per second), with PyTorch and with
onnxruntime scoring. The server runs as its own process (``python -m retailsim_serve``), the
load generator is an httpx async client in this one; on a 2-core machine they share the cores.

    python benchmarks/bench_serving.py --warehouse data/warehouse [--clients 8] [--requests 2000]

Requests are the test weeks' real trips (customer, store, date) at random hours. With
``--heavy N`` the single requests are measured again beside N clients that keep the heavy
slots full (largest simulations, elasticity sets and batches; 503 answers retried after their
Retry-After), and only that table is recorded (``serving_under_load``). With ``--forecasts N``
only N ``/v1/forecast`` requests are timed, one at a time (``serving_forecast``): a warehouse
with ``world_model_demand``'s plan inputs.

The app serves the newest refresh where there is one (D111), and the ONNX graph is exported from
``trained_checkpoint``: with refreshes published, the ``onnx`` mode has no graph of the served
model and fails its check (``--modes pytorch``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import polars as pl

from retailsim_core.calendar import monday_of
from retailsim_core.demand.world.plan_forecast import DemandInputs
from retailsim_core.pipeline.scoring_graph import export_checkpoint_graph
from retailsim_core.serving.onnx_scoring import scoring_graph_for
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import ONNX_TABLE, SAMPLES_TABLE, WORLD_DEMAND_TABLE
from retailsim_core.training.checkpoints.checkpoint import verified_id


def contexts(warehouse: Warehouse, first_date: str, n: int, seed: int) -> list[dict]:
    """Real (customer, store, week) triples of the served weeks, at a random day and hour."""
    first = dt.date.fromisoformat(first_date)
    weeks = [w for w in warehouse.weeks(SAMPLES_TABLE) if monday_of(w) >= first]
    trips = (
        warehouse.scan(SAMPLES_TABLE, weeks)
        .select("customer_id", "store_id", "week")
        .collect()
        .sample(n, with_replacement=True, seed=seed)
    )
    rng = np.random.default_rng(seed)
    days, hours = rng.integers(0, 7, n), rng.integers(8, 21, n)
    return [
        {
            "customer_id": c,
            "store_id": s,
            "date": (monday_of(w) + dt.timedelta(days=int(d))).isoformat(),
            "hour": int(h),
        }
        for (c, s, w), d, h in zip(trips.iter_rows(), days, hours, strict=True)
    ]


def start_server(warehouse: Path, port: int, onnx: bool) -> subprocess.Popen:
    env = os.environ | {
        "RETAILSIM_WAREHOUSE_DIR": str(warehouse),
        "RETAILSIM_SERVE_PORT": str(port),
        "RETAILSIM_SERVE_ONNX": "1" if onnx else "0",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "retailsim_serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.5)
    server.kill()
    raise RuntimeError("the server did not answer /health within 10 minutes")


async def single_requests(url: str, requests: list[dict], clients: int, k: int) -> dict:
    latencies: list[float] = []
    queue: asyncio.Queue = asyncio.Queue()
    for r in requests:
        queue.put_nowait(r)

    async def client(http: httpx.AsyncClient):
        while not queue.empty():
            body = queue.get_nowait() | {"k": k}
            t0 = time.perf_counter()
            r = await http.post(f"{url}/v1/next-basket", json=body)
            latencies.append(time.perf_counter() - t0)
            r.raise_for_status()

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients)) as http:
        for body in requests[:20]:  # warm-up
            await http.post(f"{url}/v1/next-basket", json=body | {"k": k})
        start = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        wall = time.perf_counter() - start
    ms = np.asarray(latencies) * 1000
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "p99_ms": float(np.percentile(ms, 99)),
        "requests_per_s": len(ms) / wall,
    }


async def under_load(url: str, requests: list[dict], clients: int, heavy: int, k: int) -> dict:
    """``single_requests`` while ``heavy`` other clients keep the server's slots for heavy work
    full (the largest simulations, elasticity sets and batches it accepts, in turn), as an
    operator's probe did: next-basket latency beside them, and how the heavy ones were answered
    (200, or 503 with Retry-After once the queue is full; D82)."""
    limits, answers, done = httpx.get(f"{url}/v1/model").json()["limits"], {}, asyncio.Event()
    top = {"k": limits["max_products"]}
    products = httpx.post(f"{url}/v1/next-basket", json=requests[0] | top).json()["products"]

    def bodies(i: int) -> tuple[str, dict]:
        context = requests[i % len(requests)]
        if i % 3 == 0:
            return "simulate", {"context": context, "n_baskets": limits["max_simulations"]}
        if i % 3 == 1:
            return "elasticities", {"context": context, "product_ids": products}
        batch = [requests[(i + j) % len(requests)] for j in range(limits["max_batch"])]
        return "next-basket/batch", {"requests": batch, "k": k}

    async def heavy_client(http: httpx.AsyncClient, start: int):
        i = start
        while not done.is_set():
            path, body = bodies(i)
            r = await http.post(f"{url}/v1/{path}", json=body)
            answers[r.status_code] = answers.get(r.status_code, 0) + 1
            if r.status_code == 503:
                await asyncio.sleep(float(r.headers.get("Retry-After", "1")))
            i += heavy

    async with httpx.AsyncClient(timeout=600) as http:
        load = [asyncio.create_task(heavy_client(http, i)) for i in range(heavy)]
        await asyncio.sleep(2.0)  # the slots fill before the measured requests start
        measured = await single_requests(url, requests, clients, k)
        done.set()
        await asyncio.gather(*load)
    return measured | {"heavy_answers": answers}


def batch_scoring(url: str, requests: list[dict], k: int, rounds: int) -> float:
    """Contexts per second of ``rounds`` batch calls of all ``requests``."""
    body = {"requests": requests, "k": k}
    with httpx.Client(timeout=600) as http:
        http.post(f"{url}/v1/next-basket/batch", json=body).raise_for_status()  # warm-up
        start = time.perf_counter()
        for _ in range(rounds):
            answer = http.post(f"{url}/v1/next-basket/batch", json=body)
            answer.raise_for_status()
            assert len(answer.json()["results"]) == len(requests)
        return rounds * len(requests) / (time.perf_counter() - start)


def forecast_requests(warehouse: Warehouse, n: int, products: int, seed: int) -> list[dict]:
    """``/v1/forecast`` bodies for ``n`` store-weeks of the demand forecast drawn at random (one
    plan each: the first product on display at 0.8 of its price), each for ``products`` of the
    store-week's panel cells, with its count of forecast shoppers."""
    folder = warehouse.table_dir(WORLD_DEMAND_TABLE)
    inputs = DemandInputs.read(folder)
    if inputs is None:
        raise SystemExit("no world_model_demand plan inputs: materialize world_model_demand")
    store_weeks = inputs.contexts.group_by("store_id", "week").agg(
        shoppers=pl.len(), date=pl.col("date").first()
    ).sort("store_id", "week").sample(n, with_replacement=True, seed=seed)  # fmt: skip
    cells = pl.read_parquet(folder / "world_model_demand.parquet")
    bodies = []
    for row in store_weeks.iter_rows(named=True):
        here = cells.filter(
            (pl.col("store_id") == row["store_id"]) & (pl.col("week") == row["week"])
        )
        asked = here.sort("product_id").head(products)["product_id"].to_list()
        body = {"store_id": row["store_id"], "date": row["date"].isoformat(), "product_ids": asked,
                "plan": {asked[0]: {"display": True, "price_multiplier": 0.8}}}  # fmt: skip
        bodies.append({"body": body, "shoppers": row["shoppers"]})
    return bodies


def forecast_latency(url: str, bodies: list[dict]) -> dict:
    """One client, one request at a time: each forecast's seconds (the store-week's shoppers
    are its cost)."""
    seconds = []
    with httpx.Client(timeout=120) as http:
        for b in bodies:
            start = time.perf_counter()
            answer = http.post(f"{url}/v1/forecast", json=b["body"])
            seconds.append(time.perf_counter() - start)
            answer.raise_for_status()
    ms, shoppers = np.asarray(seconds) * 1e3, [b["shoppers"] for b in bodies]
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
            "max_ms": float(ms.max()), "median_shoppers": float(np.median(shoppers)),
            "max_shoppers": int(max(shoppers))}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warehouse", type=Path, default=Path("data/warehouse"))
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument(
        "--heavy", type=int, default=0, help="also measure beside this many heavy clients"
    )
    parser.add_argument(
        "--forecasts", type=int, default=0,
        help="only time this many /v1/forecast requests (20 products, a plan each; PyTorch)",
    )  # fmt: skip
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--modes", default="pytorch,onnx")
    parser.add_argument(
        "--record",
        action="store_true",
        help="write results/serving.json (serving_one_client.json with --clients 1)",
    )
    args = parser.parse_args()
    rows, load_rows = [], []
    warehouse = Warehouse(args.warehouse)
    checkpoint_id = verified_id(warehouse.table_dir("trained_checkpoint"))  # what ONNX exports
    if (
        "onnx" in args.modes
        and scoring_graph_for(warehouse.table_dir(ONNX_TABLE), checkpoint_id)[0] is None
    ):
        print("exporting the ONNX scoring graph ...", flush=True)
        export_checkpoint_graph(warehouse)
    url = f"http://127.0.0.1:{args.port}"
    if args.forecasts:
        return forecasts_only(args, warehouse, url)
    header = ("scoring", "p50 ms", "p95 ms", "p99 ms", "req/s", "batch ctx/s")
    print(f"{header[0]:<10} " + " ".join(f"{h:>8}" for h in header[1:5]) + f" {header[5]:>12}")
    for mode in args.modes.split(","):
        server = start_server(args.warehouse, args.port, onnx=mode == "onnx")
        try:
            info = httpx.get(f"{url}/v1/model").json()
            served = info["checkpoint_id"]  # the newest refresh where there is one (D111)
            assert info["scoring"] == ("onnxruntime" if mode == "onnx" else "pytorch"), info
            requests = contexts(warehouse, info["served_dates"][0], args.requests, seed=0)
            single = asyncio.run(single_requests(url, requests, args.clients, args.k))
            batch = contexts(warehouse, info["served_dates"][0], args.batch, seed=1)
            rate = batch_scoring(url, batch, args.k, rounds=5)
            if args.heavy:
                loaded = asyncio.run(
                    under_load(url, requests[:500], args.clients, args.heavy, args.k)
                )
                load_rows.append(
                    [
                        mode,
                        args.clients,
                        args.heavy,
                        loaded["p50_ms"],
                        loaded["p99_ms"],
                        loaded["heavy_answers"].get(200, 0),
                        loaded["heavy_answers"].get(503, 0),
                        sum(n for c, n in loaded["heavy_answers"].items() if c >= 500 and c != 503),
                    ]
                )
                print(f"{mode} beside {args.heavy} heavy clients: {load_rows[-1]}", flush=True)
        finally:
            server.terminate()
            server.wait(30)
        print(
            f"{mode:<10} {single['p50_ms']:>8.1f} {single['p95_ms']:>8.1f} "
            f"{single['p99_ms']:>8.1f} {single['requests_per_s']:>8.1f} {rate:>12.0f}",
            flush=True,
        )
        rows.append(
            [
                mode,
                args.clients,
                single["p50_ms"],
                single["p95_ms"],
                single["p99_ms"],
                single["requests_per_s"],
                rate,
            ]
        )
    from benchmarks.results import record, table

    if args.record and not args.heavy:  # a run beside heavy clients records that table only
        cols = ["scoring", "clients", "p50 ms", "p95 ms", "p99 ms", "requests/s", "batch ctx/s"]
        fmts = {c: ".1f" for c in cols[2:6]} | {"batch ctx/s": ",.0f"}
        # One client (the per-request cost, the p50 target) and many (the service under
        # concurrency) are separate measurements, each file with its own commit and date.
        one = args.clients == 1
        record(
            "serving_one_client" if one else "serving",
            title="Serving, one client" if one else "Serving",
            command=f"python -m benchmarks.bench_serving --clients {args.clients} "
            f"--requests {args.requests} --batch {args.batch} --modes {args.modes} --record",
            tables={"latency": table(cols, rows, fmts)},
        )
    if args.record and load_rows:
        cols = ["scoring", "clients", "heavy clients", "p50 ms", "p99 ms", "heavy 200"]
        cols += ["heavy 503", "other 5xx"]
        record(
            "serving_under_load",
            title="Serving beside heavy requests",
            command=f"python -m benchmarks.bench_serving --clients {args.clients} "
            f"--heavy {args.heavy} --record",
            tables={"latency": table(cols, load_rows, {"p50 ms": ".1f", "p99 ms": ".1f"})},
        )
    print(
        f"{args.clients} concurrent clients, {args.requests} requests, top-{args.k}; "
        f"batches of {args.batch} contexts; served checkpoint {served}"
    )


def forecasts_only(args, warehouse: Warehouse, url: str) -> None:
    """Time ``args.forecasts`` plan forecasts over HTTP; recorded as ``serving_forecast``."""
    from benchmarks.results import record, table

    bodies = forecast_requests(warehouse, args.forecasts, products=20, seed=0)
    server = start_server(args.warehouse, args.port, onnx=False)
    try:
        got = forecast_latency(url, bodies)
    finally:
        server.terminate()
        server.wait(30)
    print(got)
    if args.record:
        cols = ["requests", "products", "median shoppers", "most shoppers", "p50 ms", "p95 ms"]
        cols += ["max ms"]
        row = [args.forecasts, 20, got["median_shoppers"], got["max_shoppers"], got["p50_ms"],
               got["p95_ms"], got["max_ms"]]  # fmt: skip
        record(
            "serving_forecast",
            title="Serving, forecasts for a plan",
            command=f"python -m benchmarks.bench_serving --forecasts {args.forecasts} --record",
            tables={"latency": table(cols, [row], {c: ".1f" for c in cols[4:]})},
        )


if __name__ == "__main__":
    main()

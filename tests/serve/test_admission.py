"""Heavy requests take a slot; past the slots and the queue they are refused 503 with
Retry-After at once, and /health and single next-basket requests are answered meanwhile."""

import asyncio
import datetime as dt
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from retailsim_core.serving.service import Context
from retailsim_serve.runtime import Admission, Busy, ServeSettings
from tests.serve.conftest import LIMITS, make_client


def test_admission_holds_slots_then_a_queue_then_refuses():
    async def scenario():
        admission = Admission(slots=1, queued=1)
        release, order = asyncio.Event(), []

        async def user(name):
            async with admission.slot():
                order.append(name)
                await release.wait()

        first = asyncio.create_task(user("first"))
        await asyncio.sleep(0)
        second = asyncio.create_task(user("second"))  # waits in the queue
        await asyncio.sleep(0)
        with pytest.raises(Busy):
            async with admission.slot():
                pass
        release.set()
        await asyncio.gather(first, second)
        async with admission.slot():  # free again
            order.append("third")
        return order

    assert asyncio.run(scenario()) == ["first", "second", "third"]


def test_a_busy_server_answers_503_and_stays_healthy(tiny_warehouse, checkpoint_copy, context):
    settings = ServeSettings(**(LIMITS.__dict__ | {"max_concurrent": 1, "max_queued": 1}))
    with make_client(tiny_warehouse["warehouse"], checkpoint_copy, settings) as client:
        service = client.app.state.holder.service
        release, entered = threading.Event(), threading.Event()
        original = service.simulate

        def slow(*args):
            entered.set()
            release.wait(30)
            return original(*args)

        service.simulate = slow
        body = {"context": context, "n_baskets": 1}
        with ThreadPoolExecutor(2) as pool:
            computing = pool.submit(client.post, "/v1/simulate", json=body)
            assert entered.wait(30)
            waiting = pool.submit(client.post, "/v1/simulate", json=body)
            deadline = time.monotonic() + 30
            while client.app.state.admission.waiting < 1:  # until the second one queues
                assert time.monotonic() < deadline
                time.sleep(0.01)
            r = client.post("/v1/simulate", json=body)
            assert r.status_code == 503 and r.headers["retry-after"] == "1"
            assert r.json()["field"] == "request"
            assert client.get("/health").status_code == 200  # while the slot computes
            one = client.post("/v1/next-basket", json=context | {"k": 3})
            assert one.status_code == 200
            release.set()
            assert computing.result().status_code == 200 == waiting.result().status_code


def test_a_product_not_on_the_shelf_has_no_elasticity(client, context):
    service = client.app.state.holder.service
    trip = Context(
        context["customer_id"],
        context["store_id"],
        dt.date.fromisoformat(context["date"]),
        context["hour"],
    )
    frame = service.contexts_frame([trip], "context.")
    available = service.data.batch(frame)["shelf"][0, :, 3].numpy()
    off = [t for t in range(1, service.vocab.n_products + 1) if available[t] == 0]
    assert off, "the tiny data has a product the store does not sell"
    on = int(available[1:].argmax()) + 1
    names = service.vocab.products
    body = {"context": context, "product_ids": [names[on - 1], names[off[0] - 1]]}
    r = client.post("/v1/elasticities", json=body)
    assert r.status_code == 404 and r.json()["field"] == "product_ids[1]"
    assert "not on the shelf" in r.json()["message"]

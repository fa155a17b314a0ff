"""``/v1/forecast``: a store-week's units under the plan on file and under a proposed one, over
a copy of the tiny warehouse whose ``world_model_demand`` has run; its bad requests."""

import datetime as dt
import shutil

import pytest
from hypothesis import given

from retailsim_core.serving.plan import PlanChange
from retailsim_core.serving.service import Context
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import CHECKPOINT_TABLE, WORLD_DEMAND_TABLE
from tests.serve.conftest import make_client
from tests.serve.test_no_server_errors import BOUNDED, from_schema, post, request_schema


@pytest.fixture(scope="module")
def planned(tiny_warehouse, tiny_checkpoint, tiny_world_demand, tmp_path_factory):
    """A client over a warehouse with the demand forecast, a busy store-week and products."""
    root = tmp_path_factory.mktemp("forecast") / "wh"
    shutil.copytree(tiny_warehouse["warehouse"].root, root)
    wh = Warehouse(root)
    shutil.copytree(tiny_world_demand["root"] / "out", wh.table_dir(WORLD_DEMAND_TABLE))
    with make_client(wh, wh.table_dir(CHECKPOINT_TABLE)) as client:
        service = client.app.state.holder.service
        contexts = service.demand.contexts
        row = contexts.group_by("store_id", "date").len().sort(
            "len", "store_id", "date", descending=[True, False, False]
        ).row(0, named=True)  # fmt: skip
        shopper = Context(None, row["store_id"], row["date"])
        products = service.recommend([shopper], 6)[0]["products"]
        body = {"store_id": row["store_id"], "date": row["date"].isoformat(),
                "product_ids": products}  # fmt: skip
        yield client, body


def test_the_plan_on_file_and_a_proposed_plan(planned):
    client, body = planned
    r = client.post("/v1/forecast", json=body)
    assert r.status_code == 200, r.text
    on_file = r.json()
    rows = on_file["forecasts"]
    assert [f["product_id"] for f in rows] == body["product_ids"]
    assert on_file["expected_trips"] > 0 and on_file["week"] >= 12
    assert all(f["units"] == f["units_on_file"] > 0 for f in rows)
    assert all(f["units"] == pytest.approx(f["buyers"] * f["units_per_line"]) for f in rows)
    first, second = body["product_ids"][:2]
    plan = {first: {"price_multiplier": 0.6}, second: {"display": True, "mailer": False}}
    answer = client.post("/v1/forecast", json=body | {"plan": plan}).json()["forecasts"]
    # the tiny model's price response has a free sign per context (D45): the cut moves it
    assert answer[0]["units"] != answer[0]["units_on_file"]
    assert answer[1]["promotion"] == "display"
    service = client.app.state.holder.service
    _, _, table = service.forecast(
        body["store_id"], dt.date.fromisoformat(body["date"]), body["product_ids"],
        {first: PlanChange(price_multiplier=0.6), second: PlanChange(True, False)},
    )  # fmt: skip
    assert [f["units"] for f in answer] == table["units"].to_list()  # the service's answer


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        ({"store_id": "STORE99999"}, 404, "store_id"),
        ({"date": "2001-01-01"}, 422, "date"),
        ({"product_ids": ["NOT-A-PRODUCT"]}, 404, "product_ids"),
        ({"product_ids": []}, 422, "product_ids"),
        ({"plan": {"NOT-ASKED": {"display": True}}}, 422, "plan.NOT-ASKED"),
        ({"plan": {"@first": {"price_multiplier": 0.0}}}, 422, "plan"),
        ({"plan": {"@first": {"colour": "red"}}}, 422, "plan"),
    ],
)
def test_bad_forecast_requests_name_their_field(planned, change, status, field):
    client, body = planned
    if "plan" in change:
        change = {"plan": {k.replace("@first", body["product_ids"][0]): v
                           for k, v in change["plan"].items()}}  # fmt: skip
    r = client.post("/v1/forecast", json=body | change)
    assert r.status_code == status, r.text
    answer = r.json()
    where = answer.get("field") or ".".join(str(p) for p in answer["detail"][0]["loc"])
    assert field in where


def test_a_product_listed_twice_and_too_many_products(planned):
    client, body = planned
    twice = body | {"product_ids": body["product_ids"][:1] * 2}
    assert client.post("/v1/forecast", json=twice).json()["field"] == "product_ids"
    many = body | {"product_ids": [f"P{i}" for i in range(10_000)]}
    assert client.post("/v1/forecast", json=many).status_code in (413, 422)


def test_without_a_demand_forecast_the_endpoint_says_what_to_run(client, context):
    products = client.post("/v1/next-basket", json=context | {"k": 2}).json()["products"]
    body = {"store_id": context["store_id"], "date": context["date"], "product_ids": products}
    r = client.post("/v1/forecast", json=body)
    assert r.status_code == 404 and "world_model_demand" in r.json()["message"]


def test_bodies_drawn_from_the_schema_get_no_5xx(planned):
    client, body = planned
    known = {"store_id": [body["store_id"]], "date": [body["date"]],
             "product_id": body["product_ids"]}  # fmt: skip

    @BOUNDED
    @given(from_schema(request_schema(client, "/v1/forecast"), known))
    def check(drawn):
        post(client, "/v1/forecast", drawn)

    check()

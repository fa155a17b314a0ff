"""Every endpoint through FastAPI's TestClient on the tiny preset."""

import datetime as dt
import json

import pytest


def test_health_and_model_info(client):
    health = client.get("/health").json()
    assert health["status"] == "ok" and len(health["checkpoint_id"]) == 16
    info = client.get("/v1/model").json()
    assert info["checkpoint_id"] == health["checkpoint_id"]
    assert info["training_weeks"] == [1, 8] and info["validation_weeks"] == [9, 11]
    assert info["served_dates"] == ["2006-06-26", "2006-07-16"]
    assert info["limits"]["max_k"] == 50 and info["scoring"] == "pytorch"


def test_next_basket_returns_k_ranked_products(client, context):
    r = client.post("/v1/next-basket", json=context | {"k": 7})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["products"]) == 7 == len(set(body["products"]))
    assert body["scores"] == sorted(body["scores"], reverse=True)
    assert body["cold_start"] is False
    again = client.post("/v1/next-basket", json=context | {"k": 7}).json()
    assert again["products"] == body["products"]  # deterministic


def test_a_new_customer_is_answered_as_a_cold_start(client, context):
    new = {k: v for k, v in context.items() if k != "customer_id"}
    body = client.post("/v1/next-basket", json=new | {"k": 5}).json()
    assert body["cold_start"] is True and len(body["products"]) == 5


def test_batch_scores_each_request_as_the_single_endpoint_does(client, context):
    other = context | {"hour": 18}
    batch = client.post("/v1/next-basket/batch", json={"requests": [context, other], "k": 5})
    assert batch.status_code == 200, batch.text
    results = batch.json()["results"]
    single = client.post("/v1/next-basket", json=context | {"k": 5}).json()
    assert results[0]["products"] == single["products"]
    assert len(results) == 2


def test_simulation_is_seeded_and_accepts_counterfactual_prices(client, context):
    body = {"context": context, "n_baskets": 4, "seed": 3}
    a = client.post("/v1/simulate", json=body).json()["baskets"]
    assert a == client.post("/v1/simulate", json=body).json()["baskets"]
    assert len(a) == 4 and all(len(b) >= 1 for b in a)
    product = a[0][0]
    cf = client.post("/v1/simulate", json=body | {"price_multipliers": {product: 0.8}})
    assert cf.status_code == 200, cf.text


def test_elasticities_of_a_product_set(client, context):
    products = client.post("/v1/next-basket", json=context | {"k": 4}).json()["products"]
    r = client.post("/v1/elasticities", json={"context": context, "product_ids": products})
    assert r.status_code == 200, r.text
    rows = r.json()["elasticities"]
    assert {row["product_id"] for row in rows if row["kind"] == "own"} == set(products)


def test_the_openapi_page_documents_every_endpoint(client):
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/next-basket", "/v1/next-basket/batch", "/v1/simulate", "/v1/elasticities",
                 "/v1/forecast"):  # fmt: skip
        assert "post" in paths[path]
    assert "get" in paths["/v1/model"] and "get" in paths["/health"]
    assert client.get("/docs").status_code == 200


BAD = [
    ("unknown customer", {"customer_id": "CUST0999999999"}, 404, "customer_id"),
    ("unknown store", {"store_id": "STORE99999"}, 404, "store_id"),
    ("date before the calendar", {"date": "2001-01-01"}, 422, "date"),
    ("date after the calendar", {"date": "2031-01-01"}, 422, "date"),
    ("not a date", {"date": "yesterday"}, 422, "date"),
    ("hour 24", {"hour": 24}, 422, "hour"),
    ("negative k", {"k": -1}, 422, "k"),
    ("huge k", {"k": 10**9}, 422, "k"),
    ("k as text", {"k": "many"}, 422, "k"),
    ("unexpected field", {"basket_size": 12}, 422, "basket_size"),
    ("empty store", {"store_id": ""}, 422, "store_id"),
    ("huge id", {"customer_id": "C" * 10_000}, 422, "customer_id"),
]


@pytest.mark.parametrize(("name", "change", "status", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_next_basket_input_is_a_4xx_naming_the_field(
    client, context, name, change, status, field
):
    r = client.post("/v1/next-basket", json=context | change)
    assert r.status_code == status, r.text
    body = r.json()
    named = body["field"] if "field" in body else [e["loc"][-1] for e in body["detail"]]
    assert field in named


def test_missing_fields_and_malformed_json_are_422(client, context):
    r = client.post("/v1/next-basket", json={"hour": 3})
    assert r.status_code == 422 and "store_id" in r.text and "date" in r.text
    r = client.post(
        "/v1/next-basket", content=b'{"store_id": ', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and "json" in r.text.lower()


def test_bodies_of_the_wrong_shape_are_422(client, context):
    for body in ([context], "a string", 12, None):
        r = client.post("/v1/next-basket", json=body)
        assert r.status_code == 422, (body, r.text)
    r = client.post("/v1/next-basket", content=b"store_id=STORE00001")  # a form, not JSON
    assert r.status_code == 422
    r = client.post("/v1/simulate", json={"context": [context]})
    assert r.status_code == 422 and "context" in r.text
    assert client.get("/v1/next-basket").status_code == 405


def test_oversized_bodies_and_batches_are_413(client, context):
    r = client.post("/v1/next-basket/batch", json={"requests": [context] * 65, "k": 5})
    assert r.status_code == 413 and "requests" in r.text
    r = client.post("/v1/next-basket/batch", json={"requests": [context] * 400, "k": 5})
    assert r.status_code == 413 and "body" in r.text  # over max_body_bytes before parsing
    r = client.post("/v1/next-basket/batch", json={"requests": [], "k": 5})
    assert r.status_code == 422 and "requests" in r.text


def test_a_chunked_body_over_the_limit_is_413(client, context):
    """No Content-Length: the bytes received decide (was 400 "error parsing the body")."""

    def chunks(n):
        for _ in range(n):
            yield b" " * 1000

    r = client.post("/v1/next-basket", content=chunks(10_000), headers={"content-type": "x"})
    assert r.status_code == 413 and r.json()["field"] == "body"
    small = json.dumps(context | {"k": 3}).encode()
    r = client.post(
        "/v1/next-basket",
        content=iter([small[:10], small[10:]]),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200, r.text  # a chunked body within the limit is read whole


def test_bad_batch_item_names_its_position(client, context):
    bad = context | {"store_id": "STORE99999"}
    r = client.post("/v1/next-basket/batch", json={"requests": [context, bad], "k": 5})
    assert r.status_code == 404 and "requests[1].store_id" in r.text


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"price_multipliers": {"PRD_NOPE": 0.9}}, 404, "price_multipliers"),
        ({"price_multipliers": {"X": -1.0}}, 422, "price_multipliers"),
        ({"price_multipliers": {"X": 0.0}}, 422, "price_multipliers"),
        ({"n_baskets": 11}, 422, "n_baskets"),
        ({"n_baskets": 0}, 422, "n_baskets"),
        ({"temperature": -2}, 422, "temperature"),
        ({"seed": -1}, 422, "seed"),
        ({"seed": 2**64}, 422, "seed"),
        ({"temperature": 1e-300}, 422, "temperature"),
        ({"price_multipliers": {"X": 1e-300}}, 422, "price_multipliers"),
        ({"price_multipliers": {"X": 5e-324}}, 422, "price_multipliers"),
        ({"price_multipliers": {"X": 100.5}}, 422, "price_multipliers"),
    ],
)
def test_bad_simulation_input(client, context, body, status, field):
    r = client.post("/v1/simulate", json={"context": context} | body)
    assert r.status_code == status, r.text
    assert field in r.text


def test_the_bounds_of_a_simulation_are_answered(client, context):
    """The documented extremes compute: no NaN in the sampling probabilities (D80)."""
    product = client.post("/v1/next-basket", json=context | {"k": 1}).json()["products"][0]
    for body in (
        {"price_multipliers": {product: 0.01}, "temperature": 0.01, "seed": 2**64 - 1},
        {"price_multipliers": {product: 100.0}, "temperature": 10.0, "seed": 0},
    ):
        r = client.post("/v1/simulate", json={"context": context, "n_baskets": 2} | body)
        assert r.status_code == 200, r.text


@pytest.mark.parametrize("where", ["product_ids", "price_multipliers", "store_id"])
def test_a_lone_surrogate_is_a_422_not_a_500(client, context, where):
    if where == "product_ids":
        path, body = "/v1/elasticities", {"context": context, "product_ids": ["P\ud800"]}
    elif where == "price_multipliers":
        path, body = "/v1/simulate", {"context": context, "price_multipliers": {"\udfff": 0.5}}
    else:
        path, body = "/v1/next-basket", context | {"store_id": "\ud800"}
    r = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code == 422 and where in r.text
    r.text.encode("ascii")  # the answer is ASCII JSON whatever it repeats


def test_bad_elasticity_input(client, context):
    r = client.post("/v1/elasticities", json={"context": context, "product_ids": ["PRD_NOPE"]})
    assert r.status_code == 404 and "product_ids" in r.text
    r = client.post("/v1/elasticities", json={"context": context, "product_ids": ["A"] * 51})
    assert r.status_code == 422 and "product_ids" in r.text
    r = client.post("/v1/elasticities", json={"context": context, "product_ids": []})
    assert r.status_code == 422
    day = dt.date(2006, 6, 20).isoformat()
    r = client.post(
        "/v1/elasticities", json={"context": context | {"date": day}, "product_ids": ["A"]}
    )
    assert r.status_code == 422 and r.json()["field"] == "context.date"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e309"])
@pytest.mark.parametrize("field", ["hour", "k"])
def test_non_finite_numbers_are_422_naming_the_field(client, context, number, field):
    """Python's JSON reader takes NaN, Infinity and 1e309 (inf); echoing them in the 422 body
    was a 500."""
    body = json.dumps(context)[:-1] + f', "{field}": {number}}}'
    r = client.post("/v1/next-basket", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and field in r.text
    assert "input" not in r.json()["detail"][0]

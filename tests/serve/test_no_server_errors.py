"""No request gets a 5xx: hypothesis bodies drawn from the app's own OpenAPI schemas, and
legal contexts with one field replaced by a hostile value (non-finite and huge numbers, lone
surrogates, tiny multipliers)."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

POSTS = ("/v1/next-basket", "/v1/next-basket/batch", "/v1/simulate", "/v1/elasticities")
BOUNDED = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def request_schema(client, path: str) -> dict:
    """The endpoint's request body schema with every ``$ref`` inlined."""
    spec = client.app.openapi()
    components = spec["components"]["schemas"]

    def inline(node):
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(components[node["$ref"].rsplit("/", 1)[1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    body = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    return inline(body["schema"])


def post(client, path: str, body) -> int:
    # json.dumps writes NaN/Infinity tokens and escapes lone surrogates, as a hostile client can
    r = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code < 500, (path, body, r.status_code, r.text)
    return r.status_code


def from_schema(node: dict, known: dict, name: str = "") -> st.SearchStrategy:
    """Values valid for the subset of JSON Schema FastAPI writes, at and inside its bounds;
    a field named in ``known`` draws its legal values half the time, so bodies reach past the
    unknown-id checks."""
    if "anyOf" in node:
        return st.one_of([from_schema(n, known, name) for n in node["anyOf"]])
    kind = node.get("type")
    if kind == "object":
        props = node.get("properties", {})
        required = set(node.get("required", ()))
        if not props:  # a free mapping (price_multipliers)
            values = from_schema(node.get("additionalProperties", {}), known)
            keys = st.one_of(st.text(max_size=12), st.sampled_from(known["product_id"]))
            return st.dictionaries(keys, values, max_size=3)
        optional = [p for p in props if p not in required]
        return st.fixed_dictionaries(
            {p: from_schema(props[p], known, p) for p in required},
            optional={p: from_schema(props[p], known, p) for p in optional},
        )
    if kind == "array":
        inner = from_schema(node["items"], known, name.rstrip("s"))
        return st.lists(inner, min_size=node.get("minItems", 0), max_size=4)
    if kind == "integer":
        return st.integers(node.get("minimum"), node.get("maximum"))
    if kind == "number":
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum", node.get("exclusiveMaximum"))
        return st.floats(
            low,
            high,
            exclude_min="exclusiveMinimum" in node,
            exclude_max="exclusiveMaximum" in node,
            allow_nan=False,
        )
    if kind == "string":
        if node.get("format") == "date":
            drawn = st.dates().map(lambda d: d.isoformat())
        else:
            drawn = st.text(min_size=node.get("minLength", 0), max_size=node.get("maxLength", 16))
        key = name.removesuffix("_ids") + "_id" if name.endswith("_ids") else name
        return st.one_of(drawn, st.sampled_from(known[key])) if key in known else drawn
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    raise AssertionError(f"a schema the strategy does not know: {node}")


@pytest.mark.parametrize("path", POSTS)
def test_bodies_drawn_from_the_openapi_schema_get_no_5xx(client, context, path):
    products = client.post("/v1/next-basket", json=context | {"k": 5}).json()["products"]
    known = {
        "customer_id": [context["customer_id"]],
        "store_id": [context["store_id"]],
        "date": [context["date"]],
        "product_id": products,
    }

    @BOUNDED
    @given(from_schema(request_schema(client, path), known))
    def check(body):
        post(client, path, body)

    check()


NASTY = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e309, 1e-300, 5e-324, -0.0]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**30]),
    st.text(alphabet=st.characters(codec=None, categories=None), max_size=8),
    st.sampled_from(["\ud800", "\udfff", "a\ud800b", "٠١", "", " ", "null"]),
    st.none(),
    st.booleans(),
)


@BOUNDED
@given(field=st.sampled_from(["customer_id", "store_id", "date", "hour", "k"]), value=NASTY)
def test_a_hostile_field_in_a_legal_context_gets_no_5xx(client, context, field, value):
    for path, body in (
        ("/v1/next-basket", context | {"k": 5}),
        ("/v1/next-basket/batch", {"requests": [context], "k": 5}),
    ):
        if field == "k":
            body = body | {"k": value}
        elif path.endswith("batch"):
            body = body | {"requests": [context | {field: value}]}
        else:
            body = body | {field: value}
        post(client, path, body)


@BOUNDED
@given(
    field=st.sampled_from(["n_baskets", "seed", "temperature", "multiplier", "product"]),
    value=NASTY,
)
def test_a_hostile_simulation_or_elasticity_gets_no_5xx(client, context, field, value):
    product = client.post("/v1/next-basket", json=context | {"k": 1}).json()["products"][0]
    body = {"context": context, "n_baskets": 2, "seed": 1, "temperature": 1.0}
    if field == "multiplier":
        body["price_multipliers"] = {product: value}
    elif field == "product":
        body["price_multipliers"] = {str(value): 0.9}
        post(client, "/v1/elasticities", {"context": context, "product_ids": [product, value]})
    else:
        body[field] = value
    post(client, "/v1/simulate", body)

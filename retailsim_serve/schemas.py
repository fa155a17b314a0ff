"""Request and response bodies; their field descriptions are the OpenAPI page's.

Every number a request may carry has bounds the model can compute with (D80): a price
multiplier in [0.01, 100] (beyond, the float32 log-price leaves the range the model was fitted
on, and 1e-300 is -inf), a temperature in [0.01, 10], a seed in [0, 2^64 - 1] (the generator's
range). Identifiers are UTF-8 text: a lone surrogate is refused here, not in the tables.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

MAX_SEED = 2**64 - 1


def _utf8(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not valid UTF-8 text (a lone surrogate)") from None
    return text


Id = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_utf8)]
Multiplier = Annotated[float, Field(ge=0.01, le=100.0)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TripContext(Strict):
    """A customer walking into a store: all a prediction may know of the coming basket."""

    customer_id: Id | None = Field(None, description="loyalty card id; omit for a new customer")
    store_id: Id
    date: dt.date = Field(description="shop date, within the served calendar (see /v1/model)")
    hour: int = Field(12, ge=0, le=23, description="shop hour")


class NextBasketRequest(TripContext):
    k: int = Field(20, ge=1, description="how many products (at most the server's max_k)")


class Recommendation(BaseModel):
    products: list[str] = Field(description="product ids, most likely first")
    scores: list[float] = Field(description="P(product fills a basket slot), same order")
    cold_start: bool = Field(description="the customer has no trip before the date's week")


class NextBasketResponse(Recommendation):
    checkpoint_id: str


class BatchRequest(Strict):
    requests: list[TripContext] = Field(min_length=1)
    k: int = Field(20, ge=1)


class BatchResponse(BaseModel):
    results: list[Recommendation]
    checkpoint_id: str


class SimulateRequest(Strict):
    context: TripContext
    n_baskets: int = Field(1, ge=1, description="baskets to draw (at most max_simulations)")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="same seed, same baskets")
    price_multipliers: dict[Id, Multiplier] = Field(
        default_factory=dict,
        description="counterfactual prices: product id -> multiplier of its shelf price, "
        "in [0.01, 100]",
    )
    temperature: float = Field(1.0, ge=0.01, le=10.0, description="softens (> 1) or sharpens")


class SimulateResponse(BaseModel):
    baskets: list[list[str]]
    checkpoint_id: str


class ElasticityRequest(Strict):
    context: TripContext
    product_ids: list[Id] = Field(min_length=1, description="the product set")


class Elasticity(BaseModel):
    product_id: str
    other_id: str = Field(description="the product whose price moves")
    elasticity: float = Field(description="d log E[units of product] / d log price of other")
    kind: str = Field(description="own | same_category | top_cross")


class ElasticityResponse(BaseModel):
    elasticities: list[Elasticity]
    checkpoint_id: str


class PlannedProduct(Strict):
    """A product's plan at the store that week; an omitted field keeps the plan on file."""

    display: bool | None = Field(None, description="on display (true) or off it (false)")
    mailer: bool | None = Field(None, description="in the week's mailer (true) or out of it")
    price_multiplier: Multiplier = Field(1.0, description="of the shelf price, in [0.01, 100]")


class ForecastRequest(Strict):
    store_id: Id
    date: dt.date = Field(description="any day of the week to forecast (a demand forecast week)")
    product_ids: list[Id] = Field(min_length=1, description="the products to forecast")
    plan: dict[Id, PlannedProduct] = Field(
        default_factory=dict, description="product id -> its plan; products not named keep "
        "the plan on file",
    )  # fmt: skip


class ProductForecast(BaseModel):
    product_id: str
    promotion_on_file: str = Field(description="none | display | mailer | display+mailer")
    promotion: str = Field(description="the same under the request's plan")
    units_on_file: float = Field(description="expected units sold, the plan on file")
    units: float = Field(description="expected units sold under the request's plan")
    units_median: float = Field(description="median units under the plan (what WAPE rewards)")
    buyers_on_file: float = Field(description="expected baskets holding it, the plan on file")
    buyers: float = Field(description="expected baskets holding it under the plan")
    units_per_line_on_file: float
    units_per_line: float


class ForecastResponse(BaseModel):
    week: int
    store_id: str
    expected_trips: float = Field(description="the trip forecast's trips to the store that week")
    forecasts: list[ProductForecast]
    checkpoint_id: str


class Health(BaseModel):
    status: str
    checkpoint_id: str


class Problem(BaseModel):
    field: str
    message: str

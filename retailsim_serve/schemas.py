"""Request and response bodies; their field descriptions are the OpenAPI page's."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

ID = Field(min_length=1, max_length=64)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TripContext(Strict):
    """A customer walking into a store: all a prediction may know of the coming basket."""

    customer_id: str | None = Field(
        None, min_length=1, max_length=64, description="loyalty card id; omit for a new customer"
    )
    store_id: str = ID
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
    seed: int = Field(0, ge=0, description="same seed, same baskets")
    price_multipliers: dict[str, float] = Field(
        default_factory=dict,
        description="counterfactual prices: product id -> multiplier of its shelf price (> 0)",
    )
    temperature: float = Field(1.0, gt=0.0, le=10.0)


class SimulateResponse(BaseModel):
    baskets: list[list[str]]
    checkpoint_id: str


class ElasticityRequest(Strict):
    context: TripContext
    product_ids: list[str] = Field(min_length=1, description="the product set")


class Elasticity(BaseModel):
    product_id: str
    other_id: str = Field(description="the product whose price moves")
    elasticity: float = Field(description="d log E[units of product] / d log price of other")
    kind: str = Field(description="own | same_category | top_cross")


class ElasticityResponse(BaseModel):
    elasticities: list[Elasticity]
    checkpoint_id: str


class Health(BaseModel):
    status: str
    checkpoint_id: str


class Problem(BaseModel):
    field: str
    message: str

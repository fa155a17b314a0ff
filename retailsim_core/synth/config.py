"""Configuration of the synthetic LGSR generator: sizes (presets) and planted behaviour.

The behaviour constants are planted truth: they are written to ``ground_truth/`` and the
oracle reads them back, so evaluations can compare what a model learns with what was planted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# The mission vocabularies are lgsr.MISSION_TYPES / MISSION_FOCI (without XX: the generator
# always knows the true mission).
PRICE_MODES = ("LA", "MM", "UM")  # Less Affluent, Mid Market, Up Market
BASKET_SIZES = ("S", "M", "L")
DIVISIONS = ("fresh", "grocery", "nonfood")


@dataclass(frozen=True)
class BehaviourParams:
    """How planted missions shape a basket. Rows/columns follow the vocabularies above."""

    # P(size | mission type): top-ups are small, full shops large.
    size_given_type: tuple[tuple[float, ...], ...] = (
        (0.75, 0.22, 0.03),
        (0.40, 0.50, 0.10),
        (0.05, 0.35, 0.60),
    )
    # A basket makes 1 + Poisson(lambda) product draws (with replacement) by size.
    extra_draws_by_size: tuple[float, ...] = (1.5, 7.0, 18.0)
    # Category mix: weight of each division (fresh, grocery, nonfood) under each focus.
    focus_division_weight: tuple[tuple[float, ...], ...] = (
        (4.0, 1.0, 0.3),  # Fresh
        (1.0, 4.0, 0.5),  # Grocery
        (1.5, 1.5, 1.0),  # Mixed
        (0.3, 0.8, 5.0),  # Nonfood
    )
    # Own-price elasticity is scaled by the trip's price mode: LA shoppers react most.
    elasticity_multiplier: tuple[float, ...] = (1.5, 1.0, 0.5)
    # Exploration favours cheap (LA) or premium (UM) products within a sub-commodity:
    # weight *= (regular price / sub-commodity median) ** tier_preference.
    tier_preference: tuple[float, ...] = (-1.0, 0.0, 0.7)
    # A trip's price mode is the customer's own segment with this probability, else uniform.
    own_price_mode_prob: float = 0.75
    # Share of baskets whose recorded BASKET_* label is XX (unknown) in the files.
    xx_label_prob: float = 0.02
    # Store choice: P(secondary store | the customer switches); otherwise any open store.
    switch_to_secondary_prob: float = 0.85
    # Weekday probabilities in LGSR order (1 = Sunday .. 7 = Saturday).
    weekday_probs: tuple[float, ...] = (0.12, 0.12, 0.12, 0.13, 0.15, 0.17, 0.19)
    # Christmas week visit multiplier.
    christmas_visit_factor: float = 1.35
    # A mailer brings a shopper in: the visit rate is multiplied by exp(lift x n), n the
    # shopper's favourite slots in their home region's mailer that week, at most the cap.
    mailer_visit_lift: float = 0.15
    mailer_favourites_cap: int = 4
    # Stocking up: a line on a cut to r x the regular price holds r^(-s) x its drawn units on
    # average (1.5: a quarter off sells ~1.5x the units per line).
    stock_up_elasticity: float = 1.5


@dataclass(frozen=True)
class SynthConfig:
    """Sizes and rates of one synthetic world. Same config and seed give identical bytes."""

    name: str = "default"
    seed: int = 2006
    n_customers: int = 4_000  # shoppers, carded and uncarded
    uncarded_share: float = 0.20  # LGSR: ~20% of rows have an empty CUST_CODE
    n_stores: int = 48
    n_products: int = 3_000
    products_per_sub_commodity: int = 15
    n_departments: int = 40
    n_groups: int = 12
    mean_visits_per_week: float = 0.7
    favourites_range: tuple[int, int] = (15, 60)  # personal repertoire size (slots)
    repeat_share_beta: tuple[float, float] = (14.0, 1.5)  # per-customer P(draw from repertoire)
    switch_prob_beta: tuple[float, float] = (1.5, 12.0)  # per-customer P(not the home store)
    promo_start_prob: float = 0.03  # per product x region x week, outside a promotion
    national_promo_share: float = 0.5  # promotions that run in every region at once
    promo_depths: tuple[float, ...] = (0.10, 0.15, 0.20, 0.25, 0.33, 0.50)
    promo_depth_probs: tuple[float, ...] = (0.25, 0.20, 0.25, 0.15, 0.10, 0.05)
    mailer_min_depth: float = 0.25  # the plan: a cut this deep is in its region's mailer
    price_rise_share: float = 0.15  # products with one permanent list-price rise
    novel_product_share: float = 0.04  # launched after the training weeks (weeks 81..110)
    late_customer_share: float = 0.20  # first visit after week 1 (cold start)
    churn_share: float = 0.05
    late_store_open_week: int = 60  # one store opens mid-way
    n_substitute_pairs: int = 150
    n_complement_pairs: int = 150
    seasonal_sub_commodity_share: float = 0.15
    behaviour: BehaviourParams = field(default_factory=BehaviourParams)

    def replace(self, **changes) -> "SynthConfig":
        return dataclasses.replace(self, **changes)


PRESETS: dict[str, SynthConfig] = {
    # Seconds; unit tests.
    "tiny": SynthConfig(
        name="tiny",
        n_customers=150,
        n_stores=14,
        n_products=240,
        n_departments=8,
        n_groups=4,
        n_substitute_pairs=12,
        n_complement_pairs=12,
        favourites_range=(8, 25),
    ),
    # The demo: ~2M rows over 117 weeks.
    "default": SynthConfig(),
    # Benchmarks: >= 30M rows, streamed to disk week by week.
    "large": SynthConfig(
        name="large",
        n_customers=80_000,
        n_stores=300,
        n_products=5_000,
        n_departments=60,
        n_groups=16,
        n_substitute_pairs=250,
        n_complement_pairs=250,
    ),
}
# Scale checks (issue #37): ``large`` with twice its customers, so twice the baskets and trips
# over the same stores and catalogue.
PRESETS["xlarge"] = PRESETS["large"].replace(name="xlarge", n_customers=160_000)


def preset(name: str, **overrides) -> SynthConfig:
    try:
        cfg = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}") from None
    return cfg.replace(**overrides) if overrides else cfg

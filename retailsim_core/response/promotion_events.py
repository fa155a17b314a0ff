"""Promotion events a price-response check can trust (design §6.2; decision D76).

A check of a counterfactual must not condition on the outcome it predicts, so:

- An **event** is a product × store × week cell whose promotion is known without the cell's own
  sales: a promotion table where the source has one (display, mailer), the planted calendar on
  synthetic data; never a price seen only because something sold.
- The **panel** holds every week of each product × store's span with zero units where
  nothing sold: a promotion that sold nothing still counts. A cell is in it if and only if its
  product sold at its store in an earlier week (``sales_panel``'s ``through``), so no cell is
  there because it sold.
- A **lift** compares a product × store's promoted weeks with its other weeks of the same
  period, log((mean units on promotion + 1) / (mean units off + 1)); a product's lift is the
  mean over its stores weighted by promoted weeks.
- The measurement's own noise bounds any model: the lift measured on half of the stores
  against the other half (``split_half_ceiling``).

Glossary: N panel cells, E events, P products.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import polars as pl
from scipy.stats import spearmanr

from retailsim_core.baselines.panel_sums import PanelSums
from retailsim_core.datasets.shelf import MAX_DEPTH

CELL = ("product_id", "store_id", "week")
# Panel cells per group of products a panel is built from at once (``panel_groups``): a group's
# joins hold a few times its cells (The Complete Journey's 3.4M a group were +1.9 GB, D126).
PANEL_GROUP_CELLS = 1_000_000
SALES_SCHEMA = pl.Schema(
    {"product_id": pl.String, "store_id": pl.String, "week": pl.Int32, "units": pl.Float64}
)
PROMOTIONS_SCHEMA = pl.Schema(
    {
        "product_id": pl.String,
        "store_id": pl.String,
        "week": pl.Int32,
        "kind": pl.String,  # e.g. "display", "mailer", "display+mailer", "price"
        "depth": pl.Float64,  # price cut as a share of the regular price; null when unknown
    }
)
PANEL_SCHEMA = pl.Schema(
    {**SALES_SCHEMA, "promo": pl.Boolean, "kind": pl.String, "depth": pl.Float64}
)


def sales_panel(
    sales: pl.LazyFrame, promotions: pl.LazyFrame, through: int | None = None
) -> pl.LazyFrame:
    """The panel (``PANEL_SCHEMA``) of ``sales`` (cells with a sale, ``SALES_SCHEMA``) and
    ``promotions`` (cells known to be promoted, ``PROMOTIONS_SCHEMA``; one row per cell). Its
    size grows with each product × store's span, not with every product at every store.

    Without ``through``, a span runs from the product × store's first week with a sale to its
    last: a cell at either end is there because it sold, which a check must not read as an
    outcome. With ``through`` (a check's last week), a cell is in the panel if and only if its
    product sold at its store in an earlier week: from the week after the first sale through
    ``through``, so whether a cell is checked never depends on its own sales."""
    pair = ("product_id", "store_id")
    spans = sales.group_by(pair).agg(first=pl.col("week").min(), last=pl.col("week").max())
    if through is not None:
        spans = spans.select(
            *pair, first=pl.col("first") + 1, last=pl.lit(through, dtype=pl.Int32)
        ).filter(pl.col("first") <= pl.col("last"))
    weeks = spans.select(
        "product_id",
        "store_id",
        week=pl.int_ranges("first", pl.col("last") + 1, dtype=pl.Int32),
    ).explode("week", empty_as_null=False)
    units = sales.group_by(CELL).agg(pl.col("units").sum())
    return (
        weeks.join(units, on=CELL, how="left")
        .join(promotions.select(*CELL, "kind", "depth"), on=CELL, how="left")
        .select(
            *CELL,
            pl.col("units").fill_null(0.0).cast(pl.Float64),
            promo=pl.col("kind").is_not_null(),
            kind=pl.col("kind"),
            depth=pl.col("depth").cast(pl.Float64),
        )
        .sort(CELL)
    )


def panel_groups(
    sales: pl.DataFrame,
    promotions: pl.LazyFrame,
    through: int | None = None,
    cells: int | None = None,
) -> Iterator[pl.DataFrame]:
    """``sales_panel`` collected a group of products at a time (about ``cells`` panel cells
    each, default ``PANEL_GROUP_CELLS``; a product is never split), in product order: every
    cell of a product x store is in its product's group, the groups concatenated are the
    panel, and memory holds one group's joins at a time (issue #62: The Complete Journey's
    panel of 17M cells took 7 GB at once). A group's size is counted in the panel cells its
    spans will hold, not in sales, which are a fraction of them."""
    spans = (
        sales.lazy()
        .group_by("product_id", "store_id")
        .agg(first=pl.col("week").min(), last=pl.col("week").max())
    )
    span = pl.col("last") - pl.col("first") + 1 if through is None else through - pl.col("first")
    per_product = (
        spans.group_by("product_id")
        .agg(cells=span.clip(lower_bound=0).sum().cast(pl.Int64))
        .sort("product_id")
        .collect()
    )
    before = (per_product["cells"].cum_sum() - per_product["cells"]).to_numpy()
    group = before // max(1, cells or PANEL_GROUP_CELLS)  # (P,) non-decreasing
    starts = np.flatnonzero(np.diff(group, prepend=-1)) if len(group) else np.zeros(1, int)
    products = per_product["product_id"]
    for lo, hi in zip(starts, np.append(starts[1:], len(products)), strict=True):
        keep = pl.col("product_id").is_in(products.slice(lo, hi - lo).implode())
        yield sales_panel(sales.lazy().filter(keep), promotions.filter(keep), through).collect()


def check_panels(
    groups: Iterable[pl.DataFrame], weeks: list[int]
) -> tuple[pl.DataFrame, PanelSums, pl.Series]:
    """The panel (``panel_groups``) split as a check reads it, a group at a time, so the whole
    panel is never held (issue #62): (1) the cells of ``weeks`` of each product × store with
    a promotion among them (events, lifts and the ceiling read nothing else: a product ×
    store without one has no event and no lift), in the panel's order; (2) the cells before the
    first of ``weeks`` summed as the baselines fitted there read them (``PanelSums``, D125);
    (3) every store of the panel, sorted (the ceiling's halves rank them all)."""
    promoted = pl.col("promo").any().over("product_id", "store_id")
    period, before, stores = [], [], []
    for group in groups:
        period.append(group.filter(pl.col("week").is_in(weeks)).filter(promoted))
        before.append(PanelSums.of_sorted(group.filter(pl.col("week") < min(weeks))))
        stores.append(group["store_id"].unique())
    empty = PANEL_SCHEMA.to_frame()
    return (
        pl.concat(period) if period else empty,
        PanelSums.concat(before) if before else PanelSums.of(empty),
        pl.concat(stores).unique().sort() if stores else empty["store_id"],
    )


def promotion_events(panel: pl.LazyFrame, weeks: list[int]) -> pl.DataFrame:
    """(E,) the promoted cells of ``weeks`` whose product × store also has weeks without a
    promotion there (else no lift can be measured): the cells a response is judged on."""
    return (
        _period(panel, weeks)
        .filter(pl.col("promo") & (pl.col("off_weeks") > 0))
        .drop("off_weeks")
        .sort(CELL)
        .collect()
    )


def product_lifts(panel: pl.LazyFrame, weeks: list[int], units: str = "units") -> pl.DataFrame:
    """(P,) per product over ``weeks``: the log-lift of ``units`` on promotion (weighted by
    promoted store-weeks), its events, stores and mean known depth."""
    per_store = (
        _period(panel, weeks)
        .filter(pl.col("off_weeks") > 0)
        .group_by("product_id", "store_id")
        .agg(
            on=pl.col(units).filter(pl.col("promo")).mean(),
            off=pl.col(units).filter(~pl.col("promo")).mean(),
            events=pl.col("promo").sum().cast(pl.Int64),
            depth=pl.col("depth").filter(pl.col("promo")).mean(),
        )
        .filter(pl.col("events") > 0)
        .with_columns(lift=((pl.col("on") + 1) / (pl.col("off") + 1)).log())
        # A group_by's row order is not fixed, and a product's sums below add its stores in
        # that order: sorted, the same panel gives the same bytes.
        .sort("product_id", "store_id")
    )
    return (
        per_store.group_by("product_id", maintain_order=True)
        .agg(
            lift=(pl.col("lift") * pl.col("events")).sum() / pl.col("events").sum(),
            events=pl.col("events").sum(),
            stores=pl.len().cast(pl.Int64),
            depth=pl.col("depth").mean(),
        )
        .sort("product_id")
        .collect()
    )


def split_half_ceiling(
    panel: pl.LazyFrame, weeks: list[int], min_events: int = 1, stores: pl.Series | None = None
) -> dict:
    """How well the observed lift can be known: per product, the lift on the odd-ranked stores
    against the even-ranked ones (stores ranked by id), Spearman over products with at least
    ``min_events`` in both halves, then Spearman–Brown for the whole set (2r / (1 + r)). A
    perfect model correlates with the observed lift at about the square root of that.
    ``stores``: the stores to rank (default: the panel's; ``check_panels`` keeps the cells a
    lift reads and hands over every store)."""
    if stores is None:
        ranked = panel.with_columns(half=(pl.col("store_id").rank("dense") % 2).cast(pl.Int8))
    else:
        ranks = pl.LazyFrame(
            {"store_id": stores.unique().sort(), "half": (np.arange(stores.n_unique()) + 1) % 2}
        ).cast({"half": pl.Int8})
        ranked = panel.join(ranks, on="store_id", how="left", maintain_order="left")
    halves = [
        product_lifts(ranked.filter(pl.col("half") == h), weeks).filter(
            pl.col("events") >= min_events
        )
        for h in (0, 1)
    ]
    both = halves[0].join(halves[1], on="product_id", suffix="_other")
    if both.height < 3:
        return {"products": both.height, "split_half": None, "full_set": None, "ceiling": None}
    r = float(spearmanr(both["lift"], both["lift_other"])[0])
    full = 2 * r / (1 + r) if r > -1 else None
    return {
        "products": both.height,
        "split_half": r,
        "full_set": full,
        "ceiling": float(np.sqrt(full)) if full is not None and full > 0 else None,
    }


def _period(panel: pl.LazyFrame, weeks: list[int]) -> pl.LazyFrame:
    """The panel's cells of ``weeks``, each with its product × store's unpromoted weeks there."""
    return panel.filter(pl.col("week").is_in(weeks)).with_columns(
        off_weeks=(~pl.col("promo")).sum().over("product_id", "store_id")
    )


def basket_sales(trips: pl.DataFrame, baskets: pl.Series) -> pl.LazyFrame:
    """``SALES_SCHEMA``: per product × store × week, how many of ``baskets`` (basket ids) hold
    the product, from the trip store's product lists: the units every method predicts."""
    return trip_sales(trips.lazy().filter(pl.col("basket_id").is_in(baskets.implode())))


def trip_sales(trips: pl.LazyFrame) -> pl.LazyFrame:
    """``SALES_SCHEMA`` of every trip of ``trips`` (store_id, week, products)."""
    return (
        trips.select("store_id", "week", product_id=pl.col("products"))
        .explode("product_id", empty_as_null=False)
        .group_by("product_id", "store_id", "week")
        .agg(units=pl.len())
        .select(SALES_SCHEMA.names())
        .cast(dict(SALES_SCHEMA))
    )


def weekly_sales(trips: pl.LazyFrame) -> pl.DataFrame:
    """``trip_sales`` of ``trips`` aggregated a week at a time (a cell is one week's): memory
    holds one week's exploded product lists, not every week's (D97)."""
    weeks = trips.select(pl.col("week").unique().sort()).collect()["week"]
    frames = [trip_sales(trips.filter(pl.col("week") == w)).collect() for w in weeks]
    return pl.concat(frames) if frames else trip_sales(trips).collect()


def planted_promotions(calendar: pl.DataFrame, stores: pl.DataFrame) -> pl.LazyFrame:
    """``PROMOTIONS_SCHEMA`` from a promotion calendar of product × region × week with a
    ``depth`` (the generator's, planted before any basket) and ``stores`` (store_id,
    store_region): every store of the region, kind ``price``."""
    return (
        calendar.lazy()
        .join(stores.lazy().unique("store_id"), on="store_region")
        .select(
            "product_id",
            "store_id",
            pl.col("week").cast(pl.Int32),
            kind=pl.lit("price"),
            depth=pl.col("depth").cast(pl.Float64),
        )
        .unique(CELL, keep="first")
    )


def table_promotions(cells: pl.LazyFrame, depths: pl.LazyFrame) -> pl.LazyFrame:
    """``PROMOTIONS_SCHEMA`` from a source's promotion table (``SOURCE_PROMOTIONS_SCHEMA``
    cells: display and mailer flags, set whether or not anything sold), kind "display",
    "mailer" or "display+mailer". The table says nothing of a price cut, so ``depth`` is the
    cut the other stores of the zone showed that week (``regional_promotions`` rows, the
    cell's own sales never read), null where none did."""
    kind = (
        pl.when(pl.col("display") & pl.col("mailer"))
        .then(pl.lit("display+mailer"))
        .when(pl.col("display"))
        .then(pl.lit("display"))
        .otherwise(pl.lit("mailer"))
    )
    return (
        cells.select("product_id", "store_id", pl.col("week").cast(pl.Int32), kind=kind)
        .join(depths.select(*CELL, "depth"), on=CELL, how="left")
        .select(PROMOTIONS_SCHEMA.names())
        .cast(dict(PROMOTIONS_SCHEMA))
    )


def regional_promotions(cells: pl.LazyFrame, stores: pl.DataFrame) -> pl.LazyFrame:
    """``PROMOTIONS_SCHEMA`` where no promotion table exists: a cell is promoted when another
    store of its region observed the product on promotion that week (leave-one-store-out, as
    the model's shelf reads it, D45), so the cell's own sales never decide; ``depth`` is those
    stores' mean observed depth. ``cells``: ``PROMOTION_CELLS_SCHEMA`` rows (derived prices);
    ``stores``: store_id, store_region."""
    seen = (
        cells.filter(pl.col("promo") & pl.col("observed"))
        .join(stores.lazy().unique("store_id"), on="store_id")
        .select(
            "product_id",
            "store_id",
            "store_region",
            "week",
            # deeper cuts are data errors (design §2.2.2), as on the shelf
            pl.col("discount_depth").clip(0.0, MAX_DEPTH),
        )
    )
    region = seen.group_by("product_id", "store_region", "week").agg(
        n=pl.len(), depth_sum=pl.col("discount_depth").fill_null(0.0).sum()
    )
    candidates = cells.select(*CELL).join(stores.lazy().unique("store_id"), on="store_id")
    own = seen.select(*CELL, own_depth=pl.col("discount_depth").fill_null(0.0), own=pl.lit(1))
    return (
        # A source without regions (null) is one zone: the chain (D86).
        candidates.join(region, on=["product_id", "store_region", "week"], nulls_equal=True)
        .join(own, on=CELL, how="left")
        .with_columns(others=pl.col("n") - pl.col("own").fill_null(0))
        .filter(pl.col("others") > 0)
        .select(
            "product_id",
            "store_id",
            pl.col("week").cast(pl.Int32),
            kind=pl.lit("price"),
            depth=(pl.col("depth_sum") - pl.col("own_depth").fill_null(0.0)) / pl.col("others"),
        )
    )

"""The observed check's cells: read for the promoted products and their substitutes alone,
the same figures as every cell of the test weeks."""

import polars as pl
from polars.testing import assert_frame_equal

from retailsim_core.graph.substitution import pair_effects
from retailsim_core.pipeline.data.price_weeks import promotion_cells
from retailsim_core.pipeline.readers.price_reader import stored_prices
from retailsim_core.response.observed_response import own_uplift, products_read


def test_the_products_read_give_the_figures_of_every_cell(tiny_warehouse):
    wh, weeks = tiny_warehouse["warehouse"], [12, 13, 14]
    stored = stored_prices(wh, weeks).filter(pl.col("promo_flag"))
    promoted = stored.select("product_id").unique().sort("product_id").collect()["product_id"]
    every = promotion_cells(wh, weeks)
    # Substitution edges from promoted products to others that sell (the tiny graph has few),
    # beside a complement edge the check never reads.
    others = (
        every.filter(~pl.col("product_id").is_in(promoted.implode()) & (pl.col("units") > 0))
        .select("product_id")
        .unique()
        .sort("product_id")
        .head(40)
        .collect()["product_id"]
    )
    n = min(len(others), len(promoted), 40)
    edges = pl.DataFrame(
        {
            "src": [*promoted[:n], others[0]],
            "dst": [*others[:n], others[1]],
            "edge_type": ["substitution"] * n + ["complement"],
        }
    )
    read = promotion_cells(wh, weeks, products=products_read(promoted, edges))
    assert read.collect().height < every.collect().height  # a real cut, not every cell
    assert own_uplift(every).height > 0
    assert_frame_equal(own_uplift(read), own_uplift(every))
    subs = edges.filter(pl.col("edge_type") == "substitution").select(a="src", b="dst")
    pairs = pl.concat([subs, subs.select(a="b", b="a")])
    whole = pair_effects(every, pairs)
    assert whole.height > 0
    assert_frame_equal(pair_effects(read, pairs), whole)


def test_products_read_are_the_promoted_and_their_substitutes_both_ways():
    edges = pl.DataFrame(
        {
            "src": ["a", "c", "x", "d"],
            "dst": ["b", "a", "y", "a"],
            "edge_type": ["substitution", "substitution", "substitution", "complement"],
        }
    )
    assert products_read(pl.Series(["a"]), edges).to_list() == ["a", "b", "c"]

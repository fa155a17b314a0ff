"""The vocabulary's coverage of test purchases, on a literal trip store."""

import polars as pl

from retailsim_core.next_basket.summary import vocabulary_coverage


def test_coverage_counts_purchases_and_products_of_the_given_baskets_only():
    trips = pl.DataFrame(
        {
            "basket_id": [1, 2, 3],
            "products": [["A", "B", "Z"], ["A", "Y"], ["Q", "R"]],  # basket 3 is not asked for
        }
    )
    vocab = pl.DataFrame({"product_id": ["A", "B", "C"], "token": [1, 2, 3]})
    got = vocabulary_coverage(trips, pl.Series([1, 2]), vocab)
    assert got == {
        "purchases": 5,
        "purchases_covered": 3,
        "purchase_share": 0.6,
        "products": 4,
        "products_covered": 2,
        "vocabulary": 3,
    }

"""What the model steps read to build tensors, apart from the steps that use it: the samples,
trip store, snapshots, store features, product table and graph pairs of a range of weeks, and
each store-week's shelf replayed from the observed price cells (training, evaluation, pricing
and serving all read it here)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import polars as pl

from retailsim_core.datasets.model_inputs import ModelInputs
from retailsim_core.datasets.sample_buckets import SAMPLES_SCHEMA
from retailsim_core.datasets.shelf import PLAN_SCHEMA, ShelfPrices, ShelfWriter
from retailsim_core.datasets.tensors import PRICE_COLUMNS
from retailsim_core.datasets.tokens import ProductVocab
from retailsim_core.models.inputs import (
    copurchase_token_pairs,
    graphsage_rows,
    substitute_token_pairs,
)
from retailsim_core.pipeline.data.embeddings import load_embeddings
from retailsim_core.pipeline.data.graph_tables import load_graph
from retailsim_core.pipeline.data.promotion_weeks import known_promotion_weeks
from retailsim_core.pipeline.data.training_data_weeks import build_trip_store
from retailsim_core.pipeline.readers.price_reader import PriceSums, store_regions, stored_prices
from retailsim_core.pipeline.readers.price_reader import price_weeks as read_weeks
from retailsim_core.storage.mapped import MappedArrays
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import (
    AFFINITY_TABLE,
    MISSIONS_TABLE,
    PROMOTION_CELLS_TABLE,
    SAMPLES_TABLE,
    STORE_FEATURES_TABLE,
)


def load_model_inputs(
    warehouse: Warehouse,
    weeks: Iterable[int] | None = None,
    mapped: MappedArrays | None = None,
    log: Callable[[str], None] = lambda _: None,
    every_cell: bool = False,
    price_sums: PriceSums | None = None,
) -> ModelInputs:
    """Samples of ``weeks`` (default all) with the features their rows join to; price features
    are read only for the (product, store, week) cells of those baskets, or with ``every_cell``
    for every cell of ``weeks`` (what serving answers any context from: the same replay of the
    shelf prices, not a second one). Given ``mapped``, the shelf and every training set built
    from the inputs live on its disk (D97). ``price_sums`` gathers every replayed week's mean
    price sums (D128)."""
    vectors, id_map = load_embeddings(warehouse)
    vocab = ProductVocab.from_products(id_map["product_id"].to_list())
    weeks = sorted(weeks) if weeks is not None else warehouse.weeks(SAMPLES_TABLE)
    samples = warehouse.scan(SAMPLES_TABLE, weeks, schema=SAMPLES_SCHEMA).collect()
    folder = None if mapped is None else mapped.subfolder("trips")  # on disk too (D136)
    store = build_trip_store(warehouse, max_week=max(weeks), folder=folder)
    log(f"trip store: {store.trips.height:,} trips; {samples.height:,} samples")
    # The samples' own cells, a week at a time (``_prices_and_shelf`` collects each week's).
    cells = (
        store.trips.lazy()
        .with_columns(sample=store.trips["basket_id"].is_in(samples["basket_id"].implode()))
        .filter("sample")
        .select("store_id", "week", pl.col("products").alias("product_id"))
        .explode("product_id")
        .unique()
    )
    prices, shelf = _prices_and_shelf(
        warehouse, weeks, None if every_cell else cells, vocab, mapped, price_sums
    )
    log(f"shelf: {shelf.keys.height:,} store-weeks, {len(shelf.tokens):,} cells")
    key_weeks = pl.col("week").is_in(weeks)
    edges = load_graph(warehouse).edges
    return ModelInputs(
        vocab=vocab,
        id_map=id_map,
        product_table=graphsage_rows(vocab, vectors, id_map),
        store=store,
        samples=samples,
        affinity=_frame(warehouse.scan(AFFINITY_TABLE, weeks).filter(key_weeks), mapped),
        missions=_frame(warehouse.scan(MISSIONS_TABLE, weeks).filter(key_weeks), mapped),
        price_features=prices,
        store_features=warehouse.scan(STORE_FEATURES_TABLE, weeks).collect(),
        shelf=shelf,
        edges=edges,
        substitutes=substitute_token_pairs(edges, vocab),
        copurchase=copurchase_token_pairs(edges, vocab),
        calendar=warehouse.calendar,
        mapped=mapped,
    )


def _frame(scan: pl.LazyFrame, mapped: MappedArrays | None) -> pl.DataFrame | pl.LazyFrame:
    """The scan itself where the inputs are mapped (a build chunk reads the rows it joins to),
    else its rows."""
    return scan if mapped is not None else scan.collect()


def _prices_and_shelf(
    warehouse: Warehouse,
    weeks: list[int],
    cells: pl.LazyFrame | None,
    vocab: ProductVocab,
    mapped: MappedArrays | None = None,
    sums: PriceSums | None = None,
) -> tuple[pl.DataFrame | pl.LazyFrame, ShelfPrices]:
    """T4 rows of the samples' own ``cells`` (None: every cell of ``weeks``), and the shelf of
    every store-week, materialised one week at a time (D67, D96): week W's shelf comes from
    W-1's price features and W's observed cells, so the history's price features are never in
    memory together. Given ``mapped``, both go to its disk as they are made (D97): the T4 rows
    as a scan of weekly files."""
    price_weeks = sorted({max(weeks[0] - 1, 1), *weeks})
    observed_columns = ("product_id", "store_id", "store_region", "week", "discount_depth")
    # Every store with a shelf row sold something (its cells are pairs it sold), so its region is
    # here.
    regions = store_regions(warehouse, price_weeks)
    kept, shelves = [], ShelfWriter(vocab, mapped)
    for week in read_weeks(warehouse, price_weeks, features=True, sums=sums):
        features = week.features.select("product_id", "store_id", "week", *PRICE_COLUMNS)
        if cells is None:  # every cell of the asked weeks (the shelf's week before is not)
            own = features if week.week in weeks else features.clear()
        else:
            week_cells = cells.filter(pl.col("week") == week.week).collect()
            own = features.join(week_cells, on=["product_id", "store_id", "week"], how="semi")
        if mapped is None:
            kept.append(own)
        else:  # one Parquet file per week; a chunk's scan reads its weeks' files
            kept.append(mapped.folder / f"prices-{week.week}.parquet")
            own.write_parquet(kept[-1], statistics=True)
        if week.week >= max(weeks):
            continue
        # A week outside the read range has no observations to give (as in one read of it).
        observed_weeks = [week.week + 1] if week.week + 1 in price_weeks else []
        observed = stored_prices(warehouse, observed_weeks).select(observed_columns).collect()
        plan = promotion_plan(warehouse, observed_weeks)
        shelves.append(ShelfPrices.build(features, observed, regions, vocab, plan))
    prices = pl.concat(kept) if mapped is None else pl.scan_parquet(kept)
    return prices, shelves.shelf()


def promotion_plan(warehouse: Warehouse, weeks: list[int]) -> pl.DataFrame | None:
    """The source's promotion plan of ``weeks`` (``PLAN_SCHEMA``; D86, D87), or None where no
    week of them has one: a source without a plan (LGSR) or a warehouse ingested before it."""
    known = known_promotion_weeks(warehouse, weeks)  # read from a plan, not "no_table"
    if not known:
        return None
    return (
        warehouse.scan(PROMOTION_CELLS_TABLE, known)
        .select(PLAN_SCHEMA.names())
        .cast(dict(PLAN_SCHEMA))
        .collect()
    )

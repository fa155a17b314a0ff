"""The state of the derived-prices engine between weeks: per-slot and per-product arrays (D49).

A *slot* is a cell's position in the order cells entered the assortment (``cells.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from retailsim_core.derived_prices import (
    BASE_WINDOW,
    FORMAT,
    REGION,
    STORE_SPAN,
    UNKNOWN_FORMAT,
    UNKNOWN_REGION,
    PriceConfig,
    cell_codes,
    zone_of,
)
from retailsim_core.derived_prices.slots import Growable, KeyIndex

IDENTITY = pl.Schema(
    {"product_id": pl.String, "store_id": pl.String, "store_region": REGION, "store_format": FORMAT}
)


@dataclass
class CellState:
    """Everything week W+1 needs from weeks <= W."""

    cfg: PriceConfig
    week: int = 0  # last week folded in
    cells: KeyIndex = field(default_factory=KeyIndex)  # cell key -> slot
    products: KeyIndex = field(default_factory=KeyIndex)
    zones: KeyIndex = field(default_factory=KeyIndex)
    product_regions: KeyIndex = field(default_factory=KeyIndex)
    slot: Growable = field(default_factory=Growable)  # per-slot arrays
    product: Growable = field(default_factory=Growable)  # per-product arrays
    identity: pl.DataFrame = field(default_factory=IDENTITY.to_frame)  # IDENTITY per slot
    head: int = 0  # prev_price row holding week W's price

    def __post_init__(self) -> None:
        for name, dtype, fill, rows in (
            ("key", np.int64, 0, None),
            ("product", np.int64, 0, None),
            ("zone", np.int64, 0, None),
            ("product_region", np.int64, 0, None),
            ("first_week", np.int16, 0, None),
            ("n_obs", np.int32, 0, None),
            ("price_sum", np.float64, 0.0, None),
            ("price_sumsq", np.float64, 0.0, None),
            ("own_n", np.int32, 0, None),
            ("l2_n", np.int32, 0, None),
            ("l2_sum", np.int64, 0, None),
            ("prev_base", np.float64, np.nan, None),
            (
                "prev_price",
                np.float64,
                np.nan,
                BASE_WINDOW - 1,
            ),  # the cell's price in weeks W, W-1, W-2
            ("history", np.float64, np.nan, self.cfg.history_weeks),
        ):
            self.slot.declare(name, dtype, fill, rows)
        self.product.declare("first_week", np.int16, np.iinfo(np.int16).max)
        self.product.declare("obs_weeks", np.int32, 0)

    @property
    def n(self) -> int:
        return self.slot.size

    def add_cells(self, cells: pl.DataFrame) -> None:
        """Append cells in the given order: columns cell, first_week and IDENTITY's store codes."""
        if cells.height == 0:
            return
        cells = cells.with_columns(
            pl.col("store_region").cast(REGION), pl.col("store_format").cast(FORMAT)
        )
        keys = cells["cell"].to_numpy()
        self.cells.add(keys)
        new = slice(self.slot.grow(keys.size), self.n)
        product_num = keys // STORE_SPAN
        # An Enum's physical code is the position in STORE_*_CODES: the REGION_INDEX / FORMAT_INDEX
        # code.
        region = cells["store_region"].to_physical().cast(pl.Int64).fill_null(UNKNOWN_REGION)
        fmt = cells["store_format"].to_physical().cast(pl.Int64).fill_null(UNKNOWN_FORMAT)
        region, fmt = region.to_numpy(), fmt.to_numpy()
        product = self.products.ids(product_num)
        self.product.grow(self.products.size - self.product.size)
        first_week = cells["first_week"].to_numpy()
        s = self.slot.arrays
        s["key"][new], s["product"][new], s["first_week"][new] = keys, product, first_week
        s["zone"][new] = self.zones.ids(zone_of(product_num, region, fmt))
        s["product_region"][new] = self.product_regions.ids(product_num * 16 + region)
        np.minimum.at(self.product.arrays["first_week"], product, first_week)
        identity = cells.with_columns(cell_codes()).select(IDENTITY.names())
        self.identity = pl.concat([self.identity, identity], rechunk=self.identity.n_chunks() > 16)

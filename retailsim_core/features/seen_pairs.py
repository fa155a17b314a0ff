"""The distinct (store, product) pairs seen to date, for the store features' assortment width.

A week's new pairs were an anti-join of the week's pairs against every pair to date: a pass over
all of them each week, so the fold cost grew with weeks x pairs (D103). Here each id gets a
dense code in order of arrival (a join against the ids seen, a few thousand), a pair the int64 key
``store_code << 32 | product_code``, and the keys to date a sorted index: a week costs a binary
search per pair it holds (``prices.slots.KeyIndex``). Exact: codes are a bijection.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from retailsim_core.derived_prices.slots import KeyIndex

PAIR = ("store_id", "product_id")


class SeenPairs:
    """Grows as weeks are folded in; ``size``: the distinct pairs seen."""

    def __init__(self) -> None:
        self._codes = {column: _Codes(column) for column in PAIR}
        self._keys = KeyIndex()

    @property
    def size(self) -> int:
        return self._keys.size

    def add(self, rows: pl.DataFrame) -> pl.DataFrame:
        """The distinct (store_id, product_id) pairs of ``rows`` not seen before; they are seen
        from now on."""
        pairs = rows.select(PAIR).unique(maintain_order=True)
        stores, products = (self._codes[c].of(pairs[c]) for c in PAIR)
        keys = (stores << 32) | products
        new = self._keys.lookup(keys) < 0
        self._keys.add(keys[new])
        return pairs.filter(pl.Series(new))


class _Codes:
    """Dense codes 0, 1, ... for the values of one string column, in order of arrival."""

    def __init__(self, column: str) -> None:
        self.column = column
        self.table = pl.DataFrame(schema={column: pl.String, "code": pl.Int64})

    def of(self, values: pl.Series) -> np.ndarray:
        if values.null_count():
            raise ValueError(f"{self.column} has nulls: a pair needs both ids")
        values = values.cast(pl.String)
        found = values.to_frame(self.column).join(
            self.table, on=self.column, how="left", maintain_order="left"
        )["code"]
        if found.null_count():
            fresh = values.filter(found.is_null()).unique(maintain_order=True)
            n = self.table.height
            self.table = pl.concat(
                [
                    self.table,
                    pl.DataFrame(
                        {self.column: fresh, "code": pl.int_range(n, n + len(fresh), eager=True)}
                    ),
                ]
            )
            return self.of(values)
        if self.table.height >= 1 << 31:
            raise ValueError(f"more than 2^31 distinct {self.column} values")
        return found.to_numpy().astype(np.int64)

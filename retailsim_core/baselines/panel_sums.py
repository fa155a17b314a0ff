"""The fitting weeks' panel as the econometric baselines read it, summed a product group at a
time (issue #62, D125): the unpromoted cells are never held whole.

The hierarchical log-log fit (``econometric.HierarchicalLogLog``) and the unpromoted level read
the unpromoted cells only through sums: per product × store its cell count, the sum of
y = log(units + 1) and of units; per week the sum of y less its product × store's mean; and,
for a level, the week effects summed over the weeks a product × store has. So a group's cells
become those sums and two narrow arrays (each cell's product × store and week: 6 bytes against
the 33 of a coded panel row), and the few promoted cells are kept whole. On the real LGSR sample
the check's 35M earlier cells were 1.1 GB coded, and the fit sorted them again.

Determinism: a group's cells are summed in its canonical order (product, store, week), a week's
partial sums over groups by ``math.fsum``: the same groups give the same bytes whatever the
rows' order.

Glossary: N unpromoted cells, Q product × stores with one, G groups, W weeks (0 .. last week).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

PAIR = ("product_id", "store_id")
PROMOTED_COLUMNS = ("product_id", "store_id", "week", "units", "kind", "depth")


@dataclass(frozen=True)
class PanelSums:
    pairs: pl.DataFrame  # (Q,) product_id, store_id (String, sorted), n, y_sum, units_sum
    cells: tuple[tuple[np.ndarray, np.ndarray], ...]  # per group: (N_g,) pair row, (N_g,) week
    offsets: tuple[int, ...]  # per group: the pairs' row of its first product × store
    centred: np.ndarray  # (G, W) per group and week: sum of y less its product × store's mean
    counts: np.ndarray  # (G, W) per group and week: its unpromoted cells
    promoted: pl.DataFrame  # PROMOTED_COLUMNS of the promoted cells (String keys and kind)

    @classmethod
    def of(cls, panel: pl.DataFrame) -> PanelSums:
        """Any ``PANEL_SCHEMA`` rows (keys and kind String or coded), as one group."""
        strings = pl.col("product_id", "store_id", "kind").cast(pl.String)
        return cls.of_sorted(panel.with_columns(strings).sort(*PAIR, "week"))

    @classmethod
    def of_sorted(cls, panel: pl.DataFrame) -> PanelSums:
        """One group's ``PANEL_SCHEMA`` rows with String keys, sorted by product, store and
        week (``promotion_events.panel_groups`` yields them so)."""
        promoted = panel.filter(pl.col("promo")).select(PROMOTED_COLUMNS)
        off = panel.filter(~pl.col("promo")).select(
            *PAIR, "week", "units", y=(pl.col("units") + 1).log()
        )
        new = pl.any_horizontal(pl.col(c) != pl.col(c).shift(1) for c in PAIR).fill_null(True)
        first = off.select(new).to_series().to_numpy()
        starts = np.flatnonzero(first)
        index = (np.cumsum(first, dtype=np.int64) - 1).astype(np.int32)  # (N_g,)
        n = np.diff(np.append(starts, off.height))
        y, week = off["y"].to_numpy(), off["week"].to_numpy()
        y_sum = np.add.reduceat(y, starts) if off.height else np.zeros(0)
        units = off["units"].to_numpy()
        units_sum = np.add.reduceat(units, starts) if off.height else np.zeros(0)
        width = int(week.max()) + 1 if off.height else 0
        centred = np.bincount(week, weights=y - (y_sum / n)[index], minlength=width)
        pairs = (
            off[starts]
            .select(*PAIR)
            .with_columns(
                n=pl.Series(n, dtype=pl.Int64),
                y_sum=pl.Series(y_sum),
                units_sum=pl.Series(units_sum),
            )
        )
        cells = ((index, week.astype(np.int16)),)
        counts = np.bincount(week, minlength=width)
        return cls(pairs, cells, (0,), centred[None], counts[None], promoted)

    @classmethod
    def concat(cls, groups: list[PanelSums]) -> PanelSums:
        """The groups' sums side by side (each product × store in one group), in their order."""
        if not groups:
            raise ValueError("no group to concatenate")
        width = max(g.centred.shape[1] for g in groups)

        def stack(arrays: list[np.ndarray]) -> np.ndarray:
            return np.concatenate([np.pad(a, ((0, 0), (0, width - a.shape[1]))) for a in arrays])

        offsets = np.cumsum([0] + [g.pairs.height for g in groups[:-1]])
        return cls(
            pl.concat([g.pairs for g in groups]),
            tuple(c for g in groups for c in g.cells),
            tuple(int(o + x) for o, g in zip(offsets, groups, strict=True) for x in g.offsets),
            stack([g.centred for g in groups]),
            stack([g.counts for g in groups]),
            pl.concat([g.promoted for g in groups]),
        )

    def weeks(self) -> list[int]:
        """The weeks with a cell, promoted or not, ascending."""
        off = np.flatnonzero(self.counts.sum(0))
        return sorted(set(off.tolist()) | set(self.promoted["week"].to_list()))

    def week_effects_and_levels(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(week, effect), (product_id, store_id, level): a week's effect is the mean over its
        unpromoted cells of y less the cell's product × store mean; a level is the mean over a
        product × store's unpromoted cells of y less the week's effect."""
        counts = self.counts.sum(0)
        present = np.flatnonzero(counts)
        effect = np.zeros(self.counts.shape[1])
        effect[present] = [math.fsum(self.centred[:, w]) / counts[w] for w in present]
        week_sum = np.zeros(self.pairs.height)  # (Q,) each product × store's weeks' effects
        for (index, week), offset in zip(self.cells, self.offsets, strict=True):
            local = np.bincount(index, weights=effect[week])
            week_sum[offset : offset + len(local)] = local
        n = self.pairs["n"].to_numpy()
        weeks = pl.DataFrame(
            {"week": pl.Series(present, dtype=pl.Int32), "effect": effect[present]}
        )
        level = (self.pairs["y_sum"].to_numpy() - week_sum) / np.maximum(n, 1)
        levels = self.pairs.select(*PAIR, level=pl.Series(level)).sort(*PAIR)
        return weeks, levels

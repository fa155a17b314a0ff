"""Sum the world model's baskets over shoppers into cells (``world_demand``): every context
(customer × store × week, with its expected trips as ``weight``) is scored once, its (V,) chance
that the basket holds each product (``counterfactual.simulate.basket_units``) weighted and added
into its store's row of the week; the forecast cells then read their (store, product) entries.

Cost grows with the contexts (one model pass each, V-wide), never with stores × products: a
week's store rows are the stores its contexts are at.

Glossary: B contexts of a batch, S stores of a week, V vocabulary, N cells.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl
import torch

from retailsim_core.counterfactual.simulate import basket_units
from retailsim_core.demand.world_demand import CONTEXT_COLUMNS
from retailsim_core.models.world_model import WorldModel
from retailsim_core.serving.context import ServingData


@torch.no_grad()
def shopper_units(
    models: Mapping[int, WorldModel],
    data: ServingData,
    contexts: pl.DataFrame,
    cells: pl.DataFrame,
    quantity: np.ndarray,
    batch_size: int = 256,
) -> tuple[np.ndarray, dict[int, float]]:
    """((N,) expected baskets holding the product of every cell (product_id, store_id, week),
    {week: the contexts' expected units over every product, sum of weight · held · ``quantity``
    (V,)}). ``models``: the model of each week; ``contexts``: ``forecast_contexts`` rows (their
    stores known to ``data``). A cell no context reaches (its store or product unknown) is 0."""
    tokens = data.vocab.frame().select("product_id", "token")
    keyed = cells.select("product_id", "store_id", pl.col("week").cast(pl.Int64)).with_row_index(
        "cell"
    ).join(tokens, on="product_id", how="left")  # fmt: skip
    out, totals = np.zeros(cells.height), {}
    q = torch.tensor(np.asarray(quantity, dtype=np.float64))  # (V,) the vocabulary's tokens
    for (week,), part in contexts.sort("week").group_by("week", maintain_order=True):
        model = models[int(week)]
        model.train(False)
        stores = part["store_id"].unique().sort()
        row_of = pl.DataFrame({"store_id": stores, "row": pl.int_range(stores.len(), eager=True)})
        # Short histories together: a batch pads to its longest (as the service does).
        part = (
            part.with_columns(history=pl.Series(data.history_trips(part.select(CONTEXT_COLUMNS))))
            .sort("history", "customer_id", "store_id", "date", "hour")
            .join(row_of, on="store_id", how="left", maintain_order="left")
        )
        # (S, V') V' = the model's columns: the vocabulary and its special tokens after it
        acc = torch.zeros(stores.len(), model.vocab_size, dtype=torch.float64)
        for lo in range(0, part.height, batch_size):
            chunk = part.slice(lo, batch_size)
            held = basket_units(model, data.batch(chunk.select(CONTEXT_COLUMNS))).double()
            held *= torch.tensor(chunk["weight"].to_numpy())[:, None]  # (B, V)
            acc.index_add_(0, torch.tensor(chunk["row"].to_numpy()), held)
        totals[int(week)] = float((acc[:, : len(q)].sum(0) * q).sum())
        found = (
            keyed.filter(pl.col("week") == week)
            .join(row_of, on="store_id", how="inner")
            .drop_nulls("token")
        )
        values = acc[found["row"].to_numpy(), found["token"].to_numpy()].numpy()
        out[found["cell"].to_numpy()] = values
    return out, totals

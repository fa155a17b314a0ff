"""The ceiling on synthetic data: rank products by the generator's true purchase probabilities
(``synth.oracle``) given each test basket's planted context (customer, store, mission focus,
price mode, size) from the ground truth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import torch

from retailsim_core.synth.oracle import purchase_probabilities
from retailsim_core.synth.world import load_world
from retailsim_core.tokens import PAD, ProductVocab


def oracle_scorer(truth_dir: Path, samples: pl.DataFrame, vocab: ProductVocab):
    world = load_world(truth_dir)
    weeks = sorted(samples["week"].unique().to_list())
    baskets = pl.concat([pl.read_parquet(truth_dir / "baskets" / f"week_{w:03d}.parquet") for w in weeks
                         if (truth_dir / "baskets" / f"week_{w:03d}.parquet").exists()])
    ctx = samples.select("basket_id").join(
        baskets.select("basket_id", "week", "customer_idx", "store_idx", "mission_focus", "price_mode", "basket_size"),
        on="basket_id", how="left", maintain_order="left")
    if ctx["customer_idx"].null_count():
        raise ValueError("ground truth lacks some evaluated baskets: is it the truth of these raw files?")
    lookup = dict(zip(vocab.products, range(1, vocab.n_products + 1)))
    token_of = np.array([lookup.get(code, PAD) for code in world.catalogue.product_code])     # catalogue -> token

    def score(rows: np.ndarray, batch: dict) -> torch.Tensor:
        out = np.full((len(rows), vocab.size), -np.inf)
        part = ctx[rows].with_row_index("i")
        for (week,), group in part.group_by("week"):   # a handful of weeks per chunk, vectorised within
            probs = purchase_probabilities(world, int(week), group["customer_idx"].to_numpy(), group["store_idx"].to_numpy(),
                                           group["mission_focus"].to_list(), group["price_mode"].to_list(),
                                           group["basket_size"].to_list())
            i = group["i"].to_numpy()
            known = token_of > 0
            out[np.ix_(i, token_of[known])] = probs[:, known]
        return torch.as_tensor(out)
    return score

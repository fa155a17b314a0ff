"""The report's simulation and elasticity sections (design §6.2, §4.3.2).

- Elasticities for one named context (price-sensitive customers at small stores on weekends;
  all test contexts if too few), over the products with the most expected units; on synthetic
  data, compared with the generator's planted own-price elasticities.
- Simulated baskets for test contexts (no mission given) vs the real ones: mean size, the size
  distribution (total variation distance, Kolmogorov-Smirnov statistic) and repeat share; and
  the mean size a simulated basket is drawn with (the size head's expectation) over every
  scored test context, with a context-resample interval of its ratio to the real mean (D131).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import torch
from scipy.stats import spearmanr

from retailsim_core.counterfactual.simulate import (
    Contexts,
    elasticities,
    expected_basket_size,
    generate,
    jacobian_rows,
    price_book,
    sizes_and_units,
)
from retailsim_core.datasets.tensors import TrainingSet
from retailsim_core.ingest.lgsr import PRICE_SENSITIVITY_CODES, STORE_FORMAT_CODES
from retailsim_core.models.world_model import WorldModel
from retailsim_core.response.response_metrics import percentile_interval, product_resamples
from retailsim_core.storage.heap import release_free_heap
from retailsim_core.synth.world import PlantedTruth

MIN_CONTEXTS = 20


def elasticity_context(data: TrainingSet, rows: np.ndarray) -> tuple[np.ndarray, str]:
    """LA customers at SS stores on Saturday/Sunday; falls back to every given row."""
    la = data.customer_codes[rows, 0] == PRICE_SENSITIVITY_CODES.index("LA") + 1
    small = data.store_codes[rows, 0] == STORE_FORMAT_CODES.index("SS") + 1
    weekend = np.isin(data.time_context[rows, 1], (1, 7))  # Sunday = 1, Saturday = 7
    chosen = rows[la & small & weekend]
    if len(chosen) >= MIN_CONTEXTS:
        return chosen[:256], "price-sensitive (LA) customers at small (SS) stores on weekends"
    return rows[:256], "all test contexts (fewer than 20 LA / SS / weekend baskets)"


def price_response(
    model: WorldModel,
    data: TrainingSet,
    rows: np.ndarray,
    categories: np.ndarray,
    truth: PlantedTruth | None,
    n_products: int = 40,
    n_pairs: int = 30,
    seed: int = 0,
    chunk: int | None = None,
) -> dict:
    """Elasticities over up to 256 test contexts (``chunk`` per backward pass), against the
    planted truth where there is one."""
    ctx_rows, ctx_name = elasticity_context(data, rows)
    contexts = rows_of(data, ctx_rows)  # a chunk's batch built at a time, never all (D127)
    # The size head's expectation (no basket is peeked at) and the units, a chunk at a time.
    size, units = sizes_and_units(model, contexts, len(ctx_rows), chunk)
    products = (torch.topk(units[1 : data.vocab.n_products + 1], n_products).indices + 1).numpy()
    table = elasticities(model, contexts, size, products, categories, chunk=chunk)
    names = np.array(("[PAD]",) + data.vocab.products + ("[MASK]", "[EOS]"))
    table = table.with_columns(
        product_id=pl.Series(names[table["product"].to_numpy()]),
        other_id=pl.Series(names[table["other"].to_numpy()]),
    )
    own = table.filter(pl.col("kind") == "own").select(
        "product_id", pl.col("elasticity").alias("model_elasticity")
    )
    out = {"context": ctx_name, "contexts": len(ctx_rows), "elasticities": table, "own": own}
    if truth is not None:
        world = truth.world
        planted = pl.DataFrame(
            {
                "product_id": world.catalogue.product_code,
                "planted_elasticity": world.catalogue.elasticity,
            }
        )
        own = own.join(planted, on="product_id", how="left")
        out["own"] = own
        out |= planted_agreement(own)
        out["substitution"] = substitution_check(
            model, contexts, size, data.vocab, world, categories, units, n_pairs, seed, chunk
        )
    return out


def rows_of(data: TrainingSet, rows: np.ndarray) -> Contexts:
    """The contexts of sample ``rows``, each range's batch built when it is asked for."""
    return lambda start, stop: data[rows[start:stop]]


def planted_agreement(own: pl.DataFrame) -> dict:
    """Own-price elasticities vs the generator's: share negative, Spearman and Pearson
    correlation.
    """
    own = own.drop_nulls("planted_elasticity")
    if own.height < 3:
        return {}
    model, planted = own["model_elasticity"].to_numpy(), own["planted_elasticity"].to_numpy()
    return {
        "own_negative_share": float((model < 0).mean()),
        "planted_spearman": float(spearmanr(model, planted)[0]),
        "planted_correlation": float(np.corrcoef(model, planted)[0, 1]),
        "planted_products": own.height,
    }


def substitution_check(
    model: WorldModel,
    contexts: Contexts,
    size: torch.Tensor,
    vocab,
    world,
    categories: np.ndarray,
    units: torch.Tensor,
    n_pairs: int,
    seed: int,
    chunk: int | None = None,
) -> dict:
    """Cross-price elasticities d log E_a / d log p_b of the planted substitute pairs with the most
    expected units vs as many random same-category pairs that are not substitutes (each pair in
    both directions): how often positive (a price rise of b sends shoppers to a), and the means."""
    cat = world.catalogue
    tok = dict(zip(vocab.products, range(1, vocab.n_products + 1), strict=True))
    members = cat.slot_members[cat.slot_members[:, 1] >= 0]
    subs = np.array(
        [
            (tok[cat.product_code[a]], tok[cat.product_code[b]])
            for a, b in members
            if cat.product_code[a] in tok and cat.product_code[b] in tok
        ],
        dtype=np.int64,
    ).reshape(-1, 2)
    u = units.numpy()
    subs = subs[np.argsort(-np.minimum(u[subs[:, 0]], u[subs[:, 1]]), kind="stable")][:n_pairs]
    if len(subs) == 0:
        return {"substitute_pairs": 0, "random_pairs": 0}
    rng = np.random.default_rng(seed)
    known = {tuple(p) for p in subs} | {tuple(p[::-1]) for p in subs}
    popular = np.argsort(-u[1 : vocab.n_products + 1], kind="stable")[:500] + 1
    randoms = []
    for a in rng.permutation(popular):
        same = popular[(categories[popular] == categories[a]) & (popular != a)]
        same = [b for b in same if (a, b) not in known]
        if same:
            randoms.append((a, rng.choice(same)))
        if len(randoms) == len(subs):
            break
    randoms = np.array(randoms, dtype=np.int64).reshape(-1, 2)
    pairs = np.concatenate([subs, subs[:, ::-1], randoms, randoms[:, ::-1]])
    firsts = np.unique(pairs[:, 0])
    jac = jacobian_rows(model, contexts, size, firsts, chunk)
    values = jac[np.searchsorted(firsts, pairs[:, 0]), pairs[:, 1]]
    n_sub = 2 * len(subs)
    sub_v, rand_v = values[:n_sub], values[n_sub:]
    return {
        "substitute_pairs": len(subs),
        "random_pairs": len(randoms),
        "substitute_positive_share": float((sub_v > 0).mean()),
        "substitute_mean": float(sub_v.mean()),
        "substitute_median": float(np.median(sub_v)),
        **(
            {
                "random_positive_share": float((rand_v > 0).mean()),
                "random_mean": float(rand_v.mean()),
                "random_median": float(np.median(rand_v)),
            }
            if len(rand_v)
            else {}
        ),
    }


def simulation_check(
    model: WorldModel,
    data: TrainingSet,
    rows: np.ndarray,
    prices: pl.DataFrame,
    stores: list[str],
    weeks: list[int],
    seed: int = 0,
    chunk: int | None = None,
) -> dict:
    """Generate one basket per test context (nothing of the basket given) and compare with the
    real baskets: mean size, size distribution, repeat share. ``summary`` holds the figures,
    ``sizes`` the two size histograms (index k = baskets of k products; the last bin k >= 50).
    ``chunk``: contexts generated at once (None: all); chunk k draws with ``seed + k``'s offset,
    so one chunk draws as before."""
    step = len(rows) if chunk is None else max(chunk, 1)
    gen_len, real_len, sim_hits, real_hits = [], [], [], []
    for lo in range(0, len(rows), max(step, 1)):
        part = rows[lo : lo + step]
        batch = data[part]
        book = price_book(prices, stores[lo : lo + step], weeks[lo : lo + step], data.vocab)
        baskets = generate(model, batch, book, seed=seed + lo)
        products = batch["repeat_products"].numpy()
        repeat = np.zeros((len(part), data.vocab.size), dtype=bool)
        repeat[np.repeat(np.arange(len(part)), products.shape[1]), products.ravel()] = True
        repeat[:, 0] = False
        lengths = np.array([len(b) for b in baskets])
        flat_r = np.repeat(np.arange(len(part)), lengths)
        flat_t = (
            np.concatenate([np.asarray(b, dtype=np.int64) for b in baskets])
            if lengths.sum()
            else np.zeros(0, np.int64)
        )
        real = batch["tokens"].numpy()
        real_r, real_c = np.nonzero((real >= 1) & (real <= data.vocab.n_products))
        gen_len.append(lengths)
        real_len.append(data.item_counts[part] + data.item_oov[part])
        sim_hits.append(repeat[flat_r, flat_t])
        real_hits.append(repeat[real_r, real[real_r, real_c]])
        del batch, book, baskets, repeat  # the chunk's buffers, given back before the next (D126)
        release_free_heap()
    gen_len, real_len = np.concatenate(gen_len), np.concatenate(real_len)
    sim_hits, real_hits = np.concatenate(sim_hits), np.concatenate(real_hits)
    cap = model.cfg.max_items
    real_hist = np.bincount(np.minimum(real_len, cap), minlength=cap + 1)
    sim_hist = np.bincount(np.minimum(gen_len, cap), minlength=cap + 1)
    p, q = real_hist / max(real_hist.sum(), 1), sim_hist / max(sim_hist.sum(), 1)
    summary = {
        "baskets": len(rows),
        "simulated_mean_size": float(gen_len.mean()),
        "real_mean_size": float(real_len.mean()),
        "mean_size_ratio": float(gen_len.mean() / max(real_len.mean(), 1e-12)),
        "size_total_variation": float(0.5 * np.abs(p - q).sum()),
        "size_ks_statistic": float(np.abs(np.cumsum(p) - np.cumsum(q)).max()),
        "simulated_repeat_share": float(sim_hits.mean()) if len(sim_hits) else 0.0,
        "real_repeat_share": float(real_hits.mean()) if len(real_hits) else 0.0,
    }
    return {
        "summary": summary,
        "sizes": {"real": real_hist.tolist(), "simulated": sim_hist.tolist()},
    }


@torch.no_grad()
def expected_size_check(
    model: WorldModel,
    data: TrainingSet,
    rows: np.ndarray,
    *,
    seed: int,
    chunk: int | None = None,
    n_boot: int = 1000,
) -> dict:
    """The size head's expected basket size over the contexts of ``rows`` against the real
    sizes of those baskets (every product, out-of-vocabulary ones too). A simulated basket
    holds the size drawn from the head (tested), so this is the simulated mean size without
    the draws' noise, over every scored context rather than a sample of them (D131). The
    ratio's 95% interval resamples the contexts; ``chunk``: contexts per forward pass."""
    step, sizes = max(chunk or len(rows), 1), []
    for lo in range(0, len(rows), step):
        sizes.append(expected_basket_size(model, data[rows[lo : lo + step]]).double().numpy())
        release_free_heap()  # each chunk's batch given back before the next (D126)
    expected = np.concatenate(sizes)
    real = (data.item_counts[rows] + data.item_oov[rows]).astype(np.float64)
    weights = product_resamples(len(rows), n_boot, seed)  # (N, C) context resamples
    ratio = expected.mean() / max(real.mean(), 1e-12)
    return {
        "expected_contexts": len(rows),
        "expected_mean_size": float(expected.mean()),
        "expected_real_mean_size": float(real.mean()),
        "expected_size_ratio": float(ratio),
        "expected_size_ratio_interval": percentile_interval(
            (weights @ expected) / np.maximum(weights @ real, 1e-12)
        ),
    }

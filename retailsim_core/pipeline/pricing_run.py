"""``pricing_policy``: price the top categories on the world model, judge every policy on a
held-out simulator too, write ``results.json``, the price paths, the PPO weights and a report
section (design §7.3, §7.4 layer 4; decision D89; ``docs/pricing.md``).

The held-out simulator is ``holdout_checkpoint``: the same model and schedule trained with another
seed on a sample of the training customers (``train_holdout``). A policy is found against the
training simulator only; the gap between its lift there and on the held-out one is what it
exploited of the first model's errors.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.datasets.tensors import TensorConfig
from retailsim_core.demand.world.world_demand import line_quantities
from retailsim_core.models.world_model import WorldModelConfig
from retailsim_core.pipeline.data.price_weeks import DERIVED_PRICES_SCHEMA
from retailsim_core.pipeline.readers.truth import bind_truth, read_truth
from retailsim_core.pipeline.readers.warehouse_inputs import load_model_inputs
from retailsim_core.pipeline.world_model_training import TrainingSummary, train_world_model
from retailsim_core.pricing.environment import PricingConfig, historical_values
from retailsim_core.pricing.panel import UnitsPerLine, build_panel, category_prices
from retailsim_core.pricing.planted import PlantedDemand
from retailsim_core.pricing.policies import (
    evaluate,
    myopic_path,
    ppo_path,
    static_path,
    train_ppo,
    variation,
)
from retailsim_core.pricing.pricing_report import pricing_markdown
from retailsim_core.report.svg_charts import lines
from retailsim_core.split import TemporalSplit
from retailsim_core.storage.io import atomic_write_parquet, atomic_write_text
from retailsim_core.storage.mapped import MappedArrays
from retailsim_core.storage.warehouse import Warehouse
from retailsim_core.tables import DEMAND_TABLE, PRICES_TABLE, RAW_TABLE, SAMPLES_TABLE
from retailsim_core.training.checkpoints import checkpoint as ckpt
from retailsim_core.training.checkpoints.checkpoint import load_model
from retailsim_core.training.run.train_config import TrainConfig

RESULTS_FILE = "results.json"
HOLDOUT_SHARE = 0.5  # of the training customers the held-out simulator learns from


@dataclass(frozen=True)
class PricingRunConfig:
    categories: int = 3  # top categories by training-week revenue
    contexts_per_week: int = 64  # test-week baskets per week in a panel
    seeds: int = 1  # PPO seeds (benchmarks/bench_pricing.py: 5)
    ppo_timesteps: int = 2_000  # environment steps per PPO seed
    holdout: bool = True  # judge every policy on the held-out simulator too
    grid: int = 5  # grid points of the static search per product (and the regular price)
    penalty: float = 0.0  # > 0: PPO also trained with the uncertainty penalty (ppo_penalised)
    max_products: int = 40  # a category's best sellers by training revenue that are priced
    seed: int = 0  # the context sample and the first PPO seed
    env: PricingConfig = field(default_factory=PricingConfig)


def priced_categories(
    warehouse: Warehouse, split: TemporalSplit, id_map: pl.DataFrame, vocab_frame: pl.DataFrame
) -> pl.DataFrame:
    """Priced products (``CATEGORY_PRICES_SCHEMA`` + token, category) of the training weeks'
    observed cells, with each category's revenue and size."""
    cells = (
        warehouse.scan(PRICES_TABLE, range(1, split.train_end + 1), schema=DERIVED_PRICES_SCHEMA)
        .filter(pl.col("imputation_method") == "observed")
        .select("product_id", "actual_price", "base_price", "units")
    )
    return (
        category_prices(cells)
        .collect()
        .join(vocab_frame, on="product_id")
        .join(
            id_map.select("product_id", pl.col("prod_code_10").alias("category")), on="product_id"
        )
        .with_columns(
            pl.col("revenue").sum().over("category").alias("category_revenue"),
            pl.len().over("category").alias("category_products"),
        )
        .sort("category", "product_id")
    )


def train_holdout(
    warehouse: Warehouse,
    split: TemporalSplit,
    model_cfg: WorldModelConfig,
    train_cfg: TrainConfig,
    folder: Path,
    log: Callable[[str], None] = lambda _: None,
) -> TrainingSummary:
    """The held-out simulator: the same model and schedule (``holdout_schedule``) trained with
    the next seed on a seeded half of the training customers (``HOLDOUT_SHARE``)."""
    return train_world_model(
        warehouse,
        split,
        model_cfg,
        holdout_schedule(train_cfg, HOLDOUT_SHARE),
        log=log,
        folder=folder,
        customer_share=HOLDOUT_SHARE,
    )


def holdout_schedule(cfg: TrainConfig, share: float) -> TrainConfig:
    """The main schedule for ``share`` of the customers, with the next seed: an epoch draws the
    same fraction of its (``share`` times fewer) samples and the wall-clock budget shrinks with
    it, so the held-out model sees its data as often as the training simulator sees its own.
    A fixed number of samples an epoch made it cost as much as the main one for half the
    data."""
    per_epoch = cfg.samples_per_epoch
    budget = cfg.max_seconds
    return dataclasses.replace(
        cfg,
        seed=cfg.seed + 1,
        samples_per_epoch=None if per_epoch is None else max(1, round(per_epoch * share)),
        max_seconds=None if budget is None else budget * share,
    )


def agent_file(family: str, category: str, seed: str) -> str:
    """The file name of a PPO agent: a category name is data (The Complete Journey's "SOFT
    DRINKS 12/18&15PK CAN CAR"), so it is reduced to a slug, never a path, and a short hash
    of it keeps two categories of one slug apart."""
    slug = re.sub(r"[^0-9A-Za-z]+", "-", category).strip("-")[:48]
    digest = hashlib.sha256(category.encode()).hexdigest()[:8]
    return f"{family}_{slug}-{digest}_{seed}.safetensors"


def _top_categories(products: pl.DataFrame, n: int) -> list[str]:
    """The ``n`` categories of most revenue among those with two products priced."""
    top = (
        products.filter(pl.col("category_products") >= 2)
        .group_by("category")
        .agg(pl.col("category_revenue").first())
        .sort("category_revenue", "category", descending=[True, False])
        .head(n)["category"]
        .to_list()
    )
    if not top:
        raise ValueError("no category has two products priced in the training weeks")
    return top


def _contexts(inputs, tensors: TensorConfig, weeks: list[int], cfg: PricingRunConfig):
    """(the test weeks with baskets, each week's sampled contexts, their batches): at most
    ``cfg.contexts_per_week`` test baskets a week, drawn with the week's seed."""
    samples = inputs.samples.filter(pl.col("split") == "test", ~pl.col("truncated"))
    weeks = sorted(set(weeks) & set(samples["week"].cast(pl.Int64).to_list()))  # with baskets
    batches, weekly = [], []
    for w in weeks:
        week = samples.filter(pl.col("week") == w).sort("basket_id")
        weekly.append(week.sample(min(cfg.contexts_per_week, len(week)), seed=cfg.seed + w))
        data = inputs.training_set(weekly[-1], tensors)
        batches.append(data[list(range(len(data)))])
    return weeks, weekly, batches


def run_pricing(
    warehouse: Warehouse,
    split: TemporalSplit,
    checkpoint: Path,
    holdout: Path | None,
    folder: Path,
    cfg: PricingRunConfig = PricingRunConfig(),
    log: Callable[[str], None] = lambda _: None,
    truth_dir: Path | None = None,
) -> dict:
    """Every policy on the top categories; writes ``folder`` and returns results.json. With the
    generator's ``truth_dir`` (synthetic data) every path is judged by the planted demand too."""
    start = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("ppo_*.safetensors"):  # a re-run writes exactly its own agents
        stale.unlink()
    binding = bind_truth(truth_dir, warehouse)  # only the truth of the ingested files
    truth = read_truth(binding)  # read once here and passed down
    model, vocab, config = load_model(checkpoint)
    second, checkpoints = None, {"trained": config["checkpoint_id"]}
    if cfg.holdout and holdout is not None and (holdout / "model.safetensors").exists():
        second, second_vocab, second_config = load_model(holdout)
        checkpoints["holdout"] = second_config["checkpoint_id"]
        if second_vocab != vocab:
            raise ValueError(f"{holdout} has another vocabulary than {checkpoint}: retrain it")
    weeks = [w for w in warehouse.weeks(SAMPLES_TABLE) if w > split.valid_end]
    inputs = load_model_inputs(warehouse, weeks, MappedArrays())  # sets on disk (D97)
    products = priced_categories(warehouse, split, inputs.id_map, vocab.frame())
    top = _top_categories(products, cfg.categories)
    weeks, weekly, batches = _contexts(inputs, TensorConfig(**config["tensors"]), weeks, cfg)
    log(f"contexts: {sum(len(b['basket_labels']) for b in batches):,} over weeks {weeks}")
    quantity = _quantity_fit(warehouse, split)
    log("units per line: " + ("the demand forecast's stock-up model" if quantity else "one"))
    results, paths = {}, []
    for category in top:
        rows = (  # its best sellers; the rest of the category keeps its historical shelf
            products.filter(pl.col("category") == category)
            .sort("revenue", "product_id", descending=[True, False])
            .head(cfg.max_products)
            .sort("product_id")
        )
        planted = PlantedDemand(truth, weekly, rows["product_id"]) if truth else None
        per_line = None if quantity is None else _units_per_line(rows, *quantity)
        results[category], found = _price_category(
            model, second, weeks, batches, rows, cfg, planted, per_line
        )
        for name, agent in found.pop("agents").items():  # e.g. ppo_seed0
            family, seed = name.rsplit("_", 1)
            ckpt.save_tensors(
                folder / agent_file(family, category, seed), agent.policy.state_dict()
            )
        for name, (path, _) in found.items():
            paths.append(_path_frame(category, name, weeks, rows["product_id"], path))
        log(f"category {category}: {time.perf_counter() - start:.0f}s")
    summary = {
        "objective": cfg.env.objective,
        "config": asdict(cfg),
        "weeks": weeks,
        "held_out_simulator": second is not None,
        "checkpoints": checkpoints,  # the verified ids of the simulators' models (D113)
        "planted_truth": truth is not None,
        "units_per_line": None
        if quantity is None
        else {
            "elasticity": quantity[1],
            "mean_quantity": quantity[2],
        },  # fmt: skip
        "planted_note": binding.note,
        "held_out_note": (
            "holdout_checkpoint: another seed on half of the training customers"
            if second is not None
            else "off (pricing_holdout = false or no holdout_checkpoint): training simulator only"
        ),
        "categories": results,
        "seconds": round(time.perf_counter() - start, 1),
    }
    atomic_write_parquet(pl.concat(paths), folder / "price_paths.parquet")
    ckpt.write_json(folder / RESULTS_FILE, summary)
    atomic_write_text(pricing_markdown(summary), folder / "report.md")
    first = pl.concat(paths).filter(pl.col("category") == top[0])
    atomic_write_text(_paths_svg(first), folder / "price_paths.svg")
    return summary


def _quantity_fit(warehouse: Warehouse, split: TemporalSplit):
    """(each product's mean units per line before the test weeks, the quantity model's
    elasticity on the log price index, every line's mean units) from ``demand_forecast`` (D117,
    D133); None where it has not run or fitted no price effect."""
    scores = warehouse.table_dir(DEMAND_TABLE) / "scores.json"
    if not scores.exists():
        return None
    fit = ckpt.read_json(scores)["quantity"]
    elasticity = fit["coefficients"].get("log_price_index")
    if elasticity is None:
        return None
    raw = warehouse.scan(RAW_TABLE).select("product_id", "week", "quantity")
    lines = line_quantities(raw, first_forecast_week=split.valid_end + 1).collect()
    return lines, float(elasticity), float(fit["mean_quantity"])


def _units_per_line(rows: pl.DataFrame, lines, elasticity, overall) -> UnitsPerLine:
    mean = rows.select("product_id").join(lines, on="product_id", how="left", maintain_order="left")
    return UnitsPerLine(mean["mean_quantity"].fill_null(overall).to_numpy(), elasticity)


def _price_category(model, second, weeks, batches, rows, cfg: PricingRunConfig, planted, per_line):
    """Every policy of one category, found on the training simulator and judged on both."""
    env, tokens = cfg.env, rows["token"].to_numpy()
    train, held = (
        None
        if m is None
        else build_panel(
            m, weeks, batches, tokens, rows, env.floor_markup, env.cost_share, per_line
        )  # fmt: skip
        for m in (model, second)
    )
    found = {
        # Regular prices every week: how much of a lift is only dropping the promotions.
        "regular": (np.zeros((len(weeks), train.n)), 0),
        "static": (static_path(train, env, cfg.grid), 0),
        "myopic": (myopic_path(train, env), 0),
    }
    families = {"ppo": (env, None)}
    if cfg.penalty and held is not None:  # reads the held-out simulator while it learns
        families["ppo_penalised"] = (dataclasses.replace(env, penalty=cfg.penalty), held)
    agents = {}
    for family, (family_env, second_panel) in families.items():
        for s in range(cfg.seeds):
            agent = train_ppo(train, family_env, cfg.seed + s, cfg.ppo_timesteps, second_panel)
            agents[f"{family}_seed{s}"] = agent
            found[f"{family}_seed{s}"] = ppo_path(agent, train, env)
    judges = {"training": train, "held_out": held}
    out = {
        "products": rows["product_id"].to_list(),
        "historical_revenue_cv": variation(historical_values(train, env)[1]),
        "policies": {},
    }
    for name, (path, attempted) in found.items():
        entry = {k: evaluate(p, path, env) for k, p in judges.items() if p is not None}
        if planted is not None:
            entry["planted"] = {"lift": planted.lift(weeks, path, train.regular_price, env)}
        out["policies"][name] = {**entry, "attempted_violations": attempted}
    for family in families:  # the seeds' mean and interval, per judge
        seeds = [v for k, v in out["policies"].items() if k.startswith(f"{family}_seed")]
        out["policies"][family] = {
            side: _over_seeds([e[side]["lift"] for e in seeds])
            for side in seeds[0]
            if side in ("training", "held_out", "planted")
        }
    return out, {**found, "agents": agents}


def _over_seeds(lifts: list[float]) -> dict:
    """Mean lift over PPO seeds with a 95% t-interval (none for one seed)."""
    from scipy import stats

    x = np.asarray(lifts)
    if len(x) < 2:
        return {"lift": float(x.mean()), "interval": None, "seeds": len(x)}
    half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return {
        "lift": float(x.mean()),
        "interval": [x.mean() - half, x.mean() + half],
        "seeds": len(x),
    }


def _path_frame(category, policy, weeks, product_ids, path) -> pl.DataFrame:
    w, n = path.shape
    return pl.DataFrame(
        {
            "category": [category] * (w * n),
            "policy": [policy] * (w * n),
            "week": np.repeat(weeks, n).astype(np.int32),
            "product_id": list(product_ids) * w,
            "multiplier": np.exp(path).ravel(),
        }
    )


def _paths_svg(frame: pl.DataFrame) -> str:
    """Each policy's units-unweighted mean price multiplier by week, for one category."""
    mean = frame.group_by("policy", "week").agg(pl.col("multiplier").mean()).sort("week")
    series = {
        p: mean.filter(pl.col("policy") == p)["multiplier"].to_list()
        for p in sorted(mean["policy"].unique())
    }
    return lines(series, title="mean price / regular price by test week")

"""A planted synthetic world, and its round trip through the ``ground_truth/`` Parquet folder.

Everything the simulator and the oracle need is written to ``ground_truth/``; loading it
back rebuilds the identical world, so the oracle can be run on a dataset long after it
was generated. The folder's file names are here and nowhere else; a reader outside
``synth/`` gets a :class:`PlantedTruth`, read once at the edge (``pipeline/readers/truth.py``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.calendar import N_WEEKS
from retailsim_core.ingest.lgsr import STORE_FORMAT_CODES, STORE_REGION_CODES
from retailsim_core.storage.io import atomic_write_parquet, atomic_write_text
from retailsim_core.synth.catalogue import FORMAT_PRICE_MULTIPLIER, Catalogue, build_catalogue
from retailsim_core.synth.config import DIVISIONS, BehaviourParams, SynthConfig
from retailsim_core.synth.price_plan import N_REGIONS, PricePlan, build_price_plan
from retailsim_core.synth.shoppers import SEGMENT_CODES, Population, build_population

GENERATOR_VERSION = "2"  # 2: the promotion plan and the responses to it
CONFIG_FILE = "config.json"  # the generator's configuration: a folder without it has no world
PROMOTIONS_FILE = "promotions.parquet"  # the planted promotion calendar
SUBSTITUTES_FILE = "substitute_pairs.parquet"
FINGERPRINT_FILE = "raw_fingerprint.json"  # sha256 of every week file written with the truth
BASKETS_FOLDER = "baskets"  # one file of planted basket contexts per week
CONTEXT_COLUMNS = (
    "basket_id",
    "week",
    "customer_idx",
    "store_idx",
    "mission_focus",
    "price_mode",
    "basket_size",
)


def basket_file(folder: Path, week: int) -> Path:
    """The planted baskets of ``week`` in the truth ``folder``."""
    return Path(folder) / BASKETS_FOLDER / f"week_{week:03d}.parquet"


@dataclass(frozen=True)
class World:
    cfg: SynthConfig
    catalogue: Catalogue
    prices: PricePlan
    population: Population


def build_world(cfg: SynthConfig) -> World:
    if cfg.n_stores < len(STORE_REGION_CODES):
        raise ValueError(f"n_stores must be >= {len(STORE_REGION_CODES)} (one per region)")
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0]))
    cat = build_catalogue(cfg, rng)
    prices = build_price_plan(cfg, rng, cat)
    pop = build_population(cfg, rng, cat)
    return World(cfg=cfg, catalogue=cat, prices=prices, population=pop)


# --- ground truth -------------------------------------------------------------------------


def _frame(obj, names: list[str]) -> pl.DataFrame:
    return pl.DataFrame({n: getattr(obj, n) for n in names})


_CAT_PRODUCT_COLS = [
    "product_code",
    "cl",
    "division",
    "base_price",
    "popularity",
    "elasticity",
    "launch_week",
    "rel_price",
    "slot",
    "slot_share",
    "complement",
    "complement_prob",
]
_CAT_CL_COLS = [
    "cl_codes",
    "cl_dep_codes",
    "cl_group_codes",
    "cl_division_codes",
    "cl_season_amp",
    "cl_season_phase",
]
_POP_COLS = [
    "code",
    "carded",
    "price_segment",
    "lifestage",
    "home_store",
    "secondary_store",
    "switch_prob",
    "repeat_share",
    "visit_rate",
    "first_week",
    "last_week",
]


def save_ground_truth(world: World, folder: Path) -> None:
    """The world's configuration and tables, one file each, into the truth ``folder``."""
    folder = Path(folder)
    atomic_write_text(
        json.dumps(
            {"generator_version": GENERATOR_VERSION, **dataclasses.asdict(world.cfg)}, indent=2
        ),
        folder / CONFIG_FILE,
    )
    tables = _catalogue_tables(world) | _price_tables(world) | _population_tables(world)
    for name, frame in tables.items():
        atomic_write_parquet(frame, folder / name)


def _catalogue_tables(world: World) -> dict[str, pl.DataFrame]:
    """Products (with their price plan's rise), sub-commodities, slots, stores, and the planted
    substitute and complement pairs."""
    cat, prices = world.catalogue, world.prices
    products = _frame(cat, _CAT_PRODUCT_COLS).with_columns(
        product_id=pl.col("product_code"),
        prod_code_10=pl.Series(cat.cl_codes[cat.cl]),
        division_name=pl.Series(np.asarray(DIVISIONS)[cat.division]),
        complement_product_id=pl.when(pl.col("complement") >= 0).then(
            pl.Series(cat.product_code[np.maximum(cat.complement, 0)])
        ),
        rise_week=pl.Series(prices.rise_week),
        rise_factor=pl.Series(prices.rise_factor),
        is_novel=pl.Series(cat.launch_week > 80),
    )
    slots = pl.DataFrame(
        {
            "member_0": cat.slot_members[:, 0],
            "member_1": cat.slot_members[:, 1],
            "explore_pop": cat.slot_explore_pop,
            "repertoire_pop": cat.slot_repertoire_pop,
        }
    )
    stores = pl.DataFrame(
        {
            "store_id": cat.store_code,
            "store_region": np.asarray(STORE_REGION_CODES)[cat.store_region],
            "store_format": np.asarray(STORE_FORMAT_CODES)[cat.store_format],
            "region_idx": cat.store_region,
            "format_idx": cat.store_format,
            "open_week": cat.store_open_week,
            "format_price_multiplier": np.asarray(FORMAT_PRICE_MULTIPLIER)[cat.store_format],
        }
    )
    subs = cat.slot_members[cat.slot_members[:, 1] >= 0]
    a = np.flatnonzero(cat.complement > np.arange(cat.n_products))
    return {
        "products.parquet": products,
        "sub_commodities.parquet": _frame(cat, _CAT_CL_COLS),
        "slots.parquet": slots,
        "stores.parquet": stores,
        SUBSTITUTES_FILE: pl.DataFrame(
            {"product_a": cat.product_code[subs[:, 0]], "product_b": cat.product_code[subs[:, 1]]}
        ),
        "complement_pairs.parquet": pl.DataFrame(
            {
                "product_a": cat.product_code[a],
                "product_b": cat.product_code[cat.complement[a]],
                "add_prob": cat.complement_prob[a],
            }
        ),
    }


def _price_tables(world: World) -> dict[str, pl.DataFrame]:
    """Regional price multipliers and the promotion calendar (product x region x week)."""
    cat, prices = world.catalogue, world.prices
    p_idx, r_idx = np.meshgrid(np.arange(cat.n_products), np.arange(N_REGIONS), indexing="ij")
    w, p, r = np.nonzero(prices.depth)
    return {
        "region_prices.parquet": pl.DataFrame(
            {
                "product_idx": p_idx.ravel(),
                "region_idx": r_idx.ravel(),
                "region_multiplier": prices.region_mult.ravel(),
            }
        ),
        PROMOTIONS_FILE: pl.DataFrame(
            {
                "week": w,
                "product_idx": p,
                "product_id": cat.product_code[p],
                "region_idx": r,
                "store_region": np.asarray(STORE_REGION_CODES)[r],
                "depth": prices.depth[w, p, r],
            }
        ),
    }


def _population_tables(world: World) -> dict[str, pl.DataFrame]:
    """Shoppers (segments, home stores, mission mixes) and their repertoires."""
    cat, pop = world.catalogue, world.population
    customers = _frame(pop, _POP_COLS).with_columns(
        customer_idx=pl.int_range(pl.len()),
        price_segment_code=pl.Series(np.asarray(SEGMENT_CODES)[pop.price_segment]),
        home_store_id=pl.Series(cat.store_code[pop.home_store]),
        **{f"type_mix_{i}": pl.Series(pop.type_mix[:, i]) for i in range(pop.type_mix.shape[1])},
        **{f"focus_mix_{i}": pl.Series(pop.focus_mix[:, i]) for i in range(pop.focus_mix.shape[1])},
    )
    c, k = np.nonzero(pop.fav_slots >= 0)
    return {
        "customers.parquet": customers,
        "repertoires.parquet": pl.DataFrame(
            {
                "customer_idx": c,
                "rank": k,
                "slot": pop.fav_slots[c, k],
                "preference": pop.fav_pref[c, k],
            }
        ),
    }


def _tuples(value):
    """JSON lists back to the tuples the frozen config holds (nested for matrices)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _config_from_json(d: dict) -> SynthConfig:
    d = {k: _tuples(v) for k, v in d.items() if k != "generator_version"}
    return SynthConfig(
        **d | {"behaviour": BehaviourParams(**{k: _tuples(v) for k, v in d["behaviour"].items()})}
    )


def load_world(folder: Path) -> World:
    folder = Path(folder)
    cfg = _config_from_json(json.loads((folder / CONFIG_FILE).read_text()))
    prod = pl.read_parquet(folder / "products.parquet")
    cls = pl.read_parquet(folder / "sub_commodities.parquet")
    slots = pl.read_parquet(folder / "slots.parquet")
    stores = pl.read_parquet(folder / "stores.parquet")
    cat = Catalogue(
        **{c: prod[c].to_numpy() for c in _CAT_PRODUCT_COLS},
        **{c: cls[c].to_numpy() for c in _CAT_CL_COLS},
        slot_members=np.stack([slots["member_0"].to_numpy(), slots["member_1"].to_numpy()], axis=1),
        slot_explore_pop=slots["explore_pop"].to_numpy(),
        slot_repertoire_pop=slots["repertoire_pop"].to_numpy(),
        store_code=stores["store_id"].to_numpy(),
        store_region=stores["region_idx"].to_numpy(),
        store_format=stores["format_idx"].to_numpy(),
        store_open_week=stores["open_week"].to_numpy(),
    )
    n_p = cat.n_products
    region_mult = pl.read_parquet(folder / "region_prices.parquet").sort(
        "product_idx", "region_idx"
    )
    depth = np.zeros((N_WEEKS + 1, n_p, N_REGIONS), dtype=np.float32)
    promo = pl.read_parquet(folder / PROMOTIONS_FILE)
    depth[
        promo["week"].to_numpy(), promo["product_idx"].to_numpy(), promo["region_idx"].to_numpy()
    ] = promo["depth"].to_numpy()
    prices = PricePlan(
        region_mult=region_mult["region_multiplier"].to_numpy().reshape(n_p, N_REGIONS),
        rise_week=prod["rise_week"].to_numpy(),
        rise_factor=prod["rise_factor"].to_numpy(),
        depth=depth,
    )
    cust = pl.read_parquet(folder / "customers.parquet").sort("customer_idx")
    rep = pl.read_parquet(folder / "repertoires.parquet")
    n_c, width = cust.height, cfg.favourites_range[1]
    fav_slots = np.full((n_c, width), -1, dtype=np.int64)
    fav_pref = np.zeros((n_c, width))
    ci, k = rep["customer_idx"].to_numpy(), rep["rank"].to_numpy()
    fav_slots[ci, k], fav_pref[ci, k] = rep["slot"].to_numpy(), rep["preference"].to_numpy()

    def mix(prefix):
        return np.stack([cust[c].to_numpy() for c in cust.columns if c.startswith(prefix)], axis=1)

    pop = Population(
        **{c: cust[c].to_numpy() for c in _POP_COLS},
        type_mix=mix("type_mix_"),
        focus_mix=mix("focus_mix_"),
        fav_slots=fav_slots,
        fav_pref=fav_pref,
    )
    return World(cfg=cfg, catalogue=cat, prices=prices, population=pop)


@dataclass(frozen=True)
class PlantedTruth:
    """What the generator planted, read once: the world (None in a folder without
    :data:`CONFIG_FILE`), the planted context of every basket, the promotion calendar (None
    where the folder has none). Passed down to the oracles and the planted-truth checks."""

    world: World | None
    baskets: pl.DataFrame | None  # CONTEXT_COLUMNS of every planted basket (None: no file)
    promotions: pl.DataFrame | None

    @classmethod
    def read(cls, folder: Path) -> PlantedTruth:
        folder = Path(folder)
        files = sorted((folder / BASKETS_FOLDER).glob("week_*.parquet"))
        promotions = folder / PROMOTIONS_FILE
        return cls(
            world=load_world(folder) if (folder / CONFIG_FILE).exists() else None,
            baskets=pl.concat([pl.read_parquet(f, columns=list(CONTEXT_COLUMNS)) for f in files])
            if files
            else None,
            promotions=pl.read_parquet(promotions) if promotions.exists() else None,
        )

    def context(self, samples: pl.DataFrame) -> pl.DataFrame:
        """The planted context (CONTEXT_COLUMNS) of each of ``samples``' baskets, in order."""
        if self.baskets is None:
            raise ValueError("ground truth has no planted baskets")
        weeks = samples["week"].unique().to_list()
        ctx = samples.select("basket_id").join(
            self.baskets.filter(pl.col("week").is_in(weeks)),
            on="basket_id",
            how="left",
            maintain_order="left",
        )
        if ctx["customer_idx"].null_count():
            raise ValueError(
                "ground truth lacks some evaluated baskets: is it the truth of these raw files?"
            )
        return ctx

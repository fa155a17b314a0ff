"""Write a synthetic world as LGSR weekly CSV files plus its ``ground_truth/`` folder.

Weeks are simulated and written one at a time, so memory stays bounded for any preset.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from retailsim_core.calendar import N_WEEKS, plan_file_stem, shop_week_of, week_file_stem
from retailsim_core.ingest.lgsr import (
    FULL_HEADER,
    LIFESTAGE_TO_SEG_2,
    MISSION_FOCI,
    MISSION_TYPES,
    PRICE_SENSITIVITY_TO_SEG_1,
    SAMPLE_HEADER,
    STORE_FORMAT_CODES,
    STORE_REGION_CODES,
)
from retailsim_core.storage.io import (
    atomic_write_bytes,
    atomic_write_parquet,
    atomic_write_text,
    gzip_bytes,
    sha256_of,
)
from retailsim_core.synth.baskets import WeekBaskets, simulate_week
from retailsim_core.synth.config import BASKET_SIZES, PRICE_MODES, SynthConfig
from retailsim_core.synth.plan_response import plan_frame
from retailsim_core.synth.shoppers import SEGMENT_CODES
from retailsim_core.synth.world import (
    FINGERPRINT_FILE,
    World,
    basket_file,
    build_world,
    save_ground_truth,
)

BASKET_ID_BASE = 994_100_000_000_000  # 15-digit ids, as in LGSR


@dataclass(frozen=True)
class GenerationReport:
    rows: int
    baskets: int
    files: int
    seconds: float


def _labels(rng, codes: tuple[str, ...], idx: np.ndarray, xx_prob: float) -> np.ndarray:
    return np.where(rng.random(len(idx)) < xx_prob, "XX", np.asarray(codes)[idx])


def week_frame(world: World, week: int, wb: WeekBaskets) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(LGSR rows in file order with full-header names, ground-truth baskets)."""
    cat, pop, beh = world.catalogue, world.population, world.cfg.behaviour
    rng = np.random.default_rng(np.random.SeedSequence([world.cfg.seed, 2, week]))
    n_b = len(wb.b_customer)
    basket_id = BASKET_ID_BASE + week * 1_000_000 + np.arange(n_b)
    cust = wb.b_customer
    carded = pop.carded[cust]
    baskets = pl.DataFrame(
        {
            "BASKET_ID": basket_id.astype(str),
            "SHOP_DATE": np.datetime_as_string(wb.b_date).astype("U10"),
            "SHOP_HOUR": wb.b_hour.astype(str),
            "CUST_CODE": pop.code[cust],
            "CUST_PRICE_SENSITIVITY": np.where(
                carded, np.asarray(SEGMENT_CODES)[pop.price_segment[cust]], ""
            ),
            "CUST_LIFESTAGE": np.where(carded, pop.lifestage[cust], ""),
            "BASKET_SIZE": np.asarray(BASKET_SIZES)[wb.b_size],  # LGSR never writes XX here
            "BASKET_PRICE_SENSITIVITY": _labels(rng, PRICE_MODES, wb.b_mode, beh.xx_label_prob),
            "BASKET_TYPE": _labels(rng, MISSION_TYPES, wb.b_type, beh.xx_label_prob),
            "BASKET_DOMINANT_MISSION": _labels(rng, MISSION_FOCI, wb.b_focus, beh.xx_label_prob),
            "STORE_CODE": cat.store_code[wb.b_store],
            "STORE_FORMAT": np.asarray(STORE_FORMAT_CODES)[cat.store_format[wb.b_store]],
            "STORE_REGION": np.asarray(STORE_REGION_CODES)[cat.store_region[wb.b_store]],
        }
    )
    b, p = wb.l_basket, wb.l_product
    lines = (
        baskets[b]
        .with_columns(
            SHOP_WEEK=pl.lit(str(shop_week_of(week))),
            QUANTITY=pl.Series(wb.l_quantity.astype(str)),
            SPEND=pl.Series(np.char.mod("%.2f", wb.l_spend)),
            PROD_CODE=pl.Series(cat.product_code[p]),
            PROD_CODE_10=pl.Series(cat.cl_codes[cat.cl[p]]),
            PROD_CODE_20=pl.Series(cat.cl_dep_codes[cat.cl[p]]),
            PROD_CODE_30=pl.Series(cat.cl_group_codes[cat.cl[p]]),
            PROD_CODE_40=pl.Series(cat.cl_division_codes[cat.cl[p]]),
        )
        .with_columns(
            SHOP_WEEKDAY=(pl.col("SHOP_DATE").str.to_date().dt.weekday() % 7 + 1).cast(pl.String),
            SHOP_DATE=pl.col("SHOP_DATE").str.replace_all("-", ""),
        )
        .select(FULL_HEADER)
    )
    truth = pl.DataFrame(
        {
            "basket_id": basket_id,
            "week": np.full(n_b, week, dtype=np.int16),
            "customer_idx": cust,
            "customer_id": pop.code[cust],
            "store_idx": wb.b_store,
            "store_id": cat.store_code[wb.b_store],
            "mission_type": np.asarray(MISSION_TYPES)[wb.b_type],
            "mission_focus": np.asarray(MISSION_FOCI)[wb.b_focus],
            "price_mode": np.asarray(PRICE_MODES)[wb.b_mode],
            "basket_size": np.asarray(BASKET_SIZES)[wb.b_size],
            "n_items": np.bincount(b, minlength=n_b),
        }
    )
    return lines, truth


def to_sample_header(lines: pl.DataFrame) -> pl.DataFrame:
    """The public sample's variant: seg_1/seg_2 codes; lifestage XX has no seg_2 code (empty)."""
    return lines.with_columns(
        pl.col("CUST_PRICE_SENSITIVITY").replace_strict(PRICE_SENSITIVITY_TO_SEG_1, default=""),
        pl.col("CUST_LIFESTAGE").replace_strict(LIFESTAGE_TO_SEG_2, default=""),
    ).rename(dict(zip(FULL_HEADER, SAMPLE_HEADER, strict=True)))


def write_week_csv(lines: pl.DataFrame, path: Path, *, compress: bool) -> Path:
    """LGSR leaves unknown values as empty, unquoted fields (``,,``)."""
    buf = io.BytesIO()
    lines.with_columns(
        pl.when(pl.col(pl.String) != "").then(pl.col(pl.String)).name.keep()
    ).write_csv(buf, null_value="")
    data = buf.getvalue()
    return atomic_write_bytes(gzip_bytes(data) if compress else data, path)


# Week -> sha256 of each file written: binds the truth folder to these raw files (the oracles
# and planted-truth checks run only on a warehouse ingested from them).


def generate(
    cfg: SynthConfig,
    raw_dir: Path,
    truth_dir: Path,
    *,
    header: str = "full",
    compress: bool = False,
    missing_weeks: Iterable[int] = (),
    weeks: Iterable[int] | None = None,
    progress=None,
) -> GenerationReport:
    """Generate ``cfg``'s world into ``raw_dir`` (LGSR files) and ``truth_dir`` (what was
    planted).
    """
    if header not in ("full", "sample"):
        raise ValueError("header must be 'full' or 'sample'")
    start = time.perf_counter()
    raw_dir, truth_dir = Path(raw_dir), Path(truth_dir)
    world = build_world(cfg)
    save_ground_truth(world, truth_dir)
    missing = set(missing_weeks)
    rows = baskets = files = 0
    written: dict[int, str] = {}
    for week in weeks or range(1, N_WEEKS + 1):
        lines, truth = week_frame(world, week, simulate_week(world, week))
        atomic_write_parquet(truth, basket_file(truth_dir, week))
        # The plan is known before the week: written even where the week's sales are missing.
        write_week_csv(
            plan_frame(world, week), raw_dir / f"{plan_file_stem(week)}.csv", compress=False
        )
        rows, baskets = rows + lines.height, baskets + truth.height
        if week in missing:
            continue
        out = to_sample_header(lines) if header == "sample" else lines
        path = write_week_csv(
            out,
            raw_dir / f"{week_file_stem(week)}.csv{'.gz' if compress else ''}",
            compress=compress,
        )
        written[week] = sha256_of(path)
        files += 1
        if progress:
            progress(week, lines.height)
    atomic_write_text("".join(f"{w}\n" for w in sorted(missing)), truth_dir / "missing_weeks.txt")
    body = {"weeks": {str(w): sha for w, sha in sorted(written.items())}}
    atomic_write_text(json.dumps(body, indent=1), truth_dir / FINGERPRINT_FILE)
    return GenerationReport(
        rows=rows, baskets=baskets, files=files, seconds=time.perf_counter() - start
    )

"""Read and validate one LGSR week file into the raw table and a quarantine table.

Every row read ends up in exactly one of the two (``rows_read == rows_kept + rows_rejected``);
a quarantined row keeps its original text and every reason it failed. Problems with the
file as a whole (unreadable, wrong header, another week's rows) raise ``LGSRFileError``
naming the file.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from retailsim_core.calendar import monday_of, shop_week_of, week_file_stem
from retailsim_core.io import sha256_of
from retailsim_core.lgsr import (
    BASKET_LEVEL_COLUMNS,
    CODE_SETS,
    FULL_HEADER,
    HEADERS,
    ID_PATTERNS,
    NULLABLE_COLUMNS,
    QUARANTINE_SCHEMA,
    RAW_COLUMN_NAMES,
    RAW_TRANSACTIONS_SCHEMA,
    SAMPLE_HEADER,
    SEG_1_TO_PRICE_SENSITIVITY,
    SEG_2_TO_LIFESTAGE,
)
from retailsim_core.raw_files import WEEK_FILE

BASKET_INCONSISTENT = "basket_inconsistent"


class LGSRFileError(ValueError):
    """A week file that cannot be ingested as a whole."""


@dataclass(frozen=True)
class IngestResult:
    week: int
    source_file: str | None  # None when the week's file is missing
    kept: pl.DataFrame  # RAW_TRANSACTIONS_SCHEMA
    quarantine: pl.DataFrame  # QUARANTINE_SCHEMA
    header_variant: str | None
    source_sha256: str | None = None

    @property
    def rows_read(self) -> int:
        return self.kept.height + self.quarantine.height

    @property
    def missing(self) -> bool:
        return self.source_file is None


def find_week_file(raw_dir: Path, week: int) -> Path | None:
    """The week's file in ``raw_dir``, ``transactions_YYYYWW.csv`` or ``.csv.gz`` in any letter
    case (exports from case-insensitive file systems); None if there is none.

    A link is followed only when its target lies inside ``raw_dir``: a link that leaves the raw
    folder is refused, so a misplaced link never feeds another file into the warehouse."""
    stem = week_file_stem(week)
    wanted = {f"{stem}.csv", f"{stem}.csv.gz"}
    found = sorted(p for p in raw_dir.iterdir() if p.name.lower() in wanted)
    if len(found) > 1:
        raise LGSRFileError(f"{found[0]} and {found[1]} are both week {week}'s file; keep one")
    if not found:
        return None
    path, root = found[0], raw_dir.resolve()
    if path.is_symlink() and root not in path.resolve().parents:
        raise LGSRFileError(
            f"{path} is a link to a file outside the raw folder {root}; links are "
            "followed only inside it (copy the file in, or point RETAILSIM_RAW_DIR "
            "at the folder that holds it)"
        )
    return path


class RawFolderError(LGSRFileError):
    """The raw folder as a whole is unusable (absent, not a folder, no week file)."""


def check_raw_folder(raw_dir: Path) -> None:
    """Fail before any work when the raw folder cannot be the source of a run."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        problem = "is not a folder" if raw_dir.exists() else "does not exist"
        raise RawFolderError(
            f"raw folder {raw_dir} (RETAILSIM_RAW_DIR or the raw_source "
            f"resource's raw_dir) {problem}"
        )
    if not any(WEEK_FILE.match(p.name) for p in raw_dir.iterdir()):
        raise RawFolderError(
            f"raw folder {raw_dir} (RETAILSIM_RAW_DIR or the raw_source "
            "resource's raw_dir) holds no LGSR week file "
            "transactions_YYYYWW.csv[.gz]"
        )


def expected_file_name(week: int) -> str:
    return f"{week_file_stem(week)}.csv[.gz]"


def _read_header(path: Path) -> list[str]:
    """The header line as written (a UTF-8 BOM removed), without reading the rest."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:  # decode the header line alone, not a buffer beyond it
            return next(csv.reader([fh.readline().decode("utf-8-sig")]), [])
    except (OSError, UnicodeDecodeError, EOFError, zlib.error, csv.Error) as err:
        raise LGSRFileError(f"{path}: cannot be read as CSV ({type(err).__name__}: {err})") from err


def _read_csv_text(path: Path) -> pl.DataFrame:
    """Every cell as text. Strict UTF-8 first (polars memory-maps the file); a file with invalid
    bytes is re-read with them replaced by U+FFFD, which no rule accepts, so those rows end in
    quarantine (every column has a pattern, code set or type check) instead of failing the file.

    ``record_number`` counts CSV records with the header as record 1, so it equals the line
    number until a quoted field spans lines; after that it is the record's ordinal, not a line."""

    def read(encoding):
        return pl.read_csv(
            path,
            infer_schema=False,
            encoding=encoding,
            row_index_name="record_number",
            row_index_offset=2,
        )

    try:
        try:
            return read("utf8")
        except pl.exceptions.ComputeError as err:
            if "utf-8" not in str(err).lower():
                raise
            return read("utf8-lossy")
    except Exception as err:  # polars raises several types for malformed CSV
        raise LGSRFileError(f"{path}: cannot be read as CSV ({type(err).__name__}: {err})") from err


def detect_header(path: Path, columns: list[str]) -> str:
    for variant, header in HEADERS.items():
        if set(columns) == set(header) and len(columns) == len(header):
            return variant
    closest = SAMPLE_HEADER if {"seg_1", "seg_2"} & set(columns) else FULL_HEADER
    if len(set(columns) & set(closest)) * 2 < len(closest):
        # Not an LGSR file at all: say so without echoing a line of someone else's file.
        raise LGSRFileError(
            f"{path}: malformed LGSR header: its first line has "
            f"{len(set(columns) & set(closest))} of the {len(closest)} LGSR "
            "columns (not an LGSR file, or a delimiter other than a comma); its "
            "content is not shown"
        )
    missing = [c for c in closest if c not in columns]
    extra = [c for c in columns if c not in closest]
    dup = sorted({c for c in columns if columns.count(c) > 1})
    raise LGSRFileError(
        f"{path}: malformed LGSR header; missing columns {missing}, extra columns {extra}"
        + (f", duplicated {dup}" if dup else "")
    )


def read_week_text(path: Path) -> tuple[pl.DataFrame, str, str]:
    """(all cells as text, header variant, sha256 of the file as stored). Text loses nothing to
    type inference; columns take the full-header names."""
    if path.stat().st_size == 0:
        raise LGSRFileError(f"{path}: is empty (0 bytes); expected an LGSR header and rows")
    written = _read_header(path)
    columns = [c.strip() for c in written]
    variant = detect_header(path, columns)
    df = _read_csv_text(path)
    if df.height == 0:
        raise LGSRFileError(f"{path}: has a header but no rows")
    df = df.rename(dict(zip(written, columns)))
    if variant == "sample":
        df = df.rename({"seg_1": "CUST_PRICE_SENSITIVITY", "seg_2": "CUST_LIFESTAGE"}).with_columns(
            _recode("CUST_PRICE_SENSITIVITY", SEG_1_TO_PRICE_SENSITIVITY),
            _recode("CUST_LIFESTAGE", SEG_2_TO_LIFESTAGE),
        )
    # Cells are kept verbatim: an empty field may read as null (``,,``) or "" (``""``), and the
    # rules treat both as empty. Padded codes are not silently trimmed; they fail validation.
    return df, variant, sha256_of(path)


def _recode(col: str, mapping: dict[str, str]) -> pl.Expr:
    # Unknown sample codes stay visible (prefixed) so validation quarantines them.
    c = pl.col(col)
    return (
        pl.when(_empty(col))
        .then(c)
        .otherwise(c.replace_strict(mapping, default="?" + c))
        .alias(col)
    )


def _empty(col: str) -> pl.Expr:
    return pl.col(col).is_null() | (pl.col(col) == "")


def _typed() -> list[pl.Expr]:
    def t(c, dtype):
        return pl.col(c).cast(dtype, strict=False)

    return [
        t("SHOP_WEEK", pl.Int32).alias("_shop_week"),
        pl.col("SHOP_DATE").str.to_date("%Y%m%d", strict=False).alias("_date"),
        t("SHOP_WEEKDAY", pl.Int8).alias("_weekday"),
        t("SHOP_HOUR", pl.Int8).alias("_hour"),
        t("QUANTITY", pl.Int32).alias("_quantity"),
        t("SPEND", pl.Float64).alias("_spend"),
        t("BASKET_ID", pl.Int64).alias("_basket"),
    ]


def _rules(week: int) -> list[tuple[pl.Expr, str]]:
    """(failure condition, reason) per validation rule; a null condition counts as a failure."""
    monday = monday_of(week)
    rules: list[tuple[pl.Expr, str]] = [
        (pl.col("_shop_week").is_null(), "unparseable:SHOP_WEEK"),
        (pl.col("_date").is_null(), "unparseable:SHOP_DATE"),
        (pl.col("_weekday").is_null(), "unparseable:SHOP_WEEKDAY"),
        (pl.col("_hour").is_null(), "unparseable:SHOP_HOUR"),
        (pl.col("_quantity").is_null(), "unparseable:QUANTITY"),
        (pl.col("_spend").is_null() | ~pl.col("_spend").is_finite(), "unparseable:SPEND"),
    ]
    # Rules on parsed values: a value that did not parse already failed above, so its null
    # condition must not add a second, spurious reason (e.g. spend_negative for SPEND "abc").
    rules += [
        (cond.fill_null(False), reason)
        for cond, reason in [
            (pl.col("_quantity") <= 0, "quantity_not_positive"),
            (pl.col("_spend") < 0, "spend_negative"),
            (~pl.col("_hour").is_between(0, 23), "hour_out_of_range"),
            (
                ~pl.col("_date").is_between(monday, monday + dt.timedelta(days=6)),
                "date_outside_week",
            ),
            (pl.col("_weekday") != (pl.col("_date").dt.weekday() % 7 + 1), "weekday_mismatch"),
        ]
    ]
    for col, pattern in ID_PATTERNS.items():
        ok = pl.col(col).str.contains(pattern)
        rules.append(
            (~(ok | _empty(col)) if col in NULLABLE_COLUMNS else ~ok, f"unknown_code:{col}")
        )
    for col, codes in CODE_SETS.items():
        ok = pl.col(col).is_in(list(codes))
        rules.append(
            (~(ok | _empty(col)) if col in NULLABLE_COLUMNS else ~ok, f"unknown_code:{col}")
        )
    # Uncarded rows carry no segments; a segment without a customer is inconsistent.
    rules.append(
        (_empty("CUST_CODE") & ~_empty("CUST_PRICE_SENSITIVITY"), "segment_without_customer")
    )
    rules.append((pl.col("_duplicate"), "duplicate_row"))
    rules.append((pl.col("_inconsistent_basket"), BASKET_INCONSISTENT))
    return rules


def _row_flags(text: pl.DataFrame) -> list[pl.Expr]:
    """``_duplicate`` and ``_inconsistent_basket`` row flags, after one cheap probe of the file.

    - A duplicate is an exact copy of an earlier line. Copies share (BASKET_ID, PROD_CODE), so
      the full-row comparison runs only when such pairs exist.
    - An inconsistent basket has rows that disagree on a basket-level column (customer, store,
      date, hour, BASKET_*). LGSR lists a basket's rows together, so when every basket is one
      contiguous run and no row differs from the previous row of its basket, no basket is
      inconsistent and the grouped window is skipped. Which columns disagree is worked out
      later, for the rows of those baskets only (_basket_detail).
    """
    values = pl.struct(BASKET_LEVEL_COLUMNS).hash()
    probe = text.select(
        values.alias("values"), pl.struct("BASKET_ID", "PROD_CODE").hash().alias("pair")
    )
    basket, hashed = text.get_column("BASKET_ID"), probe.get_column("values")
    same_basket = (basket == basket.shift(1)).fill_null(False)
    runs = len(basket) - int(same_basket.sum())
    changes = int((same_basket & (hashed != hashed.shift(1))).sum())
    # Equal pairs hash equally, so no repeated pair hash means no repeated pair.
    pairs_repeat = probe.get_column("pair").n_unique() < len(basket)
    duplicate = ~pl.struct(FULL_HEADER).is_first_distinct() if pairs_repeat else pl.lit(False)
    consistent = runs == basket.n_unique() and changes == 0
    inconsistent = pl.lit(False) if consistent else values.n_unique().over("BASKET_ID") > 1
    return [duplicate.alias("_duplicate"), inconsistent.alias("_inconsistent_basket")]


def _basket_detail() -> pl.Expr:
    """For rows of inconsistent baskets, ``basket_inconsistent:<COL>`` for each column that
    varies.
    """
    varying = [
        pl.when(pl.col(c).n_unique().over("BASKET_ID") > 1).then(
            pl.lit(f"{BASKET_INCONSISTENT}:{c}")
        )
        for c in BASKET_LEVEL_COLUMNS
    ]
    return pl.concat_str(varying, separator=";", ignore_nulls=True)


def _failure_mask(rules: list[tuple[pl.Expr, str]]) -> pl.Expr:
    """Bit i set where rule i fails, decoded into reason text per distinct mask."""
    assert len(rules) < 63
    return pl.sum_horizontal(
        cond.fill_null(True).cast(pl.Int64) * (1 << i) for i, (cond, _) in enumerate(rules)
    )


def _decode_reasons(masks: pl.Series, rules: list[tuple[pl.Expr, str]]) -> dict[int, str]:
    """Reason text for each distinct failure mask (a handful per file, not per row)."""
    return {
        m: ";".join(r for i, (_, r) in enumerate(rules) if m >> i & 1)
        for m in masks.unique().to_list()
    }


_TYPED_COLUMNS = {
    "SHOP_WEEK": "_shop_week",
    "SHOP_DATE": "_date",
    "SHOP_WEEKDAY": "_weekday",
    "SHOP_HOUR": "_hour",
    "QUANTITY": "_quantity",
    "SPEND": "_spend",
    "BASKET_ID": "_basket",
}


def _to_raw_schema(df: pl.LazyFrame, week: int) -> pl.LazyFrame:
    def column(c: str) -> pl.Expr:
        if c in _TYPED_COLUMNS:
            return pl.col(_TYPED_COLUMNS[c])
        if c in NULLABLE_COLUMNS:
            return pl.when(~_empty(c)).then(pl.col(c))
        return pl.col(c)

    return df.select(
        pl.lit(week).alias("week"),
        *[column(c).alias(RAW_COLUMN_NAMES[c]) for c in FULL_HEADER],
    ).select([pl.col(n).cast(t) for n, t in RAW_TRANSACTIONS_SCHEMA.items()])


def validate_week(
    text: pl.DataFrame, week: int, source_file: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split a text frame (as from ``read_week_text``) into (kept, quarantine)."""
    expected = shop_week_of(week)
    rules = _rules(week)
    checked = text.with_columns(*_typed(), *_row_flags(text)).with_columns(
        pl.any_horizontal(cond.fill_null(True) for cond, _ in rules).alias("_bad")
    )
    other_weeks = checked.get_column("_shop_week").filter(
        checked.get_column("_shop_week") != expected
    )
    if other_weeks.len():
        raise LGSRFileError(
            f"{source_file}: holds rows of SHOP_WEEK {sorted(other_weeks.unique().to_list())[:5]} "
            f"({other_weeks.len()} rows) but its name says {expected}"
        )
    kept = _to_raw_schema(checked.lazy().filter(~pl.col("_bad")), week).collect()
    # Which rules failed is worked out for the (few) bad rows only.
    bad = checked.filter(pl.col("_bad")).with_columns(_failure_mask(rules).alias("_mask"))
    if bad.is_empty():
        return kept, QUARANTINE_SCHEMA.to_frame()
    reason = pl.col("_mask").replace_strict(
        _decode_reasons(bad["_mask"], rules), return_dtype=pl.String
    )
    quarantine = (
        bad.with_columns(
            reason=reason.str.replace(BASKET_INCONSISTENT, _basket_detail(), literal=True),
        )
        .select(
            pl.lit(week, pl.Int16).alias("week"),
            pl.lit(source_file).alias("source_file"),
            pl.col("record_number").cast(pl.Int64),
            "reason",
            *FULL_HEADER,
        )
        .cast(dict(QUARANTINE_SCHEMA))
    )
    return kept, quarantine


def ingest_week(raw_dir: Path, week: int) -> IngestResult:
    path = find_week_file(Path(raw_dir), week)
    if path is None:
        return IngestResult(
            week, None, RAW_TRANSACTIONS_SCHEMA.to_frame(), QUARANTINE_SCHEMA.to_frame(), None
        )
    text, variant, digest = read_week_text(path)
    kept, quarantine = validate_week(text, week, path.name)
    return IngestResult(week, path.name, kept, quarantine, variant, digest)

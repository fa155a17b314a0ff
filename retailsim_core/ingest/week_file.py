"""Read and validate one LGSR week file into the raw table and a quarantine table.

Every row read ends up in exactly one of the two (``rows_read == rows_kept + rows_rejected``);
a quarantined row keeps its original text and every reason it failed. Problems with the
file as a whole (unreadable, wrong header, another week's rows) raise ``LGSRFileError``
naming the file.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from retailsim_core.calendar import shop_week_of, week_file_stem
from retailsim_core.ingest.file_reader import (
    ReadLimits,
    WeekFileError,
    read_csv_text,
    read_header,
    settled_stat,
    unchanged_since,
    week_text,
)
from retailsim_core.ingest.lgsr import (
    FULL_HEADER,
    HEADERS,
    QUARANTINE_SCHEMA,
    RAW_TRANSACTIONS_SCHEMA,
    SAMPLE_HEADER,
    SEG_1_TO_PRICE_SENSITIVITY,
    SEG_2_TO_LIFESTAGE,
)
from retailsim_core.ingest.raw_files import WEEK_FILE
from retailsim_core.ingest.week_rules import (
    BASKET_INCONSISTENT,
    basket_detail,
    decode_reasons,
    empty_cell,
    failure_mask,
    row_flags,
    to_raw_schema,
    typed_columns,
    week_rules,
)
from retailsim_core.storage.io import sha256_of

# One error for a week file that cannot be ingested as a whole, whichever step found it.
LGSRFileError = WeekFileError


@dataclass(frozen=True)
class IngestResult:
    week: int
    source_file: str | None  # None when the week's file is missing
    kept: pl.DataFrame  # RAW_TRANSACTIONS_SCHEMA
    quarantine: pl.DataFrame  # QUARANTINE_SCHEMA
    header_variant: str | None
    source_sha256: str | None = None
    # Rows of the whole source table this week was read from (The Complete Journey's one
    # table for every week), None for a file per week: what whole-source accounting sums to.
    source_rows: int | None = None

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


def _header_columns(line: bytes, path: Path) -> list[str]:
    """The header line's columns as written (a UTF-8 BOM removed)."""
    try:
        return next(csv.reader([line.decode("utf-8-sig")]), [])
    except (UnicodeDecodeError, csv.Error) as err:
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


def read_week_text(path: Path, limits: ReadLimits = ReadLimits()) -> tuple[pl.DataFrame, str, str]:
    """(all cells as text, header variant, sha256 of the file as stored). Text loses nothing to
    type inference; columns take the full-header names. The file is read once complete and
    within ``limits`` (``file_reader``)."""
    st = settled_stat(path, limits)
    if st.st_size == 0:
        raise LGSRFileError(f"{path}: is empty (0 bytes); expected an LGSR header and rows")
    source = week_text(path, st, limits)
    written = _header_columns(read_header(source, path), path)
    columns = [c.strip() for c in written]
    variant = detect_header(path, columns)
    df = read_csv_text(source, path)
    if df.height == 0:
        raise LGSRFileError(f"{path}: has a header but no rows")
    df = df.rename(dict(zip(written, columns, strict=True)))
    if variant == "sample":
        df = df.rename({"seg_1": "CUST_PRICE_SENSITIVITY", "seg_2": "CUST_LIFESTAGE"}).with_columns(
            _recode("CUST_PRICE_SENSITIVITY", SEG_1_TO_PRICE_SENSITIVITY),
            _recode("CUST_LIFESTAGE", SEG_2_TO_LIFESTAGE),
        )
    # Cells are kept verbatim: an empty field may read as null (``,,``) or "" (``""``), and the
    # rules treat both as empty. Padded codes are not silently trimmed; they fail validation.
    digest = sha256_of(path)
    unchanged_since(path, st)  # the bytes hashed and parsed are the settled file's
    return df, variant, digest


def _recode(col: str, mapping: dict[str, str]) -> pl.Expr:
    # Unknown sample codes stay visible (prefixed) so validation quarantines them.
    c = pl.col(col)
    return (
        pl.when(empty_cell(col))
        .then(c)
        .otherwise(c.replace_strict(mapping, default="?" + c))
        .alias(col)
    )


def validate_week(
    text: pl.DataFrame, week: int, source_file: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split a text frame (as from ``read_week_text``) into (kept, quarantine)."""
    expected = shop_week_of(week)
    rules = week_rules(week)
    checked = text.with_columns(*typed_columns(), *row_flags(text)).with_columns(
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
    kept = to_raw_schema(checked.lazy().filter(~pl.col("_bad")), week).collect()
    # Which rules failed is worked out for the (few) bad rows only.
    bad = checked.filter(pl.col("_bad")).with_columns(failure_mask(rules).alias("_mask"))
    if bad.is_empty():
        return kept, QUARANTINE_SCHEMA.to_frame()
    reason = pl.col("_mask").replace_strict(
        decode_reasons(bad["_mask"], rules), return_dtype=pl.String
    )
    quarantine = (
        bad.with_columns(
            reason=reason.str.replace(BASKET_INCONSISTENT, basket_detail(), literal=True),
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


def ingest_week(raw_dir: Path, week: int, limits: ReadLimits = ReadLimits()) -> IngestResult:
    path = find_week_file(Path(raw_dir), week)
    if path is None:
        return IngestResult(
            week, None, RAW_TRANSACTIONS_SCHEMA.to_frame(), QUARANTINE_SCHEMA.to_frame(), None
        )
    text, variant, digest = read_week_text(path, limits)
    kept, quarantine = validate_week(text, week, path.name)
    return IngestResult(week, path.name, kept, quarantine, variant, digest)

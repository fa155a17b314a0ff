"""``raw_transactions`` and its quarantine: LGSR week files -> validated Parquet partitions."""

import dagster as dg
import polars as pl

from retailsim_core.ingest.lgsr import QUARANTINE_SCHEMA, RAW_TRANSACTIONS_SCHEMA
from retailsim_core.ingest.week_file import expected_file_name
from retailsim_core.pipeline.data.ingest_weeks import ingest_weeks, source_accounting
from retailsim_core.tables import QUARANTINE_TABLE, RAW_TABLE
from retailsim_dagster.metadata import markdown_table, table_schema
from retailsim_dagster.partitions import weekly_partitions, weeks_of
from retailsim_dagster.resources import RawSourceResource, WarehouseResource

CHECKS = [
    dg.AssetCheckSpec(
        "row_accounting",
        asset=RAW_TABLE,
        description="rows read == rows kept + rows rejected, for every week of the run",
    ),
    dg.AssetCheckSpec(
        "source_row_accounting",
        asset=RAW_TABLE,
        description="over the whole source: the published weeks' rows read add up to the "
        "source table's rows (a week outside the calendar is no row lost)",
    ),
    dg.AssetCheckSpec(
        "schema", asset=RAW_TABLE, description="written Parquet matches RAW_TRANSACTIONS_SCHEMA"
    ),
    dg.AssetCheckSpec(
        "week_file_present",
        asset=RAW_TABLE,
        description="WARN when an expected transactions_YYYYWW.csv[.gz] is missing",
    ),
    dg.AssetCheckSpec(
        "quarantine_share",
        asset=RAW_TABLE,
        description="fails when a week quarantines more than max_quarantine_share of its rows",
    ),
]


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            RAW_TABLE,
            group_name="ingest",
            kinds={"polars", "parquet"},
            description="Validated LGSR transactions, one Parquet partition per shop week.",
            metadata={"dagster/column_schema": table_schema(RAW_TRANSACTIONS_SCHEMA)},
        ),
        dg.AssetSpec(
            QUARANTINE_TABLE,
            group_name="ingest",
            kinds={"polars", "parquet"},
            description="Rows that failed validation, verbatim, with every reason.",
            metadata={"dagster/column_schema": table_schema(QUARANTINE_SCHEMA)},
        ),
    ],
    check_specs=CHECKS,
    partitions_def=weekly_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    # Either table may be selected alone (`--select raw_transactions`); both are always
    # written together, since row accounting spans the pair.
    can_subset=True,
)
def raw_transactions(
    context: dg.AssetExecutionContext, raw_source: RawSourceResource, warehouse: WarehouseResource
):
    wh, weeks = warehouse.warehouse, weeks_of(context)
    report, reasons = ingest_weeks(
        raw_source.path,
        wh,
        weeks,
        log=context.log.info,
        replace_vanished=raw_source.replace_vanished_weeks,
        limits=raw_source.read_limits,
        source=raw_source.source,
    )
    read, kept, rejected = _totals(report)
    missing = report.filter(status="missing")["week"].to_list()
    common = {
        "weeks": len(weeks),
        "missing_weeks": missing,
        "raw_dir": str(raw_source.path),
        "rows_read": read,
        "rows_kept": kept,
        "rows_rejected": rejected,
        "reasons": dg.MetadataValue.md(markdown_table(reasons)),
    }
    selected = {k.to_user_string() for k in context.selected_asset_keys}
    if RAW_TABLE in selected:
        yield dg.MaterializeResult(
            asset_key=RAW_TABLE,
            metadata={
                **common,
                "dagster/row_count": kept,
                "per_week": dg.MetadataValue.md(markdown_table(report)),
            },
        )
    if QUARANTINE_TABLE in selected:
        yield dg.MaterializeResult(
            asset_key=QUARANTINE_TABLE, metadata={**common, "dagster/row_count": rejected}
        )
    if RAW_TABLE in selected:
        yield from _checks(wh, weeks, report, raw_source)


def _totals(report: pl.DataFrame) -> tuple[int, int, int]:
    """(rows read, kept, rejected) over the run's weeks."""
    return tuple(int(report[c].sum()) for c in ("rows_read", "rows_kept", "rows_rejected"))


def _checks(wh, weeks: list[int], report: pl.DataFrame, raw_source: RawSourceResource):
    """The raw table's checks: row accounting, schema, week files present, quarantine share."""
    read, kept, rejected = _totals(report)
    missing = report.filter(status="missing")["week"].to_list()
    yield dg.AssetCheckResult(
        check_name="row_accounting",
        asset_key=RAW_TABLE,
        passed=read == kept + rejected,
        metadata={"rows_read": read, "rows_kept": kept, "rows_rejected": rejected},
    )
    whole = source_accounting(wh)
    yield dg.AssetCheckResult(
        check_name="source_row_accounting",
        asset_key=RAW_TABLE,
        passed=whole.pop("passed"),
        metadata=whole,
    )
    bad_schema = [
        w for w in weeks if wh.scan(RAW_TABLE, [w]).collect_schema() != RAW_TRANSACTIONS_SCHEMA
    ]
    yield dg.AssetCheckResult(
        check_name="schema",
        asset_key=RAW_TABLE,
        passed=not bad_schema,
        metadata={"weeks_with_other_schema": bad_schema},
    )
    yield dg.AssetCheckResult(
        check_name="week_file_present",
        asset_key=RAW_TABLE,
        passed=not missing,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "missing_files": [expected_file_name(w) for w in missing],
            "raw_dir": str(raw_source.path),
        },
        description=("missing: " + ", ".join(expected_file_name(w) for w in missing))
        if missing
        else None,
    )
    limit = raw_source.max_quarantine_share
    over = (
        report.filter(pl.col("rows_read") > 0)
        .with_columns(share=pl.col("rows_rejected") / pl.col("rows_read"))
        .filter(pl.col("share") > limit)
    )
    yield dg.AssetCheckResult(
        check_name="quarantine_share",
        asset_key=RAW_TABLE,
        passed=over.is_empty(),
        metadata={
            "max_quarantine_share": limit,
            "weeks_over": over["week"].to_list(),
            "worst_share": float(over["share"].max() or 0.0),
        },
        description=(
            f"{over.height} week(s) quarantined more than {limit:.0%} of their rows; "
            "see raw_transactions_quarantine"
        )
        if over.height
        else None,
    )

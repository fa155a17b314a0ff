"""``source_promotions``: the source's promotion plan (display, mailer) per week, known before
the week's sales (D86); empty weeks marked ``no_table`` where the source has none (LGSR)."""

import dagster as dg

from retailsim_core.ingest.promotion_plan import SOURCE_PROMOTIONS_SCHEMA
from retailsim_core.pipeline.data.ingest_weeks import source_accounting
from retailsim_core.pipeline.data.promotion_weeks import ingest_promotions
from retailsim_core.tables import PROMOTION_CELLS_TABLE, PROMOTIONS_TABLE
from retailsim_dagster.metadata import markdown_table, table_schema
from retailsim_dagster.partitions import weekly_partitions, weeks_of
from retailsim_dagster.resources import RawSourceResource, WarehouseResource


@dg.asset(
    name=PROMOTIONS_TABLE,
    group_name="ingest",
    kinds={"polars", "parquet"},
    partitions_def=weekly_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    check_specs=[
        dg.AssetCheckSpec(
            "row_accounting",
            asset=PROMOTIONS_TABLE,
            description="source rows read == rows merged into kept cells + rows quarantined",
        ),
        dg.AssetCheckSpec(
            "source_row_accounting",
            asset=PROMOTIONS_TABLE,
            description="over the whole source: the published weeks' rows read add up to the "
            "promotion table's rows (a week outside the calendar is no row lost)",
        ),
    ],
    metadata={"dagster/column_schema": table_schema(SOURCE_PROMOTIONS_SCHEMA)},
)
def source_promotions(
    context: dg.AssetExecutionContext, raw_source: RawSourceResource, warehouse: WarehouseResource
):
    """Products on display or in the mailer per store and week, whether or not they sold."""
    report, reasons = ingest_promotions(
        raw_source.path,
        warehouse.warehouse,
        weeks_of(context),
        raw_source.source,
        raw_source.read_limits,
        log=context.log.info,
    )
    read, kept, rejected = (
        int(report[c].sum()) for c in ("rows_read", "rows_kept", "rows_rejected")
    )
    yield dg.MaterializeResult(
        metadata={
            "dagster/row_count": int(report["cells"].sum()),
            "status": ", ".join(sorted(set(report["status"]))),
            "rows_read": read,
            "rows_kept": kept,
            "rows_rejected": rejected,
            "reasons": dg.MetadataValue.md(markdown_table(reasons)),
            "per_week": dg.MetadataValue.md(markdown_table(report)),
        }
    )
    yield dg.AssetCheckResult(
        check_name="row_accounting",
        passed=read == kept + rejected,
        metadata={"rows_read": read, "rows_kept": kept, "rows_rejected": rejected},
    )
    whole = source_accounting(warehouse.warehouse, PROMOTION_CELLS_TABLE)
    yield dg.AssetCheckResult(
        check_name="source_row_accounting", passed=whole.pop("passed"), metadata=whole
    )

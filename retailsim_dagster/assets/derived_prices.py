"""``derived_prices`` (design §2.2) and its business-rule checks."""

import dagster as dg

from retailsim_core.derived_prices import VALIDATION_FLAGS
from retailsim_core.pipeline.data.price_weeks import (
    DERIVED_PRICES_SCHEMA,
    derive_price_weeks,
    price_rule_report,
)
from retailsim_core.tables import PRICES_TABLE, RAW_TABLE
from retailsim_dagster.metadata import markdown_table, table_schema
from retailsim_dagster.partitions import (
    CALENDAR,
    CRITICAL_PATH,
    previous_weeks,
    weekly_partitions,
    weeks_of,
)
from retailsim_dagster.resources import WarehouseResource


@dg.asset(
    name=PRICES_TABLE,
    group_name="pipeline",
    partitions_def=weekly_partitions,
    kinds={"polars", "parquet"},
    op_tags=CRITICAL_PATH,
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[
        dg.AssetDep(RAW_TABLE),
        # Week W replays the observations its previous partitions stored (D96): every earlier
        # week, a few vectorised passes each, no table built.
        dg.AssetDep(PRICES_TABLE, partition_mapping=previous_weeks(CALENDAR.n_weeks)),
    ],
    metadata={"dagster/column_schema": table_schema(DERIVED_PRICES_SCHEMA)},
    description="Actual, base and reference prices, promotions, imputation and validation flags "
    "per product x store (the store's assortment to date) x week (design §2.2); stores the "
    "observed cells, and every reader materialises a week's whole shelf from them (D96).",
)
def derived_prices(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    summary = derive_price_weeks(warehouse.warehouse, weeks_of(context), log=context.log.info)
    totals = summary.drop("week").sum().row(0, named=True)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": int(totals["observed"]),  # the stored rows
            "dense_cells": int(totals["cells"]),  # what a reader materialises
            "observed_cells": int(totals["observed"]),
            "promo_cells": int(totals["promo_cells"]),
            "promo_share_of_observed": totals["promo_cells"] / max(totals["observed"], 1),
            "per_week": dg.MetadataValue.md(
                markdown_table(
                    summary.select(
                        "week",
                        "cells",
                        "observed",
                        "promo_cells",
                        "max_depth",
                        "flag_base_price_decrease",
                    )
                )
            ),
        }
    )


_SEVERITY = {"price_nonpositive": dg.AssetCheckSeverity.ERROR}


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            f"rule_{rule}", asset=PRICES_TABLE, description=f"share of cells flagged {rule}"
        )
        for rule in VALIDATION_FLAGS
    ],
)
def derived_prices_business_rules(warehouse: WarehouseResource):
    for result in price_rule_report(warehouse.warehouse):
        yield dg.AssetCheckResult(
            check_name=f"rule_{result.rule}",
            asset_key=PRICES_TABLE,
            passed=result.passed,
            severity=_SEVERITY.get(result.rule, dg.AssetCheckSeverity.WARN),
            metadata={
                "observed_share": result.observed,
                "threshold_share": result.threshold,
                "cells_checked": result.cells,
            },
        )

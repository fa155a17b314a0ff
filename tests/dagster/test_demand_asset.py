"""``demand_forecast``, ``trip_forecast`` and ``world_model_demand`` materialized through Dagster
on a copy of the tiny warehouse (its trained checkpoint included)."""

import shutil

import dagster as dg
import pytest

from retailsim_core.pipeline.data.promotion_weeks import ingest_promotions
from retailsim_core.storage.warehouse import Warehouse
from retailsim_dagster.assets.demand_forecast import (
    demand_forecast,
    trip_forecast,
    world_model_demand,
)
from retailsim_dagster.resources import (
    PipelineConfigResource,
    RawSourceResource,
    WarehouseResource,
)


@pytest.mark.slow
def test_demand_forecast_materializes_with_its_scores(
    tiny_warehouse, tiny_checkpoint, tiny_dataset, tmp_path
):
    root = tmp_path / "wh"
    shutil.copytree(tiny_warehouse["warehouse"].root, root)
    # The generator's plan, so the forecasts read a mailer and the planted responses are scored
    ingest_promotions(tiny_dataset["raw"], Warehouse(root), range(1, 15), "lgsr")
    result = dg.materialize(
        [demand_forecast, trip_forecast, world_model_demand],
        resources={
            "warehouse": WarehouseResource(root=str(root)),
            "raw_source": RawSourceResource(
                raw_dir=str(tiny_dataset["raw"]), truth_dir=str(tiny_dataset["truth"])
            ),
            "pipeline_config": PipelineConfigResource(train_end=8, valid_end=11),
        },
    )
    assert result.success
    meta = result.asset_materializations_for_node("demand_forecast")[0].metadata
    assert meta["cell_weeks"].value > 0 and 0 < meta["seasonal_naive_WAPE"].value
    assert (root / "demand_forecast" / "demand_forecast.parquet").is_file()
    trips = result.asset_materializations_for_node("trip_forecast")[0].metadata
    assert trips["customer_weeks"].value > 0 and trips["trips"].value > 0
    assert 0 < trips["p_visit_log_loss"].value and 0 <= trips["predicted_store_accuracy"].value <= 1
    assert (root / "trip_forecast" / "trip_forecast.parquet").is_file()
    # the planted responses against the forecasts' (D132): a correlation in [-1, 1] each
    for part, step in (("planted_traffic", trips), ("planted_quantity", meta)):
        assert -1 <= step[f"{part}_correlation"].value <= 1, part
    world = result.asset_materializations_for_node("world_model_demand")[0].metadata
    assert world["cell_weeks"].value == meta["cell_weeks"].value  # the same rows
    assert world["contexts"].value > 0 and world["all_world_model_wape"].value > 0
    assert (root / "world_model_demand" / "world_model_demand.parquet").is_file()

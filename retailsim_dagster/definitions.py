"""Everything Dagster loads: ``dagster dev``, ``dagster asset materialize -m retailsim_dagster.definitions``."""

import dagster as dg

from retailsim_dagster.assets import checks, features, ingest, pipeline
from retailsim_dagster.resources import default_resources

defs = dg.Definitions(
    assets=dg.load_assets_from_modules([ingest, pipeline, features]),
    asset_checks=dg.load_asset_checks_from_modules([ingest, checks, features]),
    resources=default_resources(),
)

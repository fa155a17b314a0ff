"""RetailSim core: pure transforms and models. Never imports dagster."""

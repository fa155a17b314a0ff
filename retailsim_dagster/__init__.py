"""RetailSim's Dagster layer: thin assets, checks, partitions and resources over retailsim_core."""

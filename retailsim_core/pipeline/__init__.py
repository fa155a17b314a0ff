"""Multi-week pipeline steps composed from the core transforms (called by the Dagster assets)."""

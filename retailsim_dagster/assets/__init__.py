"""Asset modules, one per domain of the pipeline."""

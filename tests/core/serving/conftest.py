"""A service over the tiny warehouse and checkpoint (test weeks 12-14), once per session."""

import pytest


@pytest.fixture(scope="session")
def tiny_service(tiny_warehouse, tiny_checkpoint):
    from retailsim_core.pipeline.readers.serving_inputs import load_service

    return load_service(tiny_warehouse["warehouse"], tiny_checkpoint)

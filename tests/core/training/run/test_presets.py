"""Presets are named configs; training phases are built with keywords only."""

import pytest


def test_presets_are_named_configs_and_phases_take_keywords():
    import dataclasses

    from retailsim_core.models.world_model import MODEL_PRESETS, WorldModelConfig
    from retailsim_core.training.run.train_config import TRAIN_PRESETS, Phase, TrainConfig

    assert set(MODEL_PRESETS) == set(TRAIN_PRESETS) == {"paper", "small", "tiny"}
    assert WorldModelConfig.preset("small") == MODEL_PRESETS["small"]
    assert TrainConfig.preset("small", seed=4) == dataclasses.replace(
        TRAIN_PRESETS["small"], seed=4
    )
    assert [p.name for p in TRAIN_PRESETS["paper"].phases] == ["warm-up", "main", "fine-tune"]
    with pytest.raises(TypeError):
        Phase("main", 1, 1e-3, 8, 0.15, 1.0, None)  # positional hyper-parameters are refused
    with pytest.raises(ValueError, match="paper | small | tiny"):
        TrainConfig.preset("huge")

"""Synthetic LGSR generator with planted ground truth (the project's embedded default data)."""

from retailsim_core.synth.config import PRESETS, SynthConfig, preset
from retailsim_core.synth.world import World, build_world, load_world

__all__ = ["PRESETS", "SynthConfig", "World", "build_world", "load_world", "preset"]

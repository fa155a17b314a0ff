"""Checkpoints: safetensors + JSON written and verified, and the model of each week."""

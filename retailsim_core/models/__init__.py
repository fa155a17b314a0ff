"""PyTorch models: the world model, its heads, sequence blocks and GraphSAGE (rooms below)."""

"""Pure-PyTorch models (GraphSAGE here; the world model later)."""

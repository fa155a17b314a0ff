"""Training the world model: a run, its checkpoints, its scoring, and what follows it."""

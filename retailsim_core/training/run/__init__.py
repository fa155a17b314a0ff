"""One training run: its config, the model's setup, the epochs loop and its resumable state,
parameter groups, corruption (the queries and masks), torchrun."""

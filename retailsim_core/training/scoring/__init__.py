"""What a run is judged by: validation scoring and the training metrics."""

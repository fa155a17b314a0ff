"""From trips to model batches (assets temporal_metadata, customer_trips, bucketed_samples and
the tensors of trained_checkpoint): the trip store, a basket history's features, the product
vocabulary, shelf prices and the T1-T6 batches."""

"""Customer-level as-of snapshots (assets customer_store_affinity and mission_patterns): the
running counts and the features read from them, from weeks < W only."""

"""The weekly data stage's steps: ingest, prices, promotions, features, snapshots, training
data, the product graph and its embeddings, each over a range of weeks with carried state."""

"""GraphSAGE product embeddings and their compiled pair products."""

"""The product graph (asset product_graph): co-purchase, substitution and hierarchy edges, its
views as networkx and DGL graphs, and the GraphSAGE product embeddings trained on it."""

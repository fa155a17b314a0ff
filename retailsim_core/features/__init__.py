"""Weekly feature tables (price_features, store_features) and pseudo-brands."""

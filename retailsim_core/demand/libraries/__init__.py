"""The forecasters' own libraries as baselines: LightGBM through mlforecast, pyfixest's
Poisson fixed effects (D116)."""

"""Demand a retailer plans with (issue #61), in four rooms:

- ``cells``: the cell-week forecast check: the unit panel, what is known before a week, the
  counting forecasts, the check and its scores;
- ``libraries``: the forecasters' own libraries as baselines (LightGBM, pyfixest);
- ``trips``: who comes to the store in a week, and to which store;
- ``world``: the world model's units: units per line, shoppers' baskets summed into cells,
  the promotion lift on forecasts.
"""

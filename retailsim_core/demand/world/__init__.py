"""The world model's units: units per line, shoppers' baskets summed into cells, the forecast
and its promotion lift (D117, D118)."""

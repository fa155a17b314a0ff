"""Demand a retailer plans with (issue #61): the unit panel, forecasts made before each week,
and how they are scored."""

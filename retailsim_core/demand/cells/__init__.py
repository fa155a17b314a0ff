"""The cell-week forecast check: the unit panel, what is known before a week, the counting
forecasts, the check and its scores (D115, D116)."""

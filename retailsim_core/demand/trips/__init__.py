"""Who comes to the store in a week and to which store: the visit model, store choice and
store shares, their scores (D116)."""

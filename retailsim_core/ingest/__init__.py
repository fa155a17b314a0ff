"""LGSR week files in: the format, the raw folder, and one file read and validated into the
raw and quarantine tables (assets raw_transactions, raw_transactions_quarantine)."""

"""Where tables live: the Parquet warehouse and atomic, checksummed file writes."""

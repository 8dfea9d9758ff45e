"""The parquet stream: config, reader and Dagster resource."""

"""The parquet sink: config, writer and Dagster resource."""

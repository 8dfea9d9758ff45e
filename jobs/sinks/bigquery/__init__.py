"""The bigquery sink: config, writer and Dagster resource."""

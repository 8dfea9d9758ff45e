"""The log sink: config, writer and Dagster resource."""

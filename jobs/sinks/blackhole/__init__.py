"""The blackhole sink: config, writer and Dagster resource."""

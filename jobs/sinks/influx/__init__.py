"""The influx sink: config, writer and Dagster resource."""

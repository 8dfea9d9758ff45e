"""The elasticsearch sink: config, writer and Dagster resource."""

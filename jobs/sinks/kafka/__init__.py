"""The kafka sink: config, writer and Dagster resource."""

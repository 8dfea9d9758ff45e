"""The kafka stream: config, reader and Dagster resource."""

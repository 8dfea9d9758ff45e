"""The continuous_table sink: config, writer, Dagster resource, and the tables' read side (`storage`)."""

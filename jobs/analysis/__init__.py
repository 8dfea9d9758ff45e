"""The Analysis API: a project's read key runs Spark SQL over its own tables, isolated by `isolation`."""

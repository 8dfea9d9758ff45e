"""Dagger's function library in Spark SQL: scalar functions, aggregates and table functions under
Dagger's names, plus users' own Python functions."""

"""The engine's glue: Spark sessions, the project's JVM module, Spark Connect, Python workers, Arrow values,
object stores, Kafka clients' errors, the one retry policy, and query results as JSON.

May import: `jobs.project` and third-party libraries only; every other layer builds on it.
"""

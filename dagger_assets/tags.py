"""The run tags the code location reads and writes, found together."""

DAGGER_TAG = "dagger/name"
"""On every run of a dagger, whether launched as its job or from the UI's "Materialize" (an implicit
asset job): the sensors find a dagger's runs by it."""
PARTITION_TAG = "dagster/partition"
"""Dagster's own, on a run of one partition: a template's topic, or a time partition's key."""
GENERATION_TAG = "dagger/partition_generation"
"""On every run of a time partition: the generation it computes (`dagger_assets.time_partitions`)."""

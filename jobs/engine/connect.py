"""What differs when a dagger runs through Spark Connect (`master: sc://...`).

On Connect the dagger's process holds no JVM: `sparkContext`, `_jvm`, `_jdf` and `DataFrame.rdd` do not
exist. The `foreachBatch` function is pickled and runs in a Python worker of the Connect server, where the
micro-batch is a Connect DataFrame of a session cloned for the query (so, again, no SparkContext). What
the sinks need from the query there comes from what Connect does reach: the checkpoint, through the
server's file systems.
"""

from __future__ import annotations

import json

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""Set by Spark (classic) on the thread that runs foreachBatch."""


def is_spark_connect(session: SparkSession) -> bool:
    """True for a Spark Connect session: a client's, or the one a foreachBatch batch belongs to."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def streaming_query_id(batch: DataFrame, checkpoint_location: str) -> str | None:
    """The id of the streaming query whose foreachBatch got `batch` (None outside a query).

    Classic sessions: the local property Spark sets on the foreachBatch thread. Connect: the `id` of the
    checkpoint's `metadata` file (`{"id": "<uuid>"}`), which Spark writes when the query is created and
    reads back on every restart; that is the same id `StreamingQuery.id` reports. It is read through the
    server's Spark, so a checkpoint on any file system the server reaches (s3a included) works.
    """
    session = batch.sparkSession
    if not is_spark_connect(session):
        return session.sparkContext.getLocalProperty(QUERY_ID_PROPERTY) or None
    known = _connect_query_ids.get(checkpoint_location)
    if known is not None:
        return known
    try:
        lines = session.read.text(f"{checkpoint_location.rstrip('/')}/metadata").collect()
    except AnalysisException:  # no such file: no query has been created on this checkpoint
        return None
    if not lines:
        return None
    query_id = _connect_query_ids[checkpoint_location] = str(json.loads(lines[0].value)["id"])
    return query_id


_connect_query_ids: dict[str, str] = {}
"""Checkpoint -> query id, read once: the server starts a new foreachBatch worker process for every query
start, and a running query's checkpoint keeps its id."""

"""A checkpoint closed by a bounded run, and the runs refused on it.

A bounded run ends its input with a watermark at the end of time (`jobs.sources.stream_batches`), and
Spark keeps that watermark in the checkpoint: a later run of the same checkpoint starts with it, so every
record it reads is behind the watermark. A query whose state waits for the watermark (a window, join,
deduplicate, OVER or Top-N) would drop them all, and a stream's `late_records` policy other than `keep`
would skip them all. Bad input loses no data, and what cannot run is refused before it starts: such a
dagger is refused while it is built (`jobs.running.runner.build_dagger`), so `dagger run`, `dagger
validate` and Dagster's launches refuse it alike, and nothing is read or written. A stateless query
keeping late records loses nothing and runs.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession

from jobs.engine.connect import is_spark_connect
from jobs.engine.object_store import s3a_settings
from jobs.model.errors import DaggerBuildError
from jobs.model.registry import STREAM_KINDS
from jobs.model.spec import DaggerSpec
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.stream_batches import FINAL_ROWTIME_US, latest_log_entry

_STATEFUL_OPERATORS = ("Aggregate", "Join", "Deduplicate", "WithState")
"""Plan nodes whose state the watermark drives: aggregations (windows), joins, deduplicates, and the
`...WithState` operators of OVER, Top-N and the `deduplicate` pre-processor."""


def closed_by_a_bounded_run(spark: SparkSession, spec: DaggerSpec) -> bool:
    """Whether the dagger's checkpoint goes on with the watermark a bounded run ends with (the end of
    time): its last micro-batch's commit holds the watermark of the next."""
    commit = latest_log_entry(spec.resolved_checkpoint_location, s3a_settings(spark), "commits")
    watermark_us = int(commit.get("nextBatchWatermarkMs", 0)) * 1000
    # The log keeps milliseconds: a second of slack for the rounding.
    return watermark_us >= FINAL_ROWTIME_US - spec.watermark_delay // timedelta(microseconds=1) - 1_000_000


def what_drops_late_records(spec: DaggerSpec, result: DataFrame) -> list[str]:
    """What in the dagger drops or never emits records behind the watermark: its streams' `late_records`
    policies other than `keep`, and the query's stateful operators."""
    dropping = [
        f"stream {stream.table!r} has late_records.action {stream.late_records.action!r}"
        for stream in spec.streams
        if stream.late_records.action != "keep"
    ]
    operators = _stateful_operators(result)
    if operators:
        dropping.append(f"the query holds state until the watermark passes it ({', '.join(operators)})")
    return dropping


def _stateful_operators(result: DataFrame) -> list[str]:
    if is_spark_connect(result.sparkSession):  # no JVM plan here: the analysed plan as the server prints it
        text = result._explain_string(extended=True)  # type: ignore[attr-defined]
        analysed = text.split("== Analyzed Logical Plan ==")[-1].split("== Optimized Logical Plan ==")[0]
        names = {word.strip("+- :") for line in analysed.splitlines() for word in line.split()[:3]}
    else:
        pending = [result._jdf.queryExecution().analyzed()]  # type: ignore[attr-defined]
        names = set()
        while pending:
            node = pending.pop()
            names.add(node.getClass().getSimpleName())
            children = node.children()
            pending.extend(children.apply(index) for index in range(children.size()))
    return sorted(name for name in names if any(operator in name for operator in _STATEFUL_OPERATORS))


def require_open_checkpoint(spark: SparkSession, spec: DaggerSpec, result: DataFrame) -> None:
    """Refuses the dagger when its checkpoint was closed by a bounded run and the dagger would drop or
    never emit the records it reads (see the module's docstring)."""
    if not closed_by_a_bounded_run(spark, spec):
        return
    dropping = what_drops_late_records(spec, result)
    if not dropping:
        return
    raise DaggerBuildError(closed_checkpoint_error(spec, dropping))


def closed_checkpoint_error(spec: DaggerSpec, dropping: list[str]) -> str:
    """Why a run on a closed checkpoint is refused, and what to do."""
    kafka = [stream.table for stream in spec.streams if isinstance(stream, KafkaStream) and stream.group_id]
    rereads = [stream.table for stream in spec.streams if STREAM_KINDS[stream.kind].bounded]
    where_next = []
    if kafka:
        where_next.append(
            f"its Kafka stream(s) {', '.join(kafka)} start there at their consumer group's committed "
            "offsets, so nothing is read twice"
        )
    if rereads:
        where_next.append(f"its stream(s) {', '.join(rereads)} read their files again from the start")
    return (
        f"dagger {spec.name}: checkpoint {spec.resolved_checkpoint_location} was closed by a bounded run, "
        "whose watermark is at the end of time: every record a later run reads is behind it, and "
        f"{'; '.join(dropping)}, so this run would lose them all; refused before it starts. Run it with a "
        "new checkpoint_location"
        + (f": {'; '.join(where_next)}" if where_next else "")
        + ". Going on from offsets of your choosing: `dagger run --rewind-to-offsets`"
    )

"""Builds, runs, watches and stops the Spark streaming query of one dagger.

Stages, in the order data flows:
  streams (Kafka / Parquet data sources) -> invalid-record accounting -> event-time watermark
  -> temp views named after each stream's table -> the dagger's SQL -> sinks (fan-out per micro-batch)

`build_dagger` resolves the dagger once (`jobs.model.plan`: connectors, schemas, descriptor sets, the
prepared SQL) and builds every stage from that plan. Everything that can be checked before the query
starts is checked there (descriptor sets, message names, event-time fields, SQL analysis), so a bad dagger
fails with a message naming the cause instead of a failed query minutes later.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
from pyspark.sql.streaming.listener import StreamingQueryProgress

from jobs.engine.connect import is_spark_connect
from jobs.engine.object_store import ObjectStoreError, require_connector, s3a_settings
from jobs.engine.spark import jvm_loggers_off, state_rows_counted
from jobs.expectations.config import RESULT_STAGE
from jobs.expectations.query import ExpectationError, apply_expectations
from jobs.metrics.exporter import DaggerMetrics
from jobs.metrics.stages import ROWS_IN, ROWS_OUT, SQL_STAGE, counted, counted_again_for_the_sql
from jobs.model import sql as sql_stage
from jobs.model.errors import DaggerBuildError, DaggerQueryError, root_cause
from jobs.model.plan import DaggerPlan, resolve_plan
from jobs.model.registry import SINK_KINDS, STREAM_KINDS
from jobs.model.schema_registry import SchemaRegistry
from jobs.model.spec import DaggerSpec
from jobs.processors.post import POST_TABLE, apply_post_processors
from jobs.raystack.flink_sql.over_operator import OverViewError, register_over_views
from jobs.raystack.flink_sql.proctime import ProcTimeWindowView
from jobs.running.checkpoint_lock import CheckpointInUseError, CheckpointLock
from jobs.running.closed_checkpoint import require_open_checkpoint
from jobs.running.ordering import BatchWriter, OrderedOutput
from jobs.running.progress import ProgressReport
from jobs.running.real_time import require_real_time_stages
from jobs.running.stream_checks import cannot_run_as_stream, output_mode, require_streamable
from jobs.running.stream_tables import (
    interval,
    processor_errors,
    stream_frame,
    transform_context,
)
from jobs.sinks.base import SinkContext, SinkWriter, Written
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.kafka.producers import KafkaSinkError, require_login
from jobs.sinks.kafka.spark_connector import ConnectorRecords
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.consumers import KafkaSourceError
from jobs.sources.kafka.group_offsets import GroupOffsetCommitter
from jobs.sources.kafka.offsets import Offsets
from jobs.sources.kafka.spark_connector import starting_offsets
from jobs.udfs import FunctionsError, register_functions

log = logging.getLogger(__name__)


@dataclass
class BuiltDagger:
    plan: DaggerPlan
    """The dagger, resolved once: the file as it runs, its streams' records, its SQL."""
    result: DataFrame
    """The query's result, checked; streams on Spark's Kafka connector start where `started_result` says."""
    sinks: list[SinkWriter]
    started_result: Callable[[bool], DataFrame]
    """The result to start (`_result_from_broker`), given whether the run is a bounded run that flushes."""

    @property
    def spec(self) -> DaggerSpec:
        """The dagger file as it runs (`DaggerPlan.spec`)."""
        return self.plan.spec

    @property
    def connector_sink(self) -> ConnectorRecords | None:
        """The dagger's one sink when Spark's Kafka connector writes it, and nothing must see each micro-batch
        in Python (ordered output holds rows back there; an exactly-once sink reads its markers there)."""
        if len(self.sinks) != 1 or self.spec.ordered_output:
            return None
        return getattr(self.sinks[0], "query_sink", None)

    @property
    def bounded(self) -> bool:
        """A dagger over Parquet streams only has an end: it runs until its files are read."""
        return all(STREAM_KINDS[stream.kind].bounded for stream in self.spec.streams)


def _require_checkpoint_store(spark: SparkSession, spec: DaggerSpec) -> None:
    """An `s3a://` checkpoint needs the connector in the session's JVM, and cannot hold ordered output."""
    checkpoint = spec.resolved_checkpoint_location
    try:
        require_connector(spark, [checkpoint], f"dagger {spec.name}: checkpoint_location")
    except ObjectStoreError as error:
        raise DaggerBuildError(str(error)) from None
    if spec.ordered_output and "://" in checkpoint and not checkpoint.startswith("file://"):
        raise DaggerBuildError(
            f"dagger {spec.name}: ordered_output holds rows in the checkpoint's folder through local files; "
            f"it needs a local checkpoint_location, not {checkpoint}"
        )


def build_dagger(
    spark: SparkSession,
    spec: DaggerSpec,
    registry: SchemaRegistry | None = None,
    log_emit: Callable[[str], None] | None = None,
) -> BuiltDagger:
    _require_deployment_keys(spec)
    _require_checkpoint_store(spark, spec)
    plan = resolve_plan(spec, is_spark_connect(spark), registry)
    spec = plan.spec
    try:  # before any SQL is analysed
        register_functions(spark, plan.registry, spec.functions, plan.function_names)
    except FunctionsError as error:
        raise DaggerBuildError(f"dagger {spec.name}: {error}") from None

    result = _planned_result(spark, plan, {})
    object_store = s3a_settings(spark)
    sinks = [
        _sink_writer(SinkContext(spec, index, plan.registry, log_emit, result.schema, object_store, spark))
        for index in range(len(spec.sinks))
    ]
    # The broker is asked where the connector's streams start only when the query starts: building is
    # checking, and names a mistake in the dagger file though no broker answers.
    started = functools.partial(_result_from_broker, spark, plan, result)
    built = BuiltDagger(plan, result, sinks, started)
    if spec.execution == "real_time":
        require_real_time_stages(spec, result, built.connector_sink is not None)
    require_streamable(result, spec, output_mode(spec, built.bounded))
    require_open_checkpoint(spark, spec, result)
    _require_an_end(spec, built.bounded)
    return built


def _has_proctime_windows(spec: DaggerSpec) -> bool:
    return any(isinstance(view, ProcTimeWindowView) for view in spec.over_views)


def _require_an_end(spec: DaggerSpec, bounded: bool) -> None:
    """A bounded run of a processing-time window that does not end with the final watermark
    (`bounded_end: open`) is refused: Spark runs a batch at every trigger while a processing-time operator
    is in the query (TransformWithStateExec asks for one), so it would never end. One that flushes ends
    with the final watermark, as Flink's does (`FlinkProcTimeWindow`)."""
    if bounded and spec.resolved_bounded_end != "flush" and _has_proctime_windows(spec):
        raise DaggerBuildError(
            f"dagger {spec.name}: a bounded run of a processing-time window (TUMBLE on PROCTIME()) with "
            "bounded_end: open would never end on Spark, whose processing-time operator asks for a batch "
            "at every trigger; set bounded_end: flush (it ends with its input as Flink's run does: the "
            "windows the wall clock has passed come out, the others are dropped) or run it unbounded"
        )


def _planned_result(
    spark: SparkSession, plan: DaggerPlan, starting: dict[str, Offsets], flushing: bool = False
) -> DataFrame:
    """The dagger's result before its sinks: the streams as tables (those on Spark's Kafka connector
    starting at `starting`, by table, and ending with the row at the end of time when `flushing`), the
    SQL, the post-processors and the result's expectations."""
    spec = plan.spec

    def register_streams(project: bool) -> None:
        for stream in plan.streams:
            frame = stream_frame(spark, plan, stream, project, starting.get(stream.table), flushing)
            if counted_again_for_the_sql(stream.config):
                frame = counted(frame, ROWS_IN, SQL_STAGE, stream.table, enabled=spec.metrics.stage_rows)
            frame.createOrReplaceTempView(stream.table)

    try:
        register_streams(project=True)
    except DaggerBuildError:
        # A pre-processor that cannot apply: report it over every field, as the user knows the stream.
        register_streams(project=False)
        raise
    try:
        result = _analysed_sql(spark, plan, flushing)
    except (sql_stage.SqlError, OverViewError):
        # Analyse again over every field, so "did you mean" suggests the fields the projection left out.
        register_streams(project=False)
        try:
            _analysed_sql(spark, plan, flushing)
        except (sql_stage.SqlError, OverViewError) as error:
            raise DaggerBuildError(f"dagger {spec.name}: {error}") from None
        raise
    result = counted(result, ROWS_OUT, SQL_STAGE, enabled=spec.metrics.stage_rows)
    post = spec.post_processors
    if post.reshapes_output or post.transformers:
        with processor_errors():
            context = transform_context(spark, plan, "post_processors", POST_TABLE)
            result = apply_post_processors(result, post, context)
    try:
        where = f"dagger {spec.name}: the result"
        result = apply_expectations(result, spec.expectations, RESULT_STAGE, where)
    except ExpectationError as error:
        raise DaggerBuildError(str(error)) from None
    if spec.ordered_output and spec.rowtime_column not in result.columns:
        raise DaggerBuildError(
            f"dagger {spec.name}: ordered_output orders by rowtime_column {spec.rowtime_column!r}, which the "
            f"result does not have (its columns: {', '.join(result.columns)})"
        )
    return result


def _analysed_sql(spark: SparkSession, plan: DaggerPlan, flushing: bool) -> DataFrame:
    """The SQL stage's result over the registered streams (a Flink query's OVER views registered first;
    `flushing`: for a bounded run that ends with the final watermark)."""
    register_over_views(spark, plan.over_views, flushing)
    return sql_stage.analyse(spark, plan.sql)


def _result_from_broker(
    spark: SparkSession, plan: DaggerPlan, result: DataFrame, flushing: bool
) -> DataFrame:
    """`result`, planned again if any stream is on Spark's Kafka connector, from where the broker says it
    starts (the Python source asks at the same moment, as its query starts), and, in a bounded run that
    flushes (`flushing`), through the connector's source that ends the input with the row at the end of
    time (`jobs.sources.kafka.spark_connector`); planned again too in a run that flushes a processing-time
    window, whose operator then ends with the input."""
    starting = {}
    for stream in plan.spec.streams:
        if isinstance(stream, KafkaStream) and stream.connector == "spark":
            try:
                starting[stream.table] = starting_offsets(
                    stream, plan.descriptor_sets, plan.spec.rowtime_column
                )
            except KafkaSourceError as error:
                raise DaggerBuildError(f"dagger {plan.name}: {error}") from None
    # A processing-time window runs another operator in a run that flushes: planned again for it too.
    replan = starting or (flushing and _has_proctime_windows(plan.spec))
    return _planned_result(spark, plan, starting, flushing) if replan else result


def _require_kafka_sink_logins(spec: DaggerSpec) -> None:
    """Each at-least-once Kafka sink's cluster takes its login before the query starts (an exactly-once
    sink's driver looks its marker topic up with the same settings at its first batch)."""
    for index, sink in enumerate(spec.sinks):
        if isinstance(sink, KafkaSink) and sink.delivery == "at_least_once":
            try:
                require_login(sink)
            except KafkaSinkError as error:
                raise DaggerBuildError(f"dagger {spec.name}: sinks[{index}]: {error}") from None


def _require_deployment_keys(spec: DaggerSpec) -> None:
    """A stream or sink may leave some keys (a Kafka cluster) to the deployment's resources, but they must
    be known now."""
    components = [
        *((stream, STREAM_KINDS[stream.kind].resource_key) for stream in spec.streams),
        *((sink, SINK_KINDS[sink.kind].resource_key) for sink in spec.sinks),
    ]
    for component, resource_key in components:
        for key in component.deployment_keys:
            if getattr(component, key) is None:
                raise DaggerBuildError(
                    f"dagger {spec.name}: {component.describe()}: {key} is not set (set it in the dagger "
                    f"file, or in the {resource_key} resource of the Dagster deployment)"
                )


def _sink_writer(context: SinkContext) -> SinkWriter:
    """The writer of one sink; client libraries of the other sink kinds are never imported."""
    sink = context.spec.sinks[context.index]
    try:
        return SINK_KINDS[sink.kind].writer_class()(sink, context)
    except (LookupError, ValueError) as error:
        raise DaggerBuildError(
            f"dagger {context.spec.name}: sinks[{context.index}] ({sink.kind}): {error}"
        ) from None


# --------------------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------------------


class _QueryProgress:
    """A query's progress reports and its end, for the runner to poll.

    Classic sessions: a JVM listener (`dagger.jobs.running.QueryProgressFeed`, in the project's jar) keeps
    every report as JSON, taken in one call per poll. A listener written in Python would have each event
    converted field by field through py4j, with the Python driver's lock held while its foreachBatch waits
    (a fifth of the live benchmark's latency). Spark Connect has no JVM here: the query's own recent
    reports are read instead.
    """

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        jvm = getattr(spark, "_jvm", None)  # None on Spark Connect
        self._feed = jvm.dagger.jobs.running.QueryProgressFeed() if jvm is not None else None
        self._last_batch_id = -1

    def attach(self) -> None:
        """Before the query starts, so that no report is missed."""
        if self._feed is not None:
            self._spark._jsparkSession.streams().addListener(self._feed)

    def detach(self) -> None:
        if self._feed is not None:
            self._spark._jsparkSession.streams().removeListener(self._feed)

    def take(self, query: StreamingQuery) -> list[dict]:
        """The query's reports not taken before, oldest first."""
        if self._feed is not None:
            query_id = str(query.id)
            return [report for report in json.loads(self._feed.drain()) if report["id"] == query_id]
        reports = [_connect_report(report) for report in query.recentProgress]
        fresh = [report for report in reports if report["batchId"] > self._last_batch_id]
        if fresh:
            self._last_batch_id = fresh[-1]["batchId"]
        return fresh

    def ended(self, query: StreamingQuery) -> bool:
        if self._feed is not None:
            return bool(self._feed.hasTerminated(str(query.runId)))
        return not query.isActive


def _connect_report(progress: StreamingQueryProgress) -> dict:
    """A Connect query's progress as the JVM reports it: PySpark's Connect client leaves the totals it
    derives from the sources (rows, rates) out of `json`, so they are put back."""
    report = json.loads(progress.json)
    report.setdefault("numInputRows", progress.numInputRows)
    report.setdefault("inputRowsPerSecond", progress.inputRowsPerSecond)
    report.setdefault("processedRowsPerSecond", progress.processedRowsPerSecond)
    return report


# --------------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------------


class DaggerRun:
    """One running dagger: start(), then wait() until it ends or stop() is called from any thread.

    `wait()` sleeps in Python rather than in `awaitTermination()`: an interrupt arriving inside a py4j call
    leaves the connection out of step and `stop()` then hangs.
    """

    def __init__(
        self,
        spark: SparkSession,
        built: BuiltDagger,
        on_progress: Callable[[ProgressReport], None] | None = None,
        bounded: bool | None = None,
    ) -> None:
        self.spark = spark
        self.built = built
        self.on_progress = on_progress
        self.bounded = built.bounded if bounded is None else bounded
        _require_an_end(built.spec, self.bounded)
        # The streams read their watermark from it: it is the spec's, fixed when the dagger is built.
        self.checkpoint_location = built.spec.resolved_checkpoint_location
        self.query: StreamingQuery | None = None
        self.reports: list[ProgressReport] = []
        self._checkpoint_lock = CheckpointLock(self.checkpoint_location, built.spec.name)
        self._progress = _QueryProgress(spark)
        kafka_streams = [stream for stream in built.spec.streams if isinstance(stream, KafkaStream)]
        self._group_offsets = GroupOffsetCommitter(kafka_streams)
        timeouts = {
            key: enrichment.stream_timeout.total_seconds()
            for key, _, enrichment in built.spec.post_processors.keyed_enrichments()
        }
        self.metrics = DaggerMetrics(
            built.spec.name, built.spec.metrics, timeouts, state_rows_counted=state_rows_counted(spark)
        )
        self.metrics_port: int | None = None
        """The Prometheus endpoint's port once started, if `metrics.prometheus_port` is set."""
        self._writer: DataStreamWriter | None = None
        self.late_worker_restarts = 0
        """How often the query was started again because a driver-side Python worker was late."""

    def start(self) -> StreamingQuery:
        spec = self.built.spec
        result = self.built.started_result(self.bounded and spec.resolved_bounded_end == "flush")
        _require_kafka_sink_logins(spec)
        self._progress.attach()
        connector = self.built.connector_sink
        if connector is not None:  # straight from the query to Spark's Kafka sink: no Python per batch
            writer = connector.records(result).writeStream.format("kafka").options(**connector.options)
        else:
            writer = result.writeStream.foreachBatch(self._batch_writer())
        real_time = spec.execution == "real_time" and not self.bounded
        writer = (
            writer.queryName(spec.name)
            .outputMode(output_mode(spec, self.bounded))
            .option("checkpointLocation", self.checkpoint_location)
        )
        if self.bounded:
            writer = writer.trigger(availableNow=True)
        elif real_time:
            writer = writer.trigger(realTime=interval(spec.real_time_checkpoint_interval))
        elif spec.trigger_interval.total_seconds() > 0:
            writer = writer.trigger(processingTime=interval(spec.trigger_interval))
        try:
            self._checkpoint_lock.acquire()
        except CheckpointInUseError as error:
            self._progress.detach()
            raise DaggerBuildError(str(error)) from None
        try:
            # Before the query: a port in use stops the dagger from starting, not a running query's driver.
            self.metrics_port = self.metrics.serve()
        except OSError as error:
            self._progress.detach()
            self._checkpoint_lock.release()
            port = spec.metrics.prometheus_port
            raise DaggerBuildError(f"dagger {spec.name}: metrics.prometheus_port {port}: {error}") from None
        self._writer = writer
        try:
            self.query = _start_query(self.spark, writer, spec.name)
        except (AnalysisException, PySparkException) as error:
            self._progress.detach()
            self._checkpoint_lock.release()
            self.metrics.close()
            raise cannot_run_as_stream(spec, error) from None
        log.info(
            "dagger %s started (query %s, checkpoint %s)", spec.name, self.query.id, self.checkpoint_location
        )
        return self.query

    def _batch_writer(self) -> BatchWriter:
        spec = self.built.spec
        labels = [sink_label(spec, index) for index in range(len(spec.sinks))]
        # On Spark Connect this function is pickled and runs in a Python worker of the server: the run's
        # metrics (an HTTP endpoint, locks) stay in this process, so sink writes are not timed or counted.
        metrics = None if is_spark_connect(self.spark) else self.metrics
        write = _fan_out(self.built.sinks, metrics, labels)
        if not spec.ordered_output:
            return write
        return OrderedOutput(spec.rowtime_column, self.checkpoint_location, spec.name).wrap(write)

    def wait(self, timeout_s: float | None = None, poll_s: float = 0.5) -> bool:
        """Block until the query ends (True) or `timeout_s` passes (False), reporting progress."""
        if self.query is None:
            raise RuntimeError("start() the dagger first")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            while not self._progress.ended(self.query):
                self._drain_progress()
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic())))
            self._drain_progress()
            if not self._restarted_after_a_late_worker():
                break
        self._checkpoint_lock.release()  # the query ended: a restart may take the checkpoint
        self._raise_if_failed()
        return True

    def process_available(self) -> None:
        """Block until every record available now is processed (for tests and bounded checks)."""
        if self.query is None:
            raise RuntimeError("start() the dagger first")
        while True:
            with contextlib.suppress(PySparkException):  # a failed query: _raise_if_failed says why
                self.query.processAllAvailable()
            self._await_progress_of_last_batch()
            if not self._restarted_after_a_late_worker():
                break
        self._raise_if_failed()

    def _await_progress_of_last_batch(self, timeout_s: float = 10.0) -> None:
        """Progress events arrive asynchronously; wait until the last finished batch has reported."""
        last = self.query.lastProgress if self.query is not None else None
        deadline = time.monotonic() + timeout_s
        while True:
            self._drain_progress()
            if last is None or (self.reports and self.reports[-1].batch_id >= last["batchId"]):
                return
            if time.monotonic() > deadline:
                log.warning("progress of batch %s not received within %ss", last["batchId"], timeout_s)
                return
            time.sleep(0.05)

    def stop(self, drain_timeout_s: float = 60.0) -> None:
        """Stop gracefully: let the running micro-batch finish, then stop between batches.

        `StreamingQuery.stop()` alone cancels a running batch; that is safe (the checkpoint replays it)
        but wastes its work and logs cancelled tasks, so the in-flight batch gets `drain_timeout_s`.
        """
        if self.query is not None and self.query.isActive:
            # A real-time batch runs for the whole checkpoint interval while records flow: it is not waited
            # for; stopping it replays its input from the last checkpoint, at least once.
            real_time = self.built.spec.execution == "real_time" and not self.bounded
            deadline = time.monotonic() + (0 if real_time else drain_timeout_s)
            while (
                self.query.isActive
                and self.query.status.get("isTriggerActive")
                and time.monotonic() < deadline
            ):
                time.sleep(0.05)
            # Stopping a real-time batch aborts its tasks and their writes, which Spark logs as errors with
            # stack traces: on a stop the user asked for, that is noise (the checkpoint replays the batch).
            quiet = jvm_loggers_off(self.spark, _CANCELLED_BATCH_LOGGERS) if real_time else None
            with quiet or contextlib.nullcontext():
                self.query.stop()
        # The listener may not have delivered the last batch's progress yet: its report (and the Dagster
        # observation made of it) would be lost.
        self._await_progress_of_last_batch()
        self._group_offsets.close()
        self._checkpoint_lock.release()
        self.metrics.close()
        try:
            self._progress.detach()
        except Exception:  # the session may already be gone at interpreter exit
            log.debug("listener already removed", exc_info=True)

    def _drain_progress(self) -> None:
        if self.query is None:
            return
        for progress in self._progress.take(self.query):
            batch_id = int(progress.get("batchId", -1))
            if self.built.connector_sink is not None:  # written by the query itself, not by `_fan_out`
                rows = int((progress.get("sink") or {}).get("numOutputRows", 0))
                seconds = int((progress.get("durationMs") or {}).get("addBatch", 0)) / 1000
                self.metrics.record_sink_write(
                    sink_label(self.built.spec, 0), batch_id, seconds, Written(max(rows, 0))
                )
            report = ProgressReport.from_progress(progress, self.metrics.take_written(batch_id))
            self.reports.append(report)
            self.metrics.record_progress(progress)
            if report.input_rows:
                for end_offsets in report.end_offsets:
                    self._group_offsets.commit(end_offsets)
            if self.on_progress:
                self.on_progress(report)

    def _restarted_after_a_late_worker(self) -> bool:
        """Start the query again, from its checkpoint, if it failed only because a Python worker of the
        driver was late (at most `LATE_WORKER_RESTARTS` times in a run).

        The driver plans every micro-batch of a Python data source in Python processes of its own, and
        Spark 4.3 gives each a fixed 10 s (not configurable) to connect back: on a machine busy starting
        other JVMs, a worker importing PySpark can take longer. The query then fails before its batch
        commits, so the restart replays the batch, as after a crash; the sinks' writes are idempotent per
        batch. Any other failure, or one more late worker, ends the run as it is.
        """
        error = self.query.exception() if self.query is not None else None
        if error is None or _PYTHON_WORKER_LATE not in str(error):
            return False
        if self.late_worker_restarts >= LATE_WORKER_RESTARTS or self._writer is None:
            return False
        self.late_worker_restarts += 1
        log.warning(
            "dagger %s: a Python worker of the driver was late to connect back; starting the query again "
            "from its checkpoint (%d of %d)",
            self.built.spec.name,
            self.late_worker_restarts,
            LATE_WORKER_RESTARTS,
        )
        self.query = _start_query(self.spark, self._writer, self.built.spec.name)
        return True

    def _raise_if_failed(self) -> None:
        error = self.query.exception() if self.query is not None else None
        if error is not None:
            self._checkpoint_lock.release()  # a failed query has ended: its restart may take the checkpoint
            raise DaggerQueryError(
                f"dagger {self.built.spec.name} stopped: {self._failure(root_cause(str(error)))}"
            )

    def _failure(self, cause: str) -> str:
        """The query's error, naming the sink when Spark's Kafka sink is written by the query itself and its
        producer's error names the sink's topic (the Java client's errors carry no stack trace that would
        tell the sink's tasks from the source's)."""
        if self.built.connector_sink is None:
            return cause
        sink = self.built.spec.sinks[0]
        sink_topic = (
            rf"(?<![\w.-]){re.escape(sink.topic)}(?:-\d+)?(?![\w.-])"  # the topic, or a partition of it
        )
        read_topics = {
            topic for stream in self.built.spec.streams for topic in getattr(stream, "topics", None) or ()
        }
        if sink.topic in read_topics or not re.search(sink_topic, cause):
            return cause
        return f"kafka sink topic {sink.topic!r}: delivery failed: {cause}"


_CANCELLED_BATCH_LOGGERS = [
    f"org.apache.spark.{name}"
    for name in (
        "sql.execution.datasources.v2.WriteToDataSourceV2Exec",
        "sql.execution.datasources.v2.DataWritingSparkTask",
        "util.Utils",
        "scheduler.TaskSetManager",
        "scheduler.DAGScheduler",
    )
]
_PYTHON_WORKER_LATE = "Python worker failed to connect back"
_CONNECT_START_ATTEMPTS = 5
LATE_WORKER_RESTARTS = 3
"""How often a run starts its query again after a late Python worker (`DaggerRun`)."""


_EXCHANGE_REUSE = "spark.sql.exchange.reuse"


def _start_query(spark: SparkSession, writer: DataStreamWriter, dagger: str) -> StreamingQuery:
    """`writer.start()`, tried again when a Spark Connect server's foreachBatch worker was late.

    The server starts one Python worker per query for its foreachBatch function and gives it a fixed 10 s
    (not configurable in Spark 4.3) to connect back; a busy server's worker, importing PySpark's Connect
    client, can take longer. The query has not been created then (nothing is in the checkpoint), so
    starting it again is safe.
    """
    for attempt in range(1, _CONNECT_START_ATTEMPTS + 1):
        try:
            with _without_exchange_reuse(spark):
                return writer.start()
        except PySparkException as error:
            if _PYTHON_WORKER_LATE not in str(error) or attempt == _CONNECT_START_ATTEMPTS:
                raise
            log.warning("dagger %s: the Connect server's foreachBatch worker was late; start again", dagger)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _without_exchange_reuse(spark: SparkSession) -> Iterator[None]:
    """The query starts without Spark's exchange reuse, the session's setting restored after (a query keeps
    the settings of its start). Spark 4.3 moves no watermark through a reused exchange: when two stateful
    operators read the same shuffle (Nexmark q5's two identical window counts), the second one's watermark
    stays 0, so the aggregation above it never emits a row."""
    conf = spark.conf
    earlier = conf.get(_EXCHANGE_REUSE, None)
    conf.set(_EXCHANGE_REUSE, "false")
    try:
        yield
    finally:
        if earlier is None:
            conf.unset(_EXCHANGE_REUSE)
        else:
            conf.set(_EXCHANGE_REUSE, earlier)


def sink_label(spec: DaggerSpec, index: int) -> str:
    """How metrics and observations name a sink: `<index>_<kind>`, as its Dagster asset."""
    return f"{index}_{spec.sinks[index].kind}"


def _fan_out(
    sinks: Sequence[SinkWriter], metrics: DaggerMetrics | None, labels: Sequence[str]
) -> BatchWriter:
    """One micro-batch to every sink, each write timed and counted in `metrics` (if any) under its label.

    The batch must be computed in full exactly once: that is when the source is read to its planned end,
    invalid records are counted and the watermark advances. A lone sink that reads the whole batch does
    that itself; otherwise the batch is cached, materialised, and every sink reads the cache.
    """

    def write(sink: SinkWriter, label: str, batch: DataFrame, batch_id: int) -> None:
        if metrics is None:
            sink.write(batch, batch_id)
            return
        started = time.perf_counter()
        try:
            written = sink.write(batch, batch_id)
        except BaseException as error:
            metrics.record_sink_write(label, batch_id, time.perf_counter() - started, error=error)
            raise
        metrics.record_sink_write(label, batch_id, time.perf_counter() - started, written)

    if len(sinks) == 1 and sinks[0].reads_whole_batch:
        return lambda batch, batch_id: write(sinks[0], labels[0], batch, batch_id)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            batch.count()
            for sink, label in zip(sinks, labels, strict=True):
                write(sink, label, batch, batch_id)
        finally:
            batch.unpersist()

    return write_batch

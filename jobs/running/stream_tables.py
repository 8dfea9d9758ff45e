"""Each stream as the table the dagger's SQL reads.

In the order data flows: the source (Spark's Kafka connector, or the project's Python data source for Kafka
and Parquet) -> the type handler (decoding, only the fields the SQL and pre-processors read) -> invalid and
late records counted and removed -> pre-processors -> the event-time watermark.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from datetime import timedelta

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from jobs.engine.connect import is_spark_connect
from jobs.engine.kafka_java_client import JavaClientSettingError
from jobs.engine.object_store import s3a_settings
from jobs.engine.spark import register_data_source
from jobs.expectations.config import Expectation
from jobs.expectations.query import ExpectationError, apply_expectations
from jobs.metrics.stages import INVALID_RECORDS_METRIC
from jobs.model.errors import DaggerBuildError
from jobs.model.plan import DaggerPlan, StreamPlan
from jobs.model.registry import STREAM_KINDS
from jobs.model.spec import DaggerSpec
from jobs.processors.context import ProcessorError, TransformContext
from jobs.processors.transformers import apply_transformer
from jobs.sources.config import StreamConfig
from jobs.sources.kafka import spark_connector as kafka_connector
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.offsets import Offsets
from jobs.sources.stream_batches import (
    FINAL_ROWTIME,
    LATE_RECORD_COLUMN,
    VALID_RECORD_COLUMN,
    StreamLayout,
)

log = logging.getLogger(__name__)

DAGGER_VALIDATION_COLUMN = "__internal_validation_field__"


def stream_view_schema(plan: DaggerPlan, planned: StreamPlan) -> StructType:
    """The columns the SQL sees for a stream: every message field, the source's metadata, the rowtime."""
    stream = planned.config
    reader = (
        STREAM_KINDS[stream.kind]
        .data_source_class()
        .reader_class(stream, plan.descriptor_sets, plan.spec.rowtime_column, records=planned.records)
    )
    if stream.row_layout == "dagger":  # Dagger shows its validity flag (always true once invalid rows stop)
        return StructType(
            [
                StructField(DAGGER_VALIDATION_COLUMN, field.dataType, field.nullable)
                if field.name == VALID_RECORD_COLUMN
                else field
                for field in reader.layout.spark_schema
                if field.name != LATE_RECORD_COLUMN
            ]
        )
    return StructType(
        [
            field
            for field in reader.layout.spark_schema
            if field.name not in (VALID_RECORD_COLUMN, LATE_RECORD_COLUMN)
        ]
    )


def stream_frame(
    spark: SparkSession,
    plan: DaggerPlan,
    planned: StreamPlan,
    project: bool,
    starting: Offsets | None,
    flushing: bool = False,
) -> DataFrame:
    """The rows of a stream as its table in the SQL: read, judged, pre-processed and checked by its
    expectations; `project` reads only the fields the plan says the SQL does. A stream on Spark's Kafka
    connector starts at `starting` (`jobs.sources.kafka.spark_connector.starting_offsets`): without it,
    the frame is only good for analysis; `flushing`: for a bounded run that flushes, it ends with the row
    at the end of time (the Python sources end so in every bounded run of a dagger that flushes)."""
    spec, stream = plan.spec, planned.config
    # The names of `sql` as written: a Flink query's translation reads no field its text does not name.
    fields, metadata = (_listed(planned.fields), _listed(planned.metadata)) if project else (None, None)
    data_source = STREAM_KINDS[stream.kind].data_source_class()
    try:  # event-time field and column names are checked here, not in a failing task
        layout = data_source.reader_class(
            stream, plan.descriptor_sets, spec.rowtime_column, fields, metadata, records=planned.records
        ).layout
    except (LookupError, ValueError) as error:
        raise DaggerBuildError(f"dagger {spec.name}: stream {stream.table!r}: {error}") from None
    log.debug("stream %s columns: %s", stream.table, ", ".join(layout.schema.names))
    if isinstance(stream, KafkaStream) and stream.connector == "spark":
        frame = _jvm_kafka_frame(spark, spec, stream, planned, layout, starting, flushing)
    else:
        frame = _python_source_frame(spark, plan, planned, fields, metadata)
    frame = _without_flags(spec, stream, frame)
    position = plan.streams.index(planned)
    for index, step in enumerate(stream.pre_processors):
        key = f"streams[{position}].pre_processors[{index}]"
        with processor_errors():
            frame = apply_transformer(frame, step, transform_context(spark, plan, key, stream.table))
    dead_letters = None
    if is_spark_connect(spark) and any(rule.action == "dead_letter" for rule in stream.expectations):
        raise DaggerBuildError(
            f"dagger {spec.name}: stream {stream.table!r}: expectations with action 'dead_letter' copy rows "
            "through a JVM function, which Spark Connect does not reach; use 'drop'"
        )
    if isinstance(stream, KafkaStream) and not is_spark_connect(spark):

        def dead_letters(expectation: Expectation) -> str:
            return kafka_connector.register_dead_letter_writer(
                spark,
                stream,
                expectation.dead_letter_topic,
                f"expectation_{expectation.name}",
                expectation.name,
            )

    where = f"dagger {spec.name}: stream {stream.table!r}"
    try:
        return apply_expectations(frame, stream.expectations, stream.table, where, dead_letters)
    except ExpectationError as error:
        raise DaggerBuildError(str(error)) from None


def _listed(names: tuple[str, ...] | None) -> list[str] | None:
    return None if names is None else list(names)


def _jvm_kafka_frame(
    spark: SparkSession,
    spec: DaggerSpec,
    stream: KafkaStream,
    planned: StreamPlan,
    layout: StreamLayout,
    starting: Offsets | None,
    flushing: bool,
) -> DataFrame:
    if is_spark_connect(spark):
        raise DaggerBuildError(
            f"dagger {spec.name}: stream {stream.table!r}: connector 'spark' registers its decoder in the "
            "session's JVM, which a Spark Connect session does not reach; use connector 'python'"
        )
    try:
        return kafka_connector.stream_frame(
            spark, stream, planned.records, layout, spec.resolved_checkpoint_location, starting, flushing
        )
    except JavaClientSettingError as error:
        raise DaggerBuildError(f"dagger {spec.name}: stream {stream.table!r}: {error}") from None


def _python_source_frame(
    spark: SparkSession,
    plan: DaggerPlan,
    planned: StreamPlan,
    fields: list[str] | None,
    metadata: list[str] | None,
) -> DataFrame:
    spec, stream = plan.spec, planned.config
    data_source = STREAM_KINDS[stream.kind].data_source_class()
    register_data_source(spark, data_source)
    return (
        spark.readStream.format(data_source.name())
        .option("stream", stream.model_dump_json())
        .option("records", planned.records.to_json())
        .option("descriptor_sets", plan.descriptor_sets)
        .option("rowtime_column", spec.rowtime_column)
        .option("fields", json.dumps(fields))
        .option("metadata", json.dumps(metadata))
        .option("checkpoint", spec.resolved_checkpoint_location)
        .option("object_store", json.dumps(s3a_settings(spark)))
        .option("bounded_end", spec.resolved_bounded_end)
        .load()
    )


def _without_flags(spec: DaggerSpec, stream: StreamConfig, frame: DataFrame) -> DataFrame:
    """The stream's rows for the SQL: invalid and late ones counted, then removed with their flags; the row
    that ends a bounded run's input moves the watermark and goes (see `jobs.sources.stream_batches`)."""
    # A condition on the rowtime: Spark's optimizer keeps it above the watermark, which the row must reach.
    record = ~F.col(spec.rowtime_column).eqNullSafe(F.lit(FINAL_ROWTIME))
    # Counted here (visible in every progress report), then removed with the flags before SQL sees them.
    frame = frame.observe(
        f"{INVALID_RECORDS_METRIC}.{stream.table}",
        F.count(F.when(~F.col(VALID_RECORD_COLUMN), 1)).alias("count"),
        F.count(F.when(record, 1)).alias("records"),
        F.count(F.when(F.col(LATE_RECORD_COLUMN), 1)).alias("late"),
        F.count(F.when(F.col(VALID_RECORD_COLUMN) & ~F.col(LATE_RECORD_COLUMN) & record, 1)).alias("passed"),
    )
    frame = frame.where(F.col(VALID_RECORD_COLUMN) & ~F.col(LATE_RECORD_COLUMN)).drop(LATE_RECORD_COLUMN)
    if stream.row_layout == "dagger":  # Dagger's rows keep the flag, just before the rowtime
        frame = frame.withColumnRenamed(VALID_RECORD_COLUMN, DAGGER_VALIDATION_COLUMN)
    else:
        frame = frame.drop(VALID_RECORD_COLUMN)
    return (
        _with_computed_columns(spec, stream, frame)
        .withWatermark(spec.rowtime_column, interval(spec.watermark_delay))
        .where(record)
    )


def _with_computed_columns(spec: DaggerSpec, stream: StreamConfig, frame: DataFrame) -> DataFrame:
    """The stream's `computed_columns` after the record's, and its rowtime when that is one of them. A
    computed event time keeps the source's rowtime column (`StreamConfig.source_rowtime_column`): NULL for
    every record, `FINAL_ROWTIME` for the row that ends a bounded run's input, whose record columns are
    all NULL."""
    for name, expression in stream.computed_columns.items():
        try:
            column = F.expr(expression)
            if name == stream.event_time_field:
                column = F.coalesce(F.col(f"`{spec.rowtime_column}`"), column)
            frame = frame.withColumn(name, column)
        except AnalysisException as error:
            raise DaggerBuildError(
                f"dagger {spec.name}: stream {stream.table!r}: computed column {name!r}: {error}"
            ) from None
    if stream.computes_event_time and stream.event_time_field != spec.rowtime_column:
        frame = frame.withColumn(spec.rowtime_column, F.col(f"`{stream.event_time_field}`"))
    return frame


def transform_context(spark: SparkSession, plan: DaggerPlan, key: str, table: str) -> TransformContext:
    """What a processor at `key` (in the dagger file) over `table` gets to work with."""
    spec = plan.spec
    return TransformContext(
        spark, spec.name, key, table, spec.rowtime_column, plan.registry, count_rows=spec.metrics.stage_rows
    )


@contextlib.contextmanager
def processor_errors() -> Iterator[None]:
    """A processor that cannot be applied makes the dagger unable to start (a deterministic failure)."""
    try:
        yield
    except ProcessorError as error:
        raise DaggerBuildError(str(error)) from None


def interval(delay: timedelta) -> str:
    """A duration as Spark's interval text (watermarks, triggers)."""
    return f"{int(delay.total_seconds() * 1000)} milliseconds"

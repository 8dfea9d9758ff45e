"""The dagger's plan: the file resolved once, into what the layers that build its query need.

A `DaggerSpec` says what the user wrote; building it needs more, found by reading schemas and parsing SQL:
each stream's connector and pinned schema version, how its records decode, their columns and the ones the
query reads, the query prepared for Spark (a Flink query's translation and its OVER and Top-N views), and
the functions it calls. `resolve_plan` finds each of them once, raising the errors that name the stream or
key at fault, and the runner hands the plan (or the stream's part of it) down, so no layer below reads a
schema or the SQL again. Everything in it is immutable.

The plan resolves records through the codec's type handler (`jobs.codec.formats`), as the SQL stage
prepares queries through the Flink translator and Dagger's functions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.codec.formats import RecordFormat, column_names, pinned, record_format
from jobs.model import sql as sql_stage
from jobs.model.errors import DaggerBuildError
from jobs.model.registry import STREAM_KINDS
from jobs.model.schema_registry import SchemaRegistry, encode_descriptor_sets
from jobs.model.spec import DaggerSpec
from jobs.sinks.kafka.config import KafkaSink
from jobs.sources.config import StreamConfig
from jobs.sources.kafka.config import KafkaStream
from jobs.udfs.registration import words

if TYPE_CHECKING:
    from jobs.raystack.flink_sql import OverView

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamPlan:
    """One stream, resolved: what its source and its table in the SQL are built from."""

    config: StreamConfig
    """The stream as it runs: a Kafka stream's `connector` chosen for the session, an Avro stream's
    latest schema version pinned (`jobs.codec.formats.pinned`)."""
    records: RecordFormat
    """How its records decode."""
    columns: tuple[str, ...]
    """The columns its records give, in order."""
    fields: tuple[str, ...] | None
    """The record fields decoded: those the query, the computed columns, the expectations and the
    pre-processors may read, and the event-time field (None: every field)."""
    metadata: tuple[str, ...] | None
    """The source's metadata columns emitted, by the same rule (None: every one)."""

    @property
    def table(self) -> str:
        return self.config.table


@dataclass(frozen=True)
class DaggerPlan:
    """A dagger resolved once (`resolve_plan`): what building its query needs."""

    spec: DaggerSpec
    """The dagger file as it runs: its streams and sinks those of the plan (connectors chosen, schema
    versions pinned)."""
    registry: SchemaRegistry
    """Its protobuf messages, loaded from `schema_registry.descriptor_sets` (or given)."""
    descriptor_sets: str
    """The registry's descriptor sets as the sources' option carries them (`encode_descriptor_sets`)."""
    streams: tuple[StreamPlan, ...]
    sql: sql_stage.PreparedSql
    """The query parsed once and prepared for Spark: a Flink query's translation."""
    over_views: tuple[OverView, ...]
    """The OVER and Top-N views a Flink query reads, registered before it is analysed."""
    function_names: frozenset[str] | None
    """The words of every SQL text the dagger analyses (the functions it calls are among them); None when
    a step may call any function (user code)."""

    @property
    def name(self) -> str:
        return self.spec.name


def resolve_plan(spec: DaggerSpec, spark_connect: bool, registry: SchemaRegistry | None = None) -> DaggerPlan:
    """The plan of `spec` for a session (`spark_connect`: a Spark Connect session); `registry` when the
    caller has loaded the descriptor sets already. Raises `DaggerBuildError` naming the dagger and the
    stream at fault."""
    spec = _with_pinned_streams(_with_chosen_connectors(spec, spark_connect))
    if registry is None:
        registry = SchemaRegistry.load(
            spec.schema_registry.descriptor_sets,
            spec.schema_registry.fetch_timeout.total_seconds(),
            spec.schema_registry.fetch_headers,
        )
    descriptor_sets = encode_descriptor_sets(registry.serialized_descriptor_sets)
    prepared = spec.prepared_sql
    streams = tuple(_stream_plan(spec, stream, descriptor_sets, prepared) for stream in spec.streams)
    return DaggerPlan(
        spec, registry, descriptor_sets, streams, prepared, spec.over_views, _function_names(spec, prepared)
    )


def _with_chosen_connectors(spec: DaggerSpec, spark_connect: bool) -> DaggerSpec:
    """The spec with every Kafka stream's and sink's `connector` set (see their `connector` keys)."""
    real_time = spec.execution == "real_time"
    streams = [
        stream.with_chosen_connector(spark_connect, real_time) if isinstance(stream, KafkaStream) else stream
        for stream in spec.streams
    ]
    sinks = [
        sink.with_chosen_connector(spark_connect) if isinstance(sink, KafkaSink) else sink
        for sink in spec.sinks
    ]
    for index, stream in enumerate(streams):
        if isinstance(stream, KafkaStream):
            log.info(
                "dagger %s: streams[%d] (%s) reads through connector %r",
                spec.name,
                index,
                stream.table,
                stream.connector,
            )
    return spec.model_copy(update={"streams": streams, "sinks": sinks})


def _with_pinned_streams(spec: DaggerSpec) -> DaggerSpec:
    """The spec with each stream's columns fixed as they are at start (see `jobs.codec.formats.pinned`)."""
    streams = []
    for stream in spec.streams:
        try:
            streams.append(pinned(stream))
        except LookupError as error:
            raise DaggerBuildError(f"dagger {spec.name}: {stream.describe()}: {error}") from None
    return spec.model_copy(update={"streams": streams})


def _stream_plan(
    spec: DaggerSpec, stream: StreamConfig, descriptor_sets: str, sql: sql_stage.PreparedSql
) -> StreamPlan:
    """The stream's records, resolved: the message or schema they decode with, and their columns."""
    try:
        # The JVM reads an Avro stream of Spark's connector with every writer schema it may meet.
        in_the_jvm = isinstance(stream, KafkaStream) and stream.connector == "spark"
        records = record_format(stream, with_writers=in_the_jvm)
        columns = column_names(records, descriptor_sets)
    except (LookupError, ValueError) as error:
        raise DaggerBuildError(f"dagger {spec.name}: stream {stream.table!r}: {error}") from None
    fields, metadata = columns_read(stream, columns, sql)
    return StreamPlan(stream, records, tuple(columns), fields, metadata)


def columns_read(
    stream: StreamConfig, columns: list[str], sql: sql_stage.PreparedSql | str
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The record fields (of `columns`) and the source's metadata columns that the query `sql` and the
    stream's computed columns, expectations and pre-processors may read (None: every one); only those are
    built and passed to Spark."""
    metadata = STREAM_KINDS[stream.kind].data_source_class().reader_class.metadata_schema.names
    names = [*columns, *metadata]
    # A computed column reads the record's fields as an expectation's condition does.
    conditions = [*stream.computed_columns.values(), *(rule.condition for rule in stream.expectations)]
    read = sql_stage.referenced_fields(sql, names)
    for condition in conditions:
        read_by_condition = sql_stage.referenced_fields(f"SELECT {condition}", names)
        read = None if read is None or read_by_condition is None else [*read, *read_by_condition]
    for step in stream.pre_processors:
        read_by_step = step.columns_read(names)
        if read is None or read_by_step is None:
            return None, None
        read = [*read, *read_by_step]
    if read is None:
        return None, None
    event_time = stream.event_time_field.split(".")[0]
    return (
        tuple(name for name in columns if name in read or name == event_time),
        tuple(name for name in metadata if name in read),
    )


def _function_names(spec: DaggerSpec, sql: sql_stage.PreparedSql) -> frozenset[str] | None:
    """The words of every SQL text the dagger analyses (see `DaggerPlan.function_names`)."""
    steps = [step for stream in spec.streams for step in stream.pre_processors]
    # The views' texts are the translator's, written from the query's tree: their words are the names.
    named = [
        sql_stage.named_words(sql),
        *(words(view.source_sql) for view in spec.over_views),
        *(step.sql_words() for step in (*steps, *spec.post_processors.transformers)),
    ]
    return None if None in named else frozenset().union(*named)

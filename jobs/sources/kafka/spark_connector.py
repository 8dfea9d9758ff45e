"""Kafka stream on Spark's own Kafka connector, decoded in the JVM: the records never enter Python.

It gives the SQL the columns the Python data source (`reader.py`) gives, from the same `StreamLayout`: the
records' fields (only those the query reads), the metadata columns, the two flags and the rowtime. Python
only plans it: the starting offsets are worked out once, on the driver, by the Python source's own rules
(rewinds, the group's committed offsets, `auto_offset_reset`), and handed to the connector, which keeps
every later position in the checkpoint.

Chosen per stream with `connector: spark`, for protobuf, JSON and Avro records. Invalid and late records
are judged, counted and dead-lettered in the JVM too, by the same policies and with the same headers.

A bounded run that flushes (`DaggerSpec.bounded_end` `flush`) reads through the JVM module's wrapper of the
connector's source (`FlushingKafkaSource.java`), with the same options: once it has read what there was
when the run started, it adds one micro-batch of one row, every column NULL, which the decoding here turns
into the row at `FINAL_ROWTIME` that ends the input, as the Python sources' (`jobs.sources.stream_batches`):
valid, not late, its record and metadata columns NULL. Every other run reads through Spark's source as is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from jobs.codec.avro import NOT_WIRE_FORMAT
from jobs.codec.formats import RecordFormat
from jobs.codec.jvm_protobuf import register_decoder
from jobs.codec.protobuf import ProtoDecoder
from jobs.engine.kafka_java_client import java_client_settings
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.offsets import Offsets
from jobs.sources.kafka.reader import KafkaStreamReader
from jobs.sources.stream_batches import FINAL_ROWTIME, LATE_RECORD_COLUMN, VALID_RECORD_COLUMN, StreamLayout

_RAW_RECORD = ("value", "key", "topic", "partition", "offset")
_FLUSHING_SOURCE = "dagger.jobs.sources.kafka.FlushingKafkaSource"
_WATERMARK = "__watermark"
_METADATA_COLUMNS = {
    "kafka_topic": "topic",
    "kafka_partition": "partition",
    "kafka_offset": "offset",
    "kafka_timestamp": "timestamp",
    "kafka_key": "key",
}


def starting_offsets(stream: KafkaStream, descriptor_sets: str, rowtime_column: str) -> Offsets:
    """Where `stream` starts in a new checkpoint, by the Python source's rules, asked of the broker."""
    return KafkaStreamReader(stream, descriptor_sets, rowtime_column).initialOffset()


def connector_options(stream: KafkaStream, starting: Offsets | None) -> dict[str, str]:
    """The connector's options for `stream`, starting (in a new checkpoint) at `starting`; without it, the
    options of a frame that is only analysed, never run."""
    options = {
        "kafka.bootstrap.servers": str(stream.bootstrap_servers),
        # The connector's consumers only assign() and never commit; each query names its groups
        # `<prefix>-<unique id>`, so ACLs granted on the prefix of the Python source's group cover them.
        "groupIdPrefix": stream.group_id or f"dagger-{stream.table}",
        "kafka.default.api.timeout.ms": str(int(stream.broker_timeout.total_seconds() * 1000)),
        "kafkaConsumer.pollTimeoutMs": str(int(stream.broker_timeout.total_seconds() * 1000)),
        # The Java client's default (500 ms) would hold every fetch of a quiet topic that long; the Python
        # source waits 10 ms too.
        "kafka.fetch.max.wait.ms": "10",
        # The connector asks the broker for the partition's offset range after every poll (two requests),
        # so the Java client's default of 500 records a poll left a read of 1,000,000 records waiting on
        # round trips most of its time (in a profile of the filter benchmark); a poll takes what is there.
        "kafka.max.poll.records": "20000",
        "kafka.max.partition.fetch.bytes": str(8 << 20),
        "includeHeaders": "false",
    }
    if starting is not None:
        options["startingOffsets"] = json.dumps(starting)
    if stream.topics is not None:
        options["subscribe"] = ",".join(stream.topics)
    else:
        options["subscribePattern"] = str(stream.topic_pattern)
    if stream.max_records_per_batch:
        options["maxOffsetsPerTrigger"] = str(stream.max_records_per_batch)
    java_settings = java_client_settings(stream.consumer_config, "consumer_config")
    options.update({f"kafka.{name}": value for name, value in java_settings.items()})
    return options


def stream_frame(
    spark: SparkSession,
    stream: KafkaStream,
    records: RecordFormat,
    layout: StreamLayout,
    checkpoint: str,
    starting: Offsets | None,
    flushing: bool = False,
) -> DataFrame:
    """The stream's rows, in the columns of `layout.spark_schema`, read and decoded (as `records` says)
    in the JVM from `starting` (see `connector_options`); late records are judged by the watermark of
    `checkpoint`'s running batch. `flushing`: the run is a bounded run that flushes, whose input ends
    with the row at `FINAL_ROWTIME` (see the module's docstring)."""
    source = _FLUSHING_SOURCE if flushing else "kafka"
    raw = spark.readStream.format(source).options(**connector_options(stream, starting)).load()
    # The wrapper's row that ends the input is the one without an offset: every record has one.
    final = _FinalRow(F.col("offset").isNull() if flushing else None)
    record_type = StructType(layout.spark_schema.fields[: len(layout.decoder.schema)])
    record = _record_decoder(spark, stream, records, layout, record_type)
    steps = dict(record.steps)
    if stream.late_records.action != "keep":  # once per record, however often the flags read it
        steps[_WATERMARK] = F.call_function(_register_batch_watermark(spark, stream, checkpoint))
    kept = ("value", *_METADATA_COLUMNS.values(), *steps)
    for name, step in steps.items():  # in order: a step may read the one before
        raw = raw.withColumn(name, step)
    decoded = raw.select(final.either(F.lit(None), record.value).alias("__record"), *map(F.col, kept))
    # The record's own event-time column, when the source appends none, holds the final row's time.
    columns = [
        final.either(F.lit(FINAL_ROWTIME), F.col(f"__record.{field.name}")).alias(field.name)
        if field.name == layout.event_time_field and layout.rowtime_column is None
        else F.col(f"__record.{field.name}").alias(field.name)
        for field in record_type
    ]
    columns += [F.col(_METADATA_COLUMNS[name]).alias(name) for name in layout.metadata.names]
    # A computed event time is filled after the source (`StreamConfig.computes_event_time`), which keeps
    # every record (its late_records action is `keep`).
    rowtime = None if layout.event_time_field is None else _rowtime(record_type, layout.event_time_field)
    late = F.lit(False) if rowtime is None else _late(spark, stream, rowtime)
    columns += [
        final.either(F.lit(True), _valid(spark, stream, record.error)).alias(VALID_RECORD_COLUMN),
        final.either(F.lit(False), late).alias(LATE_RECORD_COLUMN),
    ]
    if layout.rowtime_column is not None:  # NULL for a computed event time, filled after the source
        rowtime = F.lit(None).cast("timestamp") if rowtime is None else rowtime
        columns.append(final.either(F.lit(FINAL_ROWTIME), rowtime).alias(layout.rowtime_column))
    return decoded.select(*columns)


@dataclass(frozen=True)
class _FinalRow:
    """Which row ends a flushing bounded run's input (None: the run has no such row)."""

    condition: Column | None

    def either(self, value: Column, column: Column) -> Column:
        """`value` for the row that ends the input, else `column` (never evaluated for that row: it neither
        decodes, judges nor dead-letters the row)."""
        return column if self.condition is None else F.when(self.condition, value).otherwise(column)


@dataclass(frozen=True)
class _RecordDecoder:
    value: Column
    """The record of `value` as a struct of the stream's columns; NULL when it is not a valid record."""
    error: Column
    """Why `value` is not a valid record (evaluated only for those, under `fail` and `dead_letter`)."""
    steps: dict[str, Column] = field(default_factory=dict)
    """Columns computed first, which `value` and `error` read (each evaluated once per record)."""


def _record_decoder(
    spark: SparkSession,
    stream: KafkaStream,
    records: RecordFormat,
    layout: StreamLayout,
    record_type: StructType,
) -> _RecordDecoder:
    """Decoding in the JVM: protobuf by the project's codec (a function registered per stream), JSON by
    Spark's `from_json` in the columns of the stream's schema file, Avro by Spark's `from_avro`."""
    if stream.format == "avro":
        return _avro_record_decoder(stream, records, record_type)
    if stream.format == "json":
        return _json_record_decoder(record_type)
    decoder = layout.decoder
    assert isinstance(decoder, ProtoDecoder)
    function = f"dagger_decode_{stream.table}"
    register_decoder(spark, function, decoder.descriptor, record_type)
    return _RecordDecoder(
        F.call_function(function, F.col("value")), F.call_function(f"{function}_error", F.col("value"))
    )


def _json_record_decoder(record_type: StructType) -> _RecordDecoder:
    """One JSON object per record; a record that is not one with values of these types keeps its text in
    the corrupt-record column."""
    corrupt = "__corrupt_record"
    parsed = F.from_json(
        F.col("value").cast("string"),
        StructType([*record_type.fields, StructField(corrupt, StringType())]),
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": corrupt},
    )
    valid = parsed.isNotNull() & parsed[corrupt].isNull()
    return _RecordDecoder(
        F.when(valid, parsed.dropFields(corrupt)),
        F.lit("not one JSON object with values of the schema's types"),
    )


def _avro_record_decoder(
    stream: KafkaStream, records: RecordFormat, record_type: StructType
) -> _RecordDecoder:
    """Confluent wire-format Avro, each record read with the writer schema of its id and resolved to the
    reader schema (the stream's pinned version), as the Python decoder resolves them: a reader field its
    writer did not have is NULL.

    The writer schemas are the subject's versions when the dagger's plan is resolved, as it is built to
    start (`jobs.model.plan`). A record of another schema id
    cannot be read in the JVM, so it stops the query whatever the invalid-record policy (it is not lost:
    a restart, which looks the versions up again, reads it); a record that is not in the wire format, or
    whose datum its schema cannot read, is invalid.
    """
    assert records.schema is not None
    reader = json.loads(records.schema)
    writers = {schema_id: json.loads(schema) for schema_id, schema in records.writer_schemas}
    framed = (F.length("value") >= 5) & (F.hex(F.substring("value", 1, 1)) == "00")
    schema_id = F.when(framed, F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("long"))
    datum = F.expr("substring(value, 6)")
    # PERMISSIVE: a datum its schema cannot read gives a row of NULLs instead of failing the task.
    options = {"avroSchema": json.dumps(reader), "mode": "PERMISSIVE"}
    unknown = F.format_string(
        f"stream {stream.table!r}: %s[%d]@%d: schema id %d is not a version of subject "
        f"{stream.schema_subject!r} as the dagger started ({', '.join(map(str, sorted(writers)))}); "
        "restart the dagger to read it",
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("__avro_id"),
    )
    read = F.when(F.col("__avro_id").isNull(), F.lit(None))
    for writer_id, writer in writers.items():
        read = read.when(F.col("__avro_id") == writer_id, from_avro(datum, json.dumps(writer), options))
    read = read.otherwise(F.raise_error(unknown))
    written_by = {
        writer_id: {item["name"] for item in writer["fields"]} for writer_id, writer in writers.items()
    }
    columns = []
    for column in record_type:
        lacking = [writer_id for writer_id, names in written_by.items() if column.name not in names]
        value = F.col("__avro")[column.name]
        if lacking:
            value = F.when(~F.col("__avro_id").isin(lacking), value)
        columns.append(value.alias(column.name))
    # A datum read gives at least one field that is not NULL: every field NULL is PERMISSIVE's unreadable.
    read_any = F.lit(False)
    for item in reader["fields"]:
        read_any = read_any | F.col("__avro")[item["name"]].isNotNull()
    return _RecordDecoder(
        F.when(F.col("__avro").isNotNull() & read_any, F.struct(*columns)),
        F.when(F.col("__avro_id").isNull(), F.lit(NOT_WIRE_FORMAT)).otherwise(
            F.format_string("not a datum of schema id %d", F.col("__avro_id"))
        ),
        {"__avro_id": schema_id, "__avro": read},
    )


def _too_large(stream: KafkaStream) -> Column:
    limit = stream.invalid_records.max_record_bytes
    return F.length("value") > limit if limit is not None else F.lit(False)


def _readable(stream: KafkaStream) -> Column:
    """Whether a record decoded and is within `max_record_bytes`: the validity flag without its policy."""
    return F.col("__record").isNotNull() & ~_too_large(stream)


def _valid(spark: SparkSession, stream: KafkaStream, error: Column) -> Column:
    """Whether a record decoded (and is within `max_record_bytes`). An invalid record fails the query under
    the `fail` policy, naming where it is and why, and is copied to the dead-letter topic under
    `dead_letter`."""
    limit = stream.invalid_records.max_record_bytes
    too_large = _too_large(stream)
    valid = _readable(stream)
    action = stream.invalid_records.action
    if action == "drop":
        return valid
    reason = F.when(
        too_large,
        F.format_string(
            f"record of %d bytes is larger than invalid_records.max_record_bytes ({limit})", F.length("value")
        ),
    ).otherwise(error)
    if action == "dead_letter":
        writer = register_dead_letter_writer(
            spark, stream, stream.invalid_records.dead_letter_topic, "invalid"
        )
        no_time = F.lit(None).cast("long")
        copied = F.call_function(writer, *map(F.col, _RAW_RECORD), reason, no_time, no_time)
        return F.when(valid, F.lit(True)).otherwise(~copied)
    message = F.format_string(
        f"stream {stream.table!r}: %s[%d]@%d: record is not a valid {stream.records()}: %s (set "
        "invalid_records.action to 'drop' or 'dead_letter' to skip such records)",
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        reason,
    )
    return F.when(valid, F.lit(True)).otherwise(F.raise_error(message).cast("boolean"))


def _late(spark: SparkSession, stream: KafkaStream, rowtime: Column) -> Column:
    """Whether a valid record's event time is before the watermark its batch runs with (never under the
    `keep` policy, nor before any event time was seen). A late record is copied to the late-record
    dead-letter topic under `dead_letter`."""
    action = stream.late_records.action
    if action == "keep":
        return F.lit(False)
    watermark = F.col(_WATERMARK)
    late = _readable(stream) & (watermark > 0) & (F.unix_micros(rowtime) < watermark)
    if action == "drop":
        return late
    writer = register_dead_letter_writer(spark, stream, stream.late_records.dead_letter_topic, "late")
    copied = F.call_function(
        writer, *map(F.col, _RAW_RECORD), F.lit(None).cast("string"), F.unix_micros(rowtime), watermark
    )
    return F.when(late, copied).otherwise(F.lit(False))


def _register_batch_watermark(spark: SparkSession, stream: KafkaStream, checkpoint: str) -> str:
    """Registers the function giving the running batch's watermark (`BatchWatermark.java`), read from the
    checkpoint's offset log as the Python source reads it, and gives its name."""
    name = f"dagger_watermark_{stream.table}"
    watermark_class = spark._jvm.dagger.jobs.sources.kafka.BatchWatermark  # type: ignore[attr-defined]
    watermark_class.register(spark._jsparkSession, name, watermark_class(checkpoint))  # type: ignore[attr-defined]
    return name


def register_dead_letter_writer(
    spark: SparkSession, stream: KafkaStream, topic: str | None, kind: str, expectation: str | None = None
) -> str:
    """Registers a dead-letter writer of the stream's `kind` of skipped records (`DeadLetterWriter.java`) and
    gives its function's name: it produces to `topic` with the stream's bootstrap servers and security
    settings, as the Python source does; `expectation` names the expectation whose rows it copies."""
    settings = {
        name: value
        for name, value in java_client_settings(stream.consumer_config, "consumer_config").items()
        if name.startswith(("security.", "sasl.", "ssl."))
    }
    settings["bootstrap.servers"] = str(stream.bootstrap_servers)
    name = f"dagger_dead_letter_{kind}_{stream.table}"
    writer_class = spark._jvm.dagger.jobs.sources.kafka.DeadLetterWriter  # type: ignore[attr-defined]
    writer = writer_class(stream.table, topic, settings, expectation)
    writer_class.register(spark._jsparkSession, name, writer)  # type: ignore[attr-defined]
    return name


def _rowtime(record_type: StructType, event_time_field: str) -> Column:
    """The event-time field as a timestamp (the epoch when a record has none, as Dagger does); in Dagger's
    layout the field is a STRUCT<seconds, nanos>."""
    field = F.col(f"__record.{event_time_field}")
    data_type: Any = record_type
    for name in event_time_field.split("."):
        data_type = data_type[name].dataType
    if not isinstance(data_type, TimestampType):
        field = F.timestamp_micros(field["seconds"] * 1_000_000 + F.floor(field["nanos"] / 1000))
    return F.coalesce(field, F.lit(0).cast("timestamp"))

"""Kafka stream on Spark's own Kafka connector, decoded in the JVM: the records never enter Python.

It gives the SQL the columns the Python data source (`reader.py`) gives, from the same `StreamLayout`: the
records' fields (only those the query reads), the metadata columns, the two flags and the rowtime. Python
only plans it: the starting offsets are worked out once, on the driver, by the Python source's own rules
(rewinds, the group's committed offsets, `auto_offset_reset`), and handed to the connector, which keeps
every later position in the checkpoint.

Chosen per stream with `connector: spark`. What it does not do yet is refused by name when the dagger file
is validated (`KafkaStream.connector`): other formats than protobuf, dead-letter routing and late-record
policies need the Python source for now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, TimestampType

from jobs.codec.jvm_protobuf import register_decoder
from jobs.codec.protobuf import ProtoDecoder
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.kafka.reader import KafkaStreamReader
from jobs.sources.stream_batches import LATE_RECORD_COLUMN, VALID_RECORD_COLUMN, StreamLayout

_METADATA_COLUMNS = {
    "kafka_topic": "topic",
    "kafka_partition": "partition",
    "kafka_offset": "offset",
    "kafka_timestamp": "timestamp",
    "kafka_key": "key",
}

# librdkafka settings (what `consumer_config` takes, as the Python source does) and the Java client's names.
_SAME_NAME = frozenset(
    {
        "security.protocol",
        "ssl.endpoint.identification.algorithm",
        "ssl.key.password",
        "client.id",
        "client.rack",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "receive.buffer.bytes",
        "send.buffer.bytes",
        "request.timeout.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "isolation.level",
        "socket.connection.setup.timeout.ms",
    }
)
_RENAMED = {
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.mechanism": "sasl.mechanism",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
}
# Settings of the Python client alone (its queues, logging): they have no meaning for the Java client.
_PYTHON_CLIENT_ONLY = frozenset(
    {
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "fetch.queue.backoff.ms",
        "log_level",
        "socket.keepalive.enable",
    }
)
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class ConnectorConfigError(ValueError):
    """A stream setting Spark's Kafka connector cannot honour."""


def java_client_settings(stream: KafkaStream) -> dict[str, str]:
    """`consumer_config` (librdkafka's names, as the Python source takes them) in the Java client's names.

    SASL credentials become a JAAS line, and PEM files (`ssl.ca.location`, `ssl.certificate.location`,
    `ssl.key.location`) the Java client's PEM trust and key stores. A key with no Java equivalent is refused
    by name rather than dropped."""
    config = {key.strip(): str(value) for key, value in stream.consumer_config.items()}
    settings: dict[str, str] = {}
    username, password = config.pop("sasl.username", None), config.pop("sasl.password", None)
    certificate, key = config.pop("ssl.certificate.location", None), config.pop("ssl.key.location", None)
    for name, value in config.items():
        if name in _SAME_NAME:
            settings[name] = value
        elif name in _RENAMED:
            settings[_RENAMED[name]] = value
        elif name == "ssl.ca.location":
            settings.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": value})
        elif name not in _PYTHON_CLIENT_ONLY:
            raise ConnectorConfigError(
                f"consumer_config {name!r} has no equivalent in Spark's Kafka connector (connector: spark); "
                "remove it or use connector: python"
            )
    if username is not None:
        mechanism = settings.get("sasl.mechanism", "PLAIN").upper()
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            raise ConnectorConfigError(
                f"consumer_config 'sasl.mechanism' {mechanism!r}: not supported with connector: spark"
            )
        quote = json.dumps  # JAAS options are double-quoted strings with backslash escapes
        settings["sasl.jaas.config"] = (
            f"{module} required username={quote(username)} password={quote(password or '')};"
        )
    if certificate is not None or key is not None:
        if certificate is None or key is None:
            raise ConnectorConfigError(
                "consumer_config needs both 'ssl.certificate.location' and 'ssl.key.location'"
            )
        settings.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.certificate.chain": Path(certificate).read_text(),
                "ssl.keystore.key": Path(key).read_text(),
            }
        )
    return settings


def connector_options(stream: KafkaStream, starting_offsets: dict[str, dict[str, int]]) -> dict[str, str]:
    """The connector's options for `stream`, starting (in a new checkpoint) at `starting_offsets`."""
    options = {
        "kafka.bootstrap.servers": str(stream.bootstrap_servers),
        # The group the Python source reads as; the connector's consumers only assign(), never commit.
        "kafka.group.id": stream.group_id or f"dagger-{stream.table}",
        "kafka.default.api.timeout.ms": str(int(stream.broker_timeout.total_seconds() * 1000)),
        "kafkaConsumer.pollTimeoutMs": str(int(stream.broker_timeout.total_seconds() * 1000)),
        "startingOffsets": json.dumps(starting_offsets),
        "includeHeaders": "false",
    }
    if stream.topics is not None:
        options["subscribe"] = ",".join(stream.topics)
    else:
        options["subscribePattern"] = str(stream.topic_pattern)
    if stream.max_records_per_batch:
        options["maxOffsetsPerTrigger"] = str(stream.max_records_per_batch)
    options.update({f"kafka.{name}": value for name, value in java_client_settings(stream).items()})
    return options


def stream_frame(
    spark: SparkSession, stream: KafkaStream, layout: StreamLayout, descriptor_sets: str, rowtime_column: str
) -> DataFrame:
    """The stream's rows, in the columns of `layout.spark_schema`, read and decoded in the JVM."""
    starting = KafkaStreamReader(stream, descriptor_sets, rowtime_column).initialOffset()
    raw = spark.readStream.format("kafka").options(**connector_options(stream, starting)).load()
    decoder = layout.decoder
    assert isinstance(decoder, ProtoDecoder)
    spark_schema = layout.spark_schema
    record_type = StructType(spark_schema.fields[: len(decoder.schema)])
    function = f"dagger_decode_{stream.table}"
    register_decoder(spark, function, decoder.descriptor, record_type)
    record = F.call_function(function, F.col("value"))
    decoded = raw.select(record.alias("__record"), *map(F.col, ("value", *_METADATA_COLUMNS.values())))
    valid = _valid(stream, function)
    columns = [F.col(f"__record.{field.name}").alias(field.name) for field in record_type]
    columns += [F.col(_METADATA_COLUMNS[name]).alias(name) for name in layout.metadata.names]
    columns += [
        valid.alias(VALID_RECORD_COLUMN),
        F.lit(False).alias(LATE_RECORD_COLUMN),
        _rowtime(record_type, stream.event_time_field).alias(rowtime_column),
    ]
    return decoded.select(*columns)


def _valid(stream: KafkaStream, function: str) -> Column:
    """Whether a record decoded (and is within `max_record_bytes`); under the `fail` policy, an invalid record
    fails the query, naming where it is and why."""
    limit = stream.invalid_records.max_record_bytes
    too_large = F.length("value") > limit if limit is not None else F.lit(False)
    valid = F.col("__record").isNotNull() & ~too_large
    if stream.invalid_records.action != "fail":
        return valid
    reason = F.when(
        too_large,
        F.format_string(
            f"record of %d bytes is larger than invalid_records.max_record_bytes ({limit})", F.length("value")
        ),
    ).otherwise(F.call_function(f"{function}_error", F.col("value")))
    message = F.format_string(
        f"stream {stream.table!r}: %s[%d]@%d: record is not a valid {stream.records()}: %s (set "
        "invalid_records.action to 'drop' or 'dead_letter' to skip such records)",
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        reason,
    )
    return F.when(valid, F.lit(True)).otherwise(F.raise_error(message).cast("boolean"))


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

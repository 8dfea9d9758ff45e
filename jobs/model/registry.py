"""Every stream kind and sink kind, listed once.

Each kind lives in its own package (`jobs/sources/<kind>/`, `jobs/sinks/<kind>/`) with its config
model, its reader or writer and its Dagster resource. Everything else (the dagger file's unions, the
runner, the Dagster assets and resources, error messages, the docs' key reference) reads this module,
so adding a kind is one package plus one entry here.

Config models are imported now (validating a dagger file needs them); readers, writers and resources
are named as `module:attribute` and imported only when a dagger uses the kind, so a dagger that writes
to Kafka never imports the BigQuery client.
"""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.sinks.bigquery.config import BigQuerySink
from jobs.sinks.blackhole.config import BlackholeSink
from jobs.sinks.config import SinkConfig
from jobs.sinks.continuous_table.config import ContinuousTableSink
from jobs.sinks.elasticsearch.config import ElasticsearchSink
from jobs.sinks.influx.config import InfluxSink
from jobs.sinks.kafka.config import KafkaSink
from jobs.sinks.log.config import LogSink
from jobs.sinks.parquet.config import ParquetSink
from jobs.sources.config import StreamConfig
from jobs.sources.kafka.config import KafkaStream
from jobs.sources.parquet.config import ParquetStream

if TYPE_CHECKING:
    from jobs.sources.stream_batches import StreamDataSource


@dataclass(frozen=True)
class _ComponentKind:
    name: str
    """The `kind:` value in the dagger file."""
    resource: str
    """`module:Class` of the kind's Dagster resource (the deployment's defaults for it)."""
    resource_key: str
    """Key of that resource in the Dagster definitions."""
    asset_kinds: frozenset[str]
    """Kind tags (icons) of the kind's Dagster asset."""

    def resource_class(self) -> type:
        return pkgutil.resolve_name(self.resource)


@dataclass(frozen=True)
class StreamKind(_ComponentKind):
    config: type[StreamConfig]
    data_source: str
    """`module:Class` of the kind's PySpark data source."""
    bounded: bool
    """True when a stream of this kind ends (a dagger of bounded streams only runs to completion)."""

    def data_source_class(self) -> type[StreamDataSource]:
        return pkgutil.resolve_name(self.data_source)


@dataclass(frozen=True)
class SinkKind(_ComponentKind):
    config: type[SinkConfig]
    writer: str
    """`module:Class` of the kind's writer (see `jobs.sinks.base` for its contract)."""

    def writer_class(self) -> Any:
        """The writer class: `writer_class()(sink, SinkContext(...))` is a `jobs.sinks.base.SinkWriter`
        (typed loosely here: the sink contract imports the dagger spec, which imports this registry)."""
        return pkgutil.resolve_name(self.writer)


def _streams(*kinds: StreamKind) -> dict[str, StreamKind]:
    return {kind.name: kind for kind in kinds}


def _sinks(*kinds: SinkKind) -> dict[str, SinkKind]:
    return {kind.name: kind for kind in kinds}


STREAM_KINDS = _streams(
    StreamKind(
        name="kafka",
        config=KafkaStream,
        data_source="jobs.sources.kafka.reader:KafkaStreamDataSource",
        resource="jobs.sources.kafka.resource:KafkaStreamResource",
        resource_key="kafka_stream",
        asset_kinds=frozenset({"kafka", "protobuf"}),
        bounded=False,
    ),
    StreamKind(
        name="parquet",
        config=ParquetStream,
        data_source="jobs.sources.parquet.reader:ParquetStreamDataSource",
        resource="jobs.sources.parquet.resource:ParquetStreamResource",
        resource_key="parquet_stream",
        asset_kinds=frozenset({"parquet", "protobuf"}),
        bounded=True,
    ),
)

SINK_KINDS = _sinks(
    SinkKind(
        name="kafka",
        config=KafkaSink,
        writer="jobs.sinks.kafka.writer:KafkaSinkWriter",
        resource="jobs.sinks.kafka.resource:KafkaSinkResource",
        resource_key="kafka_sink",
        asset_kinds=frozenset({"kafka", "protobuf"}),
    ),
    SinkKind(
        name="log",
        config=LogSink,
        writer="jobs.sinks.log.writer:LogSinkWriter",
        resource="jobs.sinks.log.resource:LogSinkResource",
        resource_key="log_sink",
        asset_kinds=frozenset(),
    ),
    SinkKind(
        name="influx",
        config=InfluxSink,
        writer="jobs.sinks.influx.writer:InfluxSinkWriter",
        resource="jobs.sinks.influx.resource:InfluxSinkResource",
        resource_key="influx_sink",
        asset_kinds=frozenset({"influxdb"}),
    ),
    SinkKind(
        name="bigquery",
        config=BigQuerySink,
        writer="jobs.sinks.bigquery.writer:BigQuerySinkWriter",
        resource="jobs.sinks.bigquery.resource:BigQuerySinkResource",
        resource_key="bigquery_sink",
        asset_kinds=frozenset({"bigquery"}),
    ),
    SinkKind(
        name="elasticsearch",
        config=ElasticsearchSink,
        writer="jobs.sinks.elasticsearch.writer:ElasticsearchSinkWriter",
        resource="jobs.sinks.elasticsearch.resource:ElasticsearchSinkResource",
        resource_key="elasticsearch_sink",
        asset_kinds=frozenset({"elasticsearch"}),
    ),
    SinkKind(
        name="parquet",
        config=ParquetSink,
        writer="jobs.sinks.parquet.writer:ParquetSinkWriter",
        resource="jobs.sinks.parquet.resource:ParquetSinkResource",
        resource_key="parquet_sink",
        asset_kinds=frozenset({"parquet"}),
    ),
    SinkKind(
        name="continuous_table",
        config=ContinuousTableSink,
        writer="jobs.sinks.continuous_table.writer:ContinuousTableSinkWriter",
        resource="jobs.sinks.continuous_table.resource:ContinuousTableSinkResource",
        resource_key="continuous_table_sink",
        asset_kinds=frozenset({"postgres"}),
    ),
    SinkKind(
        name="blackhole",
        config=BlackholeSink,
        writer="jobs.sinks.blackhole.writer:BlackholeSinkWriter",
        resource="jobs.sinks.blackhole.resource:BlackholeSinkResource",
        resource_key="blackhole_sink",
        asset_kinds=frozenset(),
    ),
)

"""The keys of a Kafka stream in the dagger file."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, ClassVar, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from jobs.model.config import FROM_RESOURCE, ClientConfigValue, DeadLetterPolicy, Duration, KafkaConnector
from jobs.processors.config import InvalidRecordFilter
from jobs.sources.config import StreamConfig


class InvalidRecordPolicy(DeadLetterPolicy):
    """What a stream does with a record that does not decode as its protobuf message."""

    action: Literal["fail", "drop", "dead_letter"] = "fail"
    """`fail` stops the query naming topic, partition and offset; `drop` skips and counts it;
    `dead_letter` copies the raw record to `dead_letter_topic` (error in a header), then skips it."""
    max_record_bytes: PositiveInt | None = None
    """A record whose value is larger than this is invalid too (handled by `action`), so one giant record
    (a producer bug, an attack) never reaches the decoder, the SQL or the sinks. None: no limit."""


class KafkaStream(StreamConfig):
    """An unbounded stream of protobuf, Avro or JSON records from one or more Kafka topics."""

    kind: Literal["kafka"]
    deployment_keys: ClassVar[tuple[str, ...]] = ("bootstrap_servers",)
    topics: list[Annotated[str, Field(min_length=1)]] | None = None
    """Topic names; exactly one of `topics` and `topic_pattern` is set."""
    topic_pattern: str | None = None
    """A regular expression matched against whole topic names; new matching topics join while running."""
    bootstrap_servers: str | None = Field(default=None, min_length=1)
    """The cluster; may be left to the deployment (the Dagster `kafka_stream` resource)."""
    group_id: str | None = None
    """Consumer group: its committed offsets are the starting point, and each finished micro-batch's
    offsets are committed to it so standard lag tools work."""
    auto_offset_reset: Literal["earliest", "latest"] = "latest"
    """Where to start in a partition that has no committed offset for the group."""
    start_timestamp: datetime | None = None
    """Rewind: start every partition at the first record at or after this instant (overrides offsets).
    Like every starting point, it counts only for a new checkpoint."""
    start_offsets: dict[str, dict[int, Annotated[int, Field(ge=0)]]] = Field(default_factory=dict)
    """Rewind: `{topic: {partition: offset}}` where these partitions start (before anything else; clamped to
    what the partition still holds); usually set by a rewind (`dagger run --rewind-to-offsets`)."""
    max_records_per_batch: PositiveInt | None = None
    """Upper bound on records per micro-batch, spread over partitions by their backlog."""
    consumer_config: dict[str, ClientConfigValue] = Field(default_factory=dict)
    """librdkafka consumer settings passed through as they are (SASL, SSL, fetch sizes...)."""
    broker_timeout: Duration = timedelta(minutes=2)
    """How long the source rides out a broker that does not answer (metadata, offsets, records), retrying,
    before the query fails and the restart policy takes over."""
    invalid_records: InvalidRecordPolicy = Field(default_factory=InvalidRecordPolicy)
    connector: KafkaConnector | None = None
    """`spark`: Spark's own Kafka connector reads the topics and a JVM codec decodes the records, so they
    never enter Python (`jobs/sources/kafka/spark_connector.py`). `python`: the project's Python data
    source. Unset: `spark`, except for two cases that take `python`: a Spark Connect session (the client
    cannot put the codec in the server's JVM), and Avro on micro-batches, because the connector stops the
    query on a writer schema registered after it started (a collection's schema grows while daggers
    read it), which the Python source reads on."""

    def with_chosen_connector(self, spark_connect: bool, real_time: bool) -> KafkaStream:
        """This stream with `connector` set: the one it names, or the default for the session."""
        if self.connector is not None:
            return self
        keeps_python = spark_connect or (self.format == "avro" and not real_time)
        return self.model_copy(update={"connector": "python" if keeps_python else "spark"})

    def asset_metadata(self) -> dict[str, str | int]:
        where: dict[str, str | int] = (
            {"topics": ", ".join(self.topics)} if self.topics else {"topic_pattern": self.topic_pattern or ""}
        )
        where["bootstrap_servers"] = self.bootstrap_servers or FROM_RESOURCE
        return where

    def starting_at(
        self, timestamp: datetime | None, offsets: dict[str, dict[int, int]] | None
    ) -> KafkaStream:
        if offsets is not None:
            return self.model_copy(update={"start_offsets": offsets, "start_timestamp": None})
        return self.model_copy(update={"start_timestamp": timestamp, "start_offsets": {}})

    def inputs(self) -> list[str]:
        return [f"kafka:{topic}" for topic in self.topics or [self.topic_pattern or ""]]

    def reads(self, address: str) -> bool:
        kind, _, topic = address.partition(":")
        if kind != "kafka" or self.topics is not None:
            return address in self.inputs()
        return re.fullmatch(self.topic_pattern or "", topic) is not None

    @field_validator("topic_pattern")
    @classmethod
    def _pattern_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"not a valid regular expression: {error}") from None
        return value

    @field_validator("start_timestamp")
    @classmethod
    def _timestamps_are_utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @model_validator(mode="after")
    def _invalid_record_filter_drops(self) -> KafkaStream:
        """Dagger's invalid-record filter is this stream's `drop` policy (records counted per table)."""
        if any(isinstance(step, InvalidRecordFilter) for step in self.pre_processors):
            if "invalid_records" not in self.model_fields_set:
                object.__setattr__(self, "invalid_records", InvalidRecordPolicy(action="drop"))
            elif self.invalid_records.action == "fail":
                raise ValueError("an invalid_record_filter pre-processor needs invalid_records.action 'drop'")
        return self

    @model_validator(mode="after")
    def _one_topic_selector(self) -> KafkaStream:
        if (self.topics is None) == (self.topic_pattern is None):
            raise ValueError("set exactly one of 'topics' (a list) and 'topic_pattern' (a regex)")
        if self.topics is not None and not self.topics:
            raise ValueError("'topics' must name at least one topic")
        return self

    @model_validator(mode="after")
    def _avro_subject_of_the_topic(self) -> KafkaStream:
        """Confluent's default naming: the values of topic T have the subject `T-value`."""
        if self.format == "avro" and self.schema_subject is None:
            if self.topics is None or len(self.topics) != 1:
                raise ValueError("format 'avro' over several topics or a pattern needs 'schema_subject'")
            object.__setattr__(self, "schema_subject", f"{self.topics[0]}-value")
        return self

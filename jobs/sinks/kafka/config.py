"""The keys of a Kafka sink in the dagger file."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from jobs.model.config import FROM_RESOURCE, ClientConfigValue, HttpUrl, KafkaConnector
from jobs.sinks.config import SinkConfig

TOPIC_PLACEHOLDER = "{topic}"
"""In a `per_topic` or `demand` template's sink topic: replaced by each instance's own topic."""


class KafkaSink(SinkConfig):
    """Writes each result row as a protobuf message, an Avro record or a JSON object to a Kafka topic."""

    kind: Literal["kafka"]
    deployment_keys: ClassVar[tuple[str, ...]] = ("bootstrap_servers",)
    bootstrap_servers: str | None = Field(default=None, min_length=1)
    """The cluster; may be left to the deployment (the Dagster `kafka_sink` resource)."""
    topic: str = Field(min_length=1)
    format: Literal["protobuf", "avro", "json"] = "protobuf"
    """How each row is written: `protobuf` (`proto_message`), `avro` in the Confluent wire format (its
    schema made from the result's columns and registered at `schema_registry_url`), or `json`, one object
    per row with the result's column names."""
    proto_message: str | None = Field(default=None, min_length=1)
    """`protobuf`: the output message; result columns fill its fields by name (`a.b` fills nested field
    b of a)."""
    key_proto_message: str | None = None
    """`protobuf`: an optional key message, filled from the same columns; without it records have no
    key."""
    schema_registry_url: HttpUrl | None = None
    """`avro`: the Confluent-compatible registry the output schema is registered in when the dagger
    starts (a new version when the result's columns changed; refused if the subject's compatibility
    rules refuse it)."""
    schema_subject: str | None = Field(default=None, min_length=1)
    """`avro`: the subject of the output schema; by default `<topic>-value`."""
    producer_config: dict[str, ClientConfigValue] = Field(default_factory=dict)
    delivery: Literal["at_least_once", "exactly_once"] = "at_least_once"
    """`exactly_once`: every Spark task writes its rows and a commit marker in one Kafka transaction, and
    a replayed task whose marker is committed writes nothing (see `jobs/sinks/kafka/exactly_once.py`), on
    either connector."""
    connector: KafkaConnector | None = None
    """`spark`: the records are encoded in the JVM (protobuf by the project's codec, JSON by `to_json`, Avro
    by `to_avro`) and written by Java producers, so they never enter Python: Spark's own Kafka connector at
    least once, the project's transactional writer (`ExactlyOnceKafkaWriter.java`) exactly once. `python`:
    the project's Python writer. Unset: `spark`, or `python` on a Spark Connect session (the client cannot
    put the codec in the server's JVM)."""
    marker_topic: str | None = Field(default=None, min_length=1)
    """exactly_once only: topic of the commit markers, on the same cluster; default
    `<topic>.dagger-commits`, created (1 partition, compacted) when missing."""

    def with_chosen_connector(self, spark_connect: bool) -> KafkaSink:
        """This sink with `connector` set: the one it names, or the default for the session."""
        if self.connector is not None:
            return self
        return self.model_copy(update={"connector": "python" if spark_connect else "spark"})

    @model_validator(mode="after")
    def _format_keys(self) -> KafkaSink:
        if self.format == "protobuf" and self.proto_message is None:
            raise ValueError("format 'protobuf' needs 'proto_message'")
        if self.format == "avro" and self.schema_registry_url is None:
            raise ValueError("format 'avro' needs 'schema_registry_url'")
        protobuf_keys = ["proto_message", "key_proto_message"]
        avro_keys = ["schema_registry_url", "schema_subject"]
        for keys, key_format in ((protobuf_keys, "protobuf"), (avro_keys, "avro")):
            misplaced = [key for key in keys if getattr(self, key) is not None]
            if misplaced and self.format != key_format:
                raise ValueError(f"{', '.join(map(repr, misplaced))}: keys of format {key_format!r}")
        return self

    @property
    def resolved_schema_subject(self) -> str:
        return self.schema_subject or f"{self.topic}-value"

    def records(self) -> str:
        """What each record is, as the asset graph names it."""
        if self.format == "protobuf":
            return str(self.proto_message)
        if self.format == "avro":
            return f"Avro {self.resolved_schema_subject}"
        return "JSON objects"

    @model_validator(mode="after")
    def _delivery_settings(self) -> KafkaSink:
        if self.delivery == "at_least_once":
            if self.marker_topic is not None:
                raise ValueError("'marker_topic' is only used with delivery: exactly_once")
            return self
        config = {key.strip(): value for key, value in self.producer_config.items()}
        if "transactional.id" in config:
            raise ValueError(
                "producer_config 'transactional.id' conflicts with delivery: exactly_once, which sets one "
                "per Spark partition (it fences earlier attempts of the same task)"
            )
        if str(config.get("enable.idempotence", "true")).strip().lower() not in ("true", "1"):
            raise ValueError(
                "producer_config 'enable.idempotence' must stay true with delivery: exactly_once "
                "(Kafka transactions need the idempotent producer)"
            )
        for key in ("acks", "request.required.acks"):
            if str(config.get(key, "all")).strip().lower() not in ("all", "-1"):
                raise ValueError(f"producer_config '{key}' must be 'all' with delivery: exactly_once")
        return self

    def takes_upserts(self) -> bool:
        return self.key_proto_message is not None  # a compacted topic keeps the last record of a key

    def describe(self) -> str:
        return f"kafka sink {self.topic!r}"

    def output(self) -> str | None:
        # A template's topic is named per instance: no single address.
        return None if TOPIC_PLACEHOLDER in self.topic else f"kafka:{self.topic}"

    def asset_metadata(self) -> dict[str, str | int]:
        return {
            "topic": self.topic,
            "bootstrap_servers": self.bootstrap_servers or FROM_RESOURCE,
            "records": self.records(),
        }

    @property
    def resolved_marker_topic(self) -> str:
        return self.marker_topic or f"{self.topic}.dagger-commits"

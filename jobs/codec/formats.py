"""The type handler of a stream: from its `format` keys to the decoder that turns its records into columns.

Every decoder has the same narrow shape (`RecordDecoder`): the Arrow schema of the columns it gives, and a
`decode` of a whole batch of payloads that reports the records it cannot read by index. Decoders are built
once per process and stream (building one compiles a codec or fetches schemas), so Spark's tasks reuse them.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlparse

import pyarrow as pa

from jobs.codec.avro import AvroSchema, ConfluentAvroDecoder, arrow_schema
from jobs.codec.json_records import JsonDecoder, arrow_schema_of_json_schema
from jobs.codec.protobuf import ProtoDecoder, decoder_for, timestamp_field_at_path
from jobs.model.config import without_credentials
from jobs.model.schema_registry import registry_from_option

if TYPE_CHECKING:
    from jobs.sources.config import StreamConfig


class RecordDecoder(Protocol):
    schema: pa.Schema
    """The columns of decoded batches."""

    def decode(self, payloads: Sequence[bytes]) -> tuple[pa.RecordBatch, dict[int, str]]:
        """The batch, aligned with `payloads`, and {index: error} of the records that are not valid."""
        ...


class SchemaLookupError(LookupError):
    """A schema registry that cannot answer, or a subject or version it does not have."""


class AvroSchemas(ABC):
    """Where an Avro stream finds its reader schema (by subject and version) and writer schemas (by id)."""

    def __init__(self, url: str) -> None:
        self.url = url

    @abstractmethod
    def latest_version(self, subject: str) -> int: ...

    @abstractmethod
    def version(self, subject: str, version: int) -> AvroSchema: ...

    @abstractmethod
    def by_id(self, schema_id: int) -> AvroSchema | None:
        """The schema of a record's id; None when the registry has no such id."""

    @abstractmethod
    def subject_schemas(self, subject: str) -> dict[int, AvroSchema]:
        """{schema id: schema} of every version the subject has now."""

    def _error(self, what: str, error: object) -> SchemaLookupError:
        return SchemaLookupError(f"schema registry {without_credentials(self.url)}: {what}: {error}")


class _ConfluentSchemaRegistry(AvroSchemas):
    """A Confluent-compatible registry, through confluent-kafka's client (which caches what it fetched)."""

    def __init__(self, url: str) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        super().__init__(url)
        self._client = SchemaRegistryClient({"url": url})

    def latest_version(self, subject: str) -> int:
        self._client.clear_latest_caches()  # the client would keep the first answer for good
        return self._registered(subject, None).version

    def version(self, subject: str, version: int) -> AvroSchema:
        return json.loads(self._registered(subject, version).schema.schema_str)

    def by_id(self, schema_id: int) -> AvroSchema | None:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return json.loads(self._client.get_schema(schema_id).schema_str)
        except SchemaRegistryError as error:
            if error.http_status_code == 404:
                return None
            raise self._error(f"schema id {schema_id}", error) from None

    def subject_schemas(self, subject: str) -> dict[int, AvroSchema]:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            versions = self._client.get_versions(subject)
        except SchemaRegistryError as error:
            raise self._error(f"subject {subject!r}", error) from None
        except Exception as error:  # the client's transport errors (refused, timed out)
            raise self._error("not reachable", error) from None
        registered = [self._registered(subject, version) for version in versions]
        return {schema.schema_id: json.loads(schema.schema.schema_str) for schema in registered}

    def _registered(self, subject: str, version: int | None):
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            if version is None:
                return self._client.get_latest_version(subject)
            return self._client.get_version(subject, version)
        except SchemaRegistryError as error:
            raise self._error(f"subject {subject!r} version {version or 'latest'}", error) from None
        except Exception as error:  # the client's transport errors (refused, timed out)
            raise self._error("not reachable", error) from None


class _CollectionDatabase(AvroSchemas):
    """The collections' metadata database (`dagger collect`'s PostgreSQL), read directly."""

    def __init__(self, url: str) -> None:
        from jobs.collection.registry import CollectionRegistry

        super().__init__(url)
        try:
            self._registry = CollectionRegistry(url, max_connections=2, timeout_s=10)
        except Exception as error:
            raise self._error("not reachable", error) from None

    def latest_version(self, subject: str) -> int:
        return self._versions(subject)[-1].version

    def version(self, subject: str, version: int) -> AvroSchema:
        found = next((item for item in self._versions(subject) if item.version == version), None)
        if found is None:
            raise self._error(f"subject {subject!r}", f"no version {version}")
        return found.schema.to_avro()

    def by_id(self, schema_id: int) -> AvroSchema | None:
        found = self._registry.by_id(schema_id)
        return None if found is None else found.schema.to_avro()

    def subject_schemas(self, subject: str) -> dict[int, AvroSchema]:
        return {item.id: item.schema.to_avro() for item in self._versions(subject)}

    def _versions(self, subject: str) -> list:
        from jobs.collection.confluent import collection_of

        collection = collection_of(subject)
        versions = self._registry.versions(*collection) if collection else []
        if not versions:
            raise self._error(
                f"subject {subject!r}", "no collection has it (subjects are <project>.<collection>-value)"
            )
        return versions


@cache
def avro_schemas(url: str) -> AvroSchemas:
    """The registry at `url`, one client per process."""
    if urlparse(url).scheme in ("postgresql", "postgres"):
        return _CollectionDatabase(url)
    return _ConfluentSchemaRegistry(url)


def pinned(stream: StreamConfig) -> StreamConfig:
    """The stream with its columns fixed as they are now, so the driver and its tasks decode the same
    columns even if a schema grows meanwhile: an Avro stream's latest version, looked up."""
    if stream.format != "avro" or stream.schema_version is not None:
        return stream
    assert stream.schema_registry_url is not None and stream.schema_subject is not None
    latest = avro_schemas(stream.schema_registry_url).latest_version(stream.schema_subject)
    return stream.model_copy(update={"schema_version": latest})


@dataclass(frozen=True)
class RecordFormat:
    """How a stream's records decode, resolved once (`record_format`): the driver builds its decoders from
    it, and the stream's tasks get it in the source's options, so no schema is read again."""

    format: Literal["protobuf", "avro", "json"]
    message: str | None = None
    """protobuf: the message's full name, found in the dagger's descriptor sets."""
    schema: str | None = None
    """avro: the reader schema (the pinned version); json: the schema document (an Avro record schema or
    a JSON Schema); as JSON text."""
    schema_source: str = ""
    """json: the schema document as errors name it (`record_schema`, `schema_file <path>`)."""
    registry_url: str | None = None
    """avro: the registry that has each record's writer schema, by its id."""
    writer_schemas: tuple[tuple[int, str], ...] = ()
    """avro read in the JVM (`with_writers`): (schema id, schema) of every version of the subject as
    the plan was resolved, the schemas as JSON text."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RecordFormat:
        values = json.loads(text)
        writers = tuple((int(schema_id), schema) for schema_id, schema in values.pop("writer_schemas"))
        return cls(**values, writer_schemas=writers)


def record_format(stream: StreamConfig, with_writers: bool = False) -> RecordFormat:
    """How `stream`'s records decode (an Avro stream's latest version pinned, see `pinned`); with
    `with_writers`, an Avro stream's writer schemas too. Raises naming the schema that cannot be read."""
    if stream.format == "protobuf":
        return RecordFormat("protobuf", message=str(stream.proto_message))
    if stream.format == "avro":
        stream = pinned(stream)
        assert stream.schema_registry_url is not None and stream.schema_subject is not None
        assert stream.schema_version is not None
        schemas = avro_schemas(stream.schema_registry_url)
        writers = schemas.subject_schemas(stream.schema_subject) if with_writers else {}
        return RecordFormat(
            "avro",
            schema=json.dumps(schemas.version(stream.schema_subject, stream.schema_version)),
            registry_url=stream.schema_registry_url,
            writer_schemas=tuple((schema_id, json.dumps(schema)) for schema_id, schema in writers.items()),
        )
    if stream.record_schema is not None:
        document, where = stream.record_schema, "record_schema"
    else:
        document, where = _json_document(str(stream.schema_file)), f"schema_file {stream.schema_file}"
    return RecordFormat("json", schema=json.dumps(document), schema_source=where)


def column_names(records: RecordFormat, descriptor_sets: str) -> list[str]:
    """The columns the records give, in order; raises naming the message or schema that has none."""
    if records.format == "protobuf":
        return [
            field.name for field in registry_from_option(descriptor_sets).message(str(records.message)).fields
        ]
    assert records.schema is not None
    if records.format == "avro":
        return arrow_schema(json.loads(records.schema)).names
    return columns_of_schema(json.loads(records.schema), records.schema_source).names


_decoders: dict[tuple[RecordFormat, tuple[str, ...] | None], RecordDecoder] = {}
_decoders_lock = threading.Lock()


def record_decoder(
    records: RecordFormat, descriptor_sets: str, fields: Sequence[str] | None = None
) -> RecordDecoder:
    """The records' decoder in this process; with `fields`, only those columns are decoded."""
    if records.format == "protobuf":
        return decoder_for(descriptor_sets, str(records.message), None if fields is None else list(fields))
    key = (records, None if fields is None else tuple(fields))
    with _decoders_lock:
        decoder = _decoders.get(key)
        if decoder is None:
            decoder = _decoders[key] = _build_decoder(records, fields)
        return decoder


def _build_decoder(records: RecordFormat, fields: Sequence[str] | None) -> RecordDecoder:
    assert records.schema is not None
    document = json.loads(records.schema)
    if records.format == "avro":
        assert records.registry_url is not None
        selected = None if fields is None else list(fields)
        return ConfluentAvroDecoder(document, avro_schemas(records.registry_url).by_id, selected)
    columns = columns_of_schema(document, records.schema_source)
    return JsonDecoder(columns if fields is None else pa.schema([columns.field(name) for name in fields]))


def _json_document(schema_file: str) -> Any:
    """The schema document of a JSON stream's `schema_file` (an Avro record schema or a JSON Schema)."""
    try:
        with open(schema_file) as file:
            return json.load(file)
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"schema_file {schema_file}: {error}") from None


def columns_of_schema(document: Any, where: str) -> pa.Schema:
    """The columns of an Avro record schema or a JSON Schema document; `where` names it in errors."""
    is_avro = isinstance(document, dict) and document.get("type") == "record" and "fields" in document
    try:
        return arrow_schema(document) if is_avro else arrow_schema_of_json_schema(document)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def check_event_time_field(decoder: RecordDecoder, dotted_path: str) -> None:
    """Raises a ValueError naming the field when `dotted_path` is not a timestamp column of the records."""
    if isinstance(decoder, ProtoDecoder):
        timestamp_field_at_path(decoder.descriptor, dotted_path)
        return
    arrow_type: pa.DataType = pa.struct(list(decoder.schema))
    walked: list[str] = []
    for name in dotted_path.split("."):
        if not pa.types.is_struct(arrow_type):
            raise ValueError(
                f"{'.'.join(walked)!r} in {dotted_path!r} is {arrow_type}, it has no field {name!r}"
            )
        index = arrow_type.get_field_index(name)
        if index < 0:
            names = ", ".join(field.name for field in arrow_type)
            raise ValueError(f"the records have no field {'.'.join([*walked, name])!r} (fields: {names})")
        arrow_type = arrow_type.field(index).type
        walked.append(name)
    if not pa.types.is_timestamp(arrow_type):
        raise ValueError(f"event-time field {dotted_path!r} is {arrow_type}, not a timestamp")

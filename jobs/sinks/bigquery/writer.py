"""BigQuery sink: result rows appended through the Storage Write API, each micro-batch committed once.

**Table.** On the first write the table is looked up; when it is missing and `create_table` is set (the
default) the dataset and table are created from the result's columns, with `partition_field` /
`partition_type` time partitioning and `clustering_fields`:

| Spark | BigQuery |
|---|---|
| STRING | STRING |
| TINYINT, SMALLINT, INT, BIGINT | INT64 |
| FLOAT, DOUBLE | FLOAT64 |
| BOOLEAN, BINARY | BOOL, BYTES |
| TIMESTAMP, TIMESTAMP_NTZ, DATE | TIMESTAMP, DATETIME, DATE |
| DECIMAL(p, s) | NUMERIC when s <= 9 and p - s <= 29, else BIGNUMERIC |
| STRUCT | RECORD |
| ARRAY<T> | T with mode REPEATED (a NULL array is written empty; a NULL element fails the batch) |
| MAP<K, V> | REPEATED RECORD<key K, value V> |

An existing table must have every result column (names compare case-insensitively; extra NULLABLE or
REPEATED columns are left NULL/empty) with a type that can take it: the same type, or INT64 into
FLOAT64/NUMERIC/BIGNUMERIC, NUMERIC and BIGNUMERIC into each other, STRING into JSON or GEOGRAPHY. Anything
else fails the first micro-batch naming the column, before a row is sent.

**Writing a micro-batch** (driver D, Spark tasks T):

1. D looks the batch up in the commit log, the table `<table>__dagger_commits` next to the target (one
   row per written batch: the streaming query's id, the batch id, the write streams).
2. T: every task opens its own PENDING write stream, appends its partition's rows as protobuf (a message
   type built from the table schema, encoded a whole Arrow batch at a time) in requests of at most
   `batch_size` rows and 9 MB, each with an explicit offset, finalizes the stream and returns its name.
   Pending rows are invisible. A retried or speculative task attempt writes a stream of its own; only the
   streams of the attempts Spark keeps reach the driver, the others are never committed.
3. D records the batch and its stream names in the commit log: one row appended to the log's default
   stream, durable and visible to queries once acknowledged (no DML job per micro-batch).
4. D commits all the streams with one `BatchCommitWriteStreams`: the whole micro-batch becomes visible at
   once, or none of it.

**No duplicates on replay.** When step 1 finds the batch (a replay after a crash or a failed batch), no
row is written again: D commits the recorded streams instead. If they were committed already (the crash
came after step 4), BigQuery answers "already committed" and nothing changes; if the crash came between
steps 3 and 4, the commit happens now. A crash before step 3 leaves only uncommitted streams, which
BigQuery discards, and the replay writes the batch afresh. So a replayed batch's rows appear exactly once.
What it relies on:
- The batch id means the same rows: Spark replays a batch with the offsets it logged for it (the dagger's
  sources are replayable). Rewinding a checkpoint by hand to before a batch was *planned* and reading
  different data under the same batch id would be skipped as already written.
- The commit log is keyed by the streaming query's id, which lives in the checkpoint: a new checkpoint
  is a new query and starts afresh. Without a query id (a batch written outside a streaming query) the
  key is the dagger's name and checkpoint location.
- The window left open: the recorded streams must still exist when the replay comes. If BigQuery no
  longer knows them (it garbage-collects write streams some time after they are used), the batch is
  written again with a warning in the log; had the earlier attempt committed (a crash between steps 4
  and the end of the micro-batch, then a replay only after the streams were gone), its rows would then
  appear twice. Commit-log rows expire after 30 days (partition expiration).

**Rejected rows** (a value the table cannot take) make BigQuery answer the append with an error and row
errors; the task fails with the service's messages (the first five rows), so the micro-batch fails,
nothing of it is committed, and the restarted query replays it (and fails again until the data or the
table is fixed). Rows are never dropped.

**Client settings.** Credentials come from the environment (google.auth's default: a service-account file
in `GOOGLE_APPLICATION_CREDENTIALS`, the metadata server...), on the driver and on every executor.
Anonymous credentials are used instead when `endpoint` or `write_endpoint` is a plaintext `http://` URL
(an emulator) or `DAGGER_BIGQUERY_ANONYMOUS=1`. Every call has the sink's `timeout` and at most
`max_retries` retries of transient errors (`retry_backoff`, doubled each time), never the client
libraries' own open-ended retries.

**Quotas.** Each micro-batch creates one write stream per non-empty partition of the result: keep
partitions x micro-batches per hour within BigQuery's CreateWriteStream quota (coalesce the result, or
a longer `trigger_interval`).
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from google.api_core import exceptions as api_exceptions
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.auth.exceptions import DefaultCredentialsError
from google.cloud import bigquery
from google.protobuf import descriptor_pb2, descriptor_pool
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from jobs.sinks.base import SinkContext
from jobs.sinks.bigquery.config import BigQuerySink

log = logging.getLogger("dagger.sink.bigquery")

ANONYMOUS_ENV = "DAGGER_BIGQUERY_ANONYMOUS"
COMMIT_LOG_SUFFIX = "__dagger_commits"
COMMIT_LOG_RETENTION_DAYS = 30
MAX_REQUEST_BYTES = 9 * 1024 * 1024  # BigQuery and the emulator refuse AppendRows requests over 10 MiB
MAX_IN_FLIGHT = 4  # AppendRows requests sent ahead of their responses, per stream
ROW_ERRORS_SHOWN = 5
_COLUMN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,299}$")
_ROW_MESSAGE = "Row"

_TRANSIENT = (
    api_exceptions.ServiceUnavailable,
    api_exceptions.InternalServerError,
    api_exceptions.TooManyRequests,
    api_exceptions.BadGateway,
    api_exceptions.GatewayTimeout,
    api_exceptions.DeadlineExceeded,
    api_exceptions.Aborted,
    ConnectionError,
    TimeoutError,
)


class BigQuerySinkError(RuntimeError):
    """A micro-batch that BigQuery did not take; the message carries the service's words."""


# --------------------------------------------------------------------------------------------------------
# Schema: Spark result -> BigQuery columns -> the protobuf rows are encoded as
# --------------------------------------------------------------------------------------------------------

_NAMES = {"INTEGER": "INT64", "FLOAT": "FLOAT64", "BOOLEAN": "BOOL", "STRUCT": "RECORD"}
# Result type -> table types that can take it (the service checks the values, e.g. NUMERIC's range).
_FILLS = {
    "INT64": {"INT64", "FLOAT64", "NUMERIC", "BIGNUMERIC"},
    "NUMERIC": {"NUMERIC", "BIGNUMERIC"},
    "BIGNUMERIC": {"NUMERIC", "BIGNUMERIC"},
    "STRING": {"STRING", "JSON", "GEOGRAPHY"},
}
_F = descriptor_pb2.FieldDescriptorProto
# The protobuf type each BigQuery type is written as (Storage Write API conventions).
_PROTO_TYPES = {
    "STRING": _F.TYPE_STRING,
    "JSON": _F.TYPE_STRING,
    "GEOGRAPHY": _F.TYPE_STRING,
    "NUMERIC": _F.TYPE_STRING,
    "BIGNUMERIC": _F.TYPE_STRING,
    "DATETIME": _F.TYPE_STRING,  # civil time, "YYYY-MM-DD HH:MM:SS.ffffff"
    "INT64": _F.TYPE_INT64,
    "TIMESTAMP": _F.TYPE_INT64,  # microseconds since the epoch
    "DATE": _F.TYPE_INT32,  # days since the epoch
    "FLOAT64": _F.TYPE_DOUBLE,
    "BOOL": _F.TYPE_BOOL,
    "BYTES": _F.TYPE_BYTES,
    "RECORD": _F.TYPE_MESSAGE,
}


def _normal(bq_type: str) -> str:
    return _NAMES.get(bq_type.upper(), bq_type.upper())


def bigquery_field(name: str, data_type: T.DataType, path: str | None = None) -> bigquery.SchemaField:
    """The BigQuery column a Spark result column becomes in a created table."""
    path = path or name
    if not _COLUMN_NAME.match(name):
        raise ValueError(
            f"column {path!r}: not a BigQuery column name (letters, digits and _, not starting with a "
            "digit); rename it with AS"
        )
    if isinstance(data_type, T.ArrayType):
        if isinstance(data_type.elementType, T.ArrayType | T.MapType):
            raise ValueError(
                f"column {path!r}: BigQuery has no arrays of arrays ({data_type.simpleString()})"
            )
        element = bigquery_field(name, data_type.elementType, path)
        return bigquery.SchemaField(name, element.field_type, mode="REPEATED", fields=element.fields)
    if isinstance(data_type, T.MapType):
        key = bigquery_field("key", data_type.keyType, f"{path}.key")
        value = bigquery_field("value", data_type.valueType, f"{path}.value")
        return bigquery.SchemaField(name, "RECORD", mode="REPEATED", fields=[key, value])
    if isinstance(data_type, T.StructType):
        if not data_type.fields:
            raise ValueError(f"column {path!r}: a BigQuery RECORD needs at least one field")
        _unique([field.name for field in data_type.fields], path)
        children = [bigquery_field(f.name, f.dataType, f"{path}.{f.name}") for f in data_type.fields]
        return bigquery.SchemaField(name, "RECORD", fields=children)
    return bigquery.SchemaField(name, _scalar_type(data_type, path))


def _scalar_type(data_type: T.DataType, path: str) -> str:
    if isinstance(data_type, T.StringType | T.CharType | T.VarcharType | T.NullType):
        return "STRING"
    if isinstance(data_type, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return "INT64"
    if isinstance(data_type, T.FloatType | T.DoubleType):
        return "FLOAT64"
    if isinstance(data_type, T.DecimalType):
        fits_numeric = data_type.scale <= 9 and data_type.precision - data_type.scale <= 29
        return "NUMERIC" if fits_numeric else "BIGNUMERIC"
    simple = {
        T.BooleanType: "BOOL",
        T.BinaryType: "BYTES",
        T.TimestampType: "TIMESTAMP",
        T.TimestampNTZType: "DATETIME",
        T.DateType: "DATE",
    }
    for spark_type, bq_type in simple.items():
        if isinstance(data_type, spark_type):
            return bq_type
    raise ValueError(
        f"column {path!r}: {data_type.simpleString()} has no BigQuery type in this sink; cast it in the "
        "query (e.g. an interval to BIGINT microseconds, a variant to STRING)"
    )


def _unique(names: list[str], where: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise ValueError(f"{where}: two columns named {name!r} (BigQuery names ignore case)")
        seen.add(name.lower())


@dataclass(frozen=True)
class WireColumn:
    """A result column as it is written: its name, the table column's type, and its children."""

    name: str
    bq_type: str
    repeated: bool
    children: tuple[WireColumn, ...] = ()


def wire_columns(
    result: T.StructType, table: list[bigquery.SchemaField], table_name: str
) -> list[WireColumn]:
    """Check the result against the table's schema; what each column is written as."""
    _unique(result.names, "result")
    expected = [bigquery_field(field.name, field.dataType) for field in result.fields]
    return _match(expected, table, table_name, "")


def _match(
    expected: list[bigquery.SchemaField], actual: list[bigquery.SchemaField], table_name: str, prefix: str
) -> list[WireColumn]:
    by_name = {field.name.lower(): field for field in actual}
    wanted = {field.name.lower() for field in expected}
    missing_required = [f.name for f in actual if f.mode == "REQUIRED" and f.name.lower() not in wanted]
    if missing_required:
        raise ValueError(
            f"table {table_name}: REQUIRED column {prefix}{missing_required[0]} is not in the result; "
            f"the result has {', '.join(f.name for f in expected)}"
        )
    columns = []
    for field in expected:
        path = f"{prefix}{field.name}"
        column = by_name.get(field.name.lower())
        if column is None:
            raise ValueError(
                f"table {table_name} has no column {path} (its columns: "
                f"{', '.join(f.name for f in actual)}); BigQuery tables cannot gain columns through this "
                "sink: add it to the table or drop it from the query"
            )
        source, target = _normal(field.field_type), _normal(column.field_type)
        repeated = field.mode == "REPEATED"
        if target not in _FILLS.get(source, {source}) or repeated != (column.mode == "REPEATED"):
            raise ValueError(
                f"table {table_name}: column {path} is {_describe(column)} but the result's is "
                f"{_describe(field)}; cast it in the query or write to another table"
            )
        children: tuple[WireColumn, ...] = ()
        if target == "RECORD":
            children = tuple(_match(list(field.fields), list(column.fields), table_name, f"{path}."))
        columns.append(WireColumn(field.name, target, repeated, children))
    return columns


def _describe(field: bigquery.SchemaField) -> str:
    kind = _normal(field.field_type)
    if kind == "RECORD":
        kind = f"RECORD<{', '.join(f'{f.name} {_describe(f)}' for f in field.fields)}>"
    return f"REPEATED {kind}" if field.mode == "REPEATED" else kind


def row_descriptor(columns: list[WireColumn]) -> descriptor_pb2.DescriptorProto:
    """The self-contained proto2 message the rows are written as: nested messages inside it."""
    root = descriptor_pb2.DescriptorProto(name=_ROW_MESSAGE)
    counter = iter(range(1, 1_000_000))

    def fill(
        message: descriptor_pb2.DescriptorProto, fields: tuple[WireColumn, ...] | list[WireColumn]
    ) -> None:
        for number, column in enumerate(fields, start=1):
            label = _F.LABEL_REPEATED if column.repeated else _F.LABEL_OPTIONAL
            field = message.field.add(
                name=column.name, number=number, label=label, type=_PROTO_TYPES[column.bq_type]
            )
            if column.bq_type == "RECORD":
                nested = root.nested_type.add(name=f"Record{next(counter)}")
                field.type_name = f".{_ROW_MESSAGE}.{nested.name}"
                fill(nested, column.children)

    fill(root, columns)
    return root


def time_partitioning_type(partition_type: str) -> str:
    return getattr(bigquery.TimePartitioningType, partition_type)


# --------------------------------------------------------------------------------------------------------
# Arrow -> protobuf rows (executors)
# --------------------------------------------------------------------------------------------------------


class RowEncoder:
    """Arrow record batches of the result -> serialized protobuf rows of the row descriptor, via ptars."""

    def __init__(self, columns: list[WireColumn], descriptor: bytes) -> None:
        import ptars

        proto = descriptor_pb2.DescriptorProto.FromString(descriptor)
        file = descriptor_pb2.FileDescriptorProto(name="dagger_bigquery_row.proto", syntax="proto2")
        file.message_type.add().CopyFrom(proto)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(file)
        message = pool.FindMessageTypeByName(_ROW_MESSAGE)
        self._handler = ptars.HandlerPool([message.file]).get_for_message(message)
        self._columns = columns
        self._types = {field.name: _relaxed(field.type) for field in self._handler.schema()}

    def encode(self, batch: pa.RecordBatch) -> pa.BinaryArray:
        arrays, fields = [], []
        for column in self._columns:
            target = self._types[column.name]
            arrays.append(_to_wire(batch.column(column.name), column, target, column.name))
            fields.append(pa.field(column.name, target))
        return self._handler.record_batch_to_array(
            pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
        )


def _relaxed(arrow_type: pa.DataType) -> pa.DataType:
    """The codec's type with every level nullable (results carry nulls anywhere)."""
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(f.name, _relaxed(f.type)) for f in arrow_type])
    if pa.types.is_list(arrow_type):
        return pa.list_(pa.field("item", _relaxed(arrow_type.value_type)))
    return arrow_type


def _to_wire(array: pa.Array, column: WireColumn, target: pa.DataType, path: str) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), target)
    if column.repeated:
        if pa.types.is_map(array.type):  # map -> list of {key, value} records
            entries = pa.StructArray.from_arrays([array.keys, array.items], names=["key", "value"])
            array = pa.ListArray.from_arrays(pc.subtract(array.offsets, array.offsets[0]), entries)
        elif pa.types.is_large_list(array.type):
            array = array.cast(pa.list_(array.type.value_field))
        values = array.flatten()
        if values.null_count:
            raise BigQuerySinkError(
                f"column {path!r}: an array holds a NULL element, which BigQuery arrays cannot hold; "
                "filter the NULLs out in the query (e.g. filter(xs, x -> x IS NOT NULL))"
            )
        element = WireColumn(column.name, column.bq_type, False, column.children)
        wired = _to_wire(values, element, target.value_type, f"{path}[]")
        # A NULL array is written empty: BigQuery has no NULL arrays.
        lengths = pc.fill_null(pc.list_value_length(array), 0)
        offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths).cast(pa.int32())])
        return pa.ListArray.from_arrays(offsets, wired, type=target)
    if column.bq_type == "RECORD":
        children = []
        fields = array.flatten()  # the struct's children, sliced as the struct is
        for child, child_field in zip(column.children, target, strict=True):
            source = fields[_field_index(array.type, child.name)]
            children.append(_to_wire(source, child, child_field.type, f"{path}.{child.name}"))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=array.is_null())
    return _scalar_to_wire(array, column.bq_type, target, path)


def _field_index(struct_type: pa.StructType, name: str) -> int:
    for index in range(struct_type.num_fields):
        if struct_type.field(index).name.lower() == name.lower():
            return index
    raise BigQuerySinkError(f"struct has no field {name!r}")


def _scalar_to_wire(array: pa.Array, bq_type: str, target: pa.DataType, path: str) -> pa.Array:
    source = array.type
    try:
        if bq_type == "TIMESTAMP":
            return pc.cast(pc.cast(array, pa.timestamp("us", source.tz)), pa.int64())
        if bq_type == "DATE":
            return pc.cast(array, pa.int32())
        if bq_type == "DATETIME":
            return pc.strftime(pc.cast(array, pa.timestamp("us")), format="%Y-%m-%d %H:%M:%S")
        if pa.types.is_decimal(source) and pa.types.is_string(target):
            return pc.cast(array, pa.string())
        return pc.cast(array, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise BigQuerySinkError(
            f"column {path!r}: {source} cannot be written as {bq_type}: {error}"
        ) from None


def _chunks(rows: pa.BinaryArray, max_rows: int, max_bytes: int) -> Iterator[list[bytes]]:
    """Serialized rows in requests of at most `max_rows` rows and about `max_bytes` bytes."""
    start, count = 0, len(rows)
    lengths = pc.binary_length(rows).to_numpy(zero_copy_only=False) if count else None
    while start < count:
        end, size = start, 0
        while end < count and end - start < max_rows and (end == start or size + lengths[end] < max_bytes):
            size += int(lengths[end]) + 8
            end += 1
        yield rows.slice(start, end - start).to_pylist()
        start = end


# --------------------------------------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientSettings:
    """What executors need to reach the Storage Write API (picklable: no clients)."""

    write_endpoint: str | None
    anonymous: bool
    timeout_s: float
    max_retries: int
    backoff_s: float

    @classmethod
    def of(cls, sink: BigQuerySink) -> ClientSettings:
        plaintext = any(url and url.startswith("http://") for url in (sink.endpoint, sink.write_endpoint))
        anonymous = plaintext or os.environ.get(ANONYMOUS_ENV, "").lower() in ("1", "true", "yes")
        return cls(
            write_endpoint=sink.write_endpoint,
            anonymous=anonymous,
            timeout_s=sink.timeout.total_seconds(),
            max_retries=sink.max_retries,
            backoff_s=sink.retry_backoff.total_seconds(),
        )

    def credentials(self) -> Any:
        return AnonymousCredentials() if self.anonymous else None  # None: google.auth's default


_write_clients: dict[tuple[str | None, bool], Any] = {}
_write_clients_lock = threading.Lock()


def write_client(settings: ClientSettings) -> Any:
    """This process's Storage Write API client for these settings (one gRPC channel, reused)."""
    key = (settings.write_endpoint, settings.anonymous)
    with _write_clients_lock:
        client = _write_clients.get(key)
        if client is None:
            try:
                client = _write_clients[key] = _new_write_client(settings)
            except DefaultCredentialsError as error:
                raise _no_credentials(error) from None
        return client


def _no_credentials(error: Exception) -> BigQuerySinkError:
    return BigQuerySinkError(
        f"no Google credentials: {error} (on every Spark node: GOOGLE_APPLICATION_CREDENTIALS, gcloud's "
        f"application-default login or a metadata server; {ANONYMOUS_ENV}=1 for an emulator)"
    )


def _new_write_client(settings: ClientSettings) -> Any:
    import grpc
    from google.cloud.bigquery_storage_v1 import BigQueryWriteClient
    from google.cloud.bigquery_storage_v1.services.big_query_write.transports import (
        BigQueryWriteGrpcTransport,
    )

    options = [
        ("grpc.max_send_message_length", 16 * 1024 * 1024),
        ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ]
    endpoint = settings.write_endpoint
    if endpoint and endpoint.startswith("http://"):
        channel = grpc.insecure_channel(endpoint.removeprefix("http://"), options=options)
        return BigQueryWriteClient(transport=BigQueryWriteGrpcTransport(channel=channel))
    client_options = ClientOptions(api_endpoint=endpoint.removeprefix("https://")) if endpoint else None
    return BigQueryWriteClient(credentials=settings.credentials(), client_options=client_options)


_R = TypeVar("_R")


def call_with_retries(
    settings: ClientSettings,
    what: str,
    call: Callable[[], _R],
    also_transient: tuple[type[Exception], ...] = (),
) -> _R:
    """`call` with up to `max_retries` retries of transient errors; other errors fail at once."""
    import concurrent.futures

    for attempt in range(settings.max_retries + 1):
        try:
            return call()
        except (*_TRANSIENT, *also_transient, concurrent.futures.TimeoutError, _requests_errors()) as error:
            if attempt == settings.max_retries:
                raise BigQuerySinkError(
                    f"{what}: {_message(error)} (after {attempt + 1} attempt(s))"
                ) from None
            wait = settings.backoff_s * 2**attempt
            log.warning("%s: %s; retrying in %.1fs", what, _message(error), wait)
            time.sleep(wait)
        except api_exceptions.GoogleAPIError as error:
            raise BigQuerySinkError(f"{what}: {_message(error)}") from None
    raise AssertionError("unreachable")


def _requests_errors() -> type[Exception]:
    import requests

    return requests.exceptions.RequestException


def _message(error: BaseException) -> str:
    return str(error) or type(error).__name__


# --------------------------------------------------------------------------------------------------------
# Storage Write API: one PENDING stream per partition (executors)
# --------------------------------------------------------------------------------------------------------

_CLOSE = object()
_EOF = object()


class _Connection:
    """One AppendRows call: requests go through a queue, responses come back through another."""

    def __init__(self, client: Any, stream: str) -> None:
        self.requests: queue.Queue[Any] = queue.Queue()
        self.responses: queue.Queue[Any] = queue.Queue()
        self.schema_sent = False

        def request_iterator() -> Iterator[Any]:
            while (request := self.requests.get()) is not _CLOSE:
                yield request

        # The transport's stub: no client-side retry that would re-read a half-consumed request iterator.
        self._call = client.transport.append_rows(
            request_iterator(), metadata=(("x-goog-request-params", f"write_stream={stream}"),)
        )
        self._reader = threading.Thread(target=self._read, name="bigquery-append-responses", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for response in self._call:
                self.responses.put(response)
            self.responses.put(_EOF)
        except Exception as error:  # the connection broke: the appender decides what to do
            self.responses.put(error)

    def close(self) -> None:
        self.requests.put(_CLOSE)
        self._reader.join(timeout=5)
        if self._reader.is_alive():
            self._call.cancel()

    def cancel(self) -> None:
        self.requests.put(_CLOSE)
        self._call.cancel()


class StreamAppender:
    """Appends serialized rows to one write stream with explicit offsets, a few requests ahead.

    A broken connection is reopened and the unacknowledged requests are sent again at their offsets; the
    service answers ALREADY_EXISTS for those it had already taken, which counts as done. Errors the
    service reports for a request (rejected rows, a bad offset) fail at once with its messages.
    """

    def __init__(
        self, settings: ClientSettings, stream: str, descriptor: bytes, where: str, offsets: bool = True
    ) -> None:
        from google.cloud.bigquery_storage_v1 import types

        self._types = types
        self._settings = settings
        self._client = write_client(settings)
        self._stream = stream
        self._descriptor = descriptor_pb2.DescriptorProto.FromString(descriptor)
        self._where = where
        self._offsets = offsets  # False for the default stream, which takes none
        self._pending: deque[tuple[int, list[bytes]]] = deque()
        self._offset = 0
        self._connection: _Connection | None = None
        self._reconnects = 0

    @property
    def stream(self) -> str:
        return self._stream

    def append(self, rows: list[bytes]) -> None:
        if not rows:
            return
        item = (self._offset, rows)
        self._pending.append(item)
        self._offset += len(rows)
        self._send(item)
        while len(self._pending) > MAX_IN_FLIGHT:
            self._await_response()

    def finish(self) -> int:
        """Wait for every response and close the connection; the rows appended."""
        try:
            while self._pending:
                self._await_response()
        except BaseException:
            if self._connection is not None:
                self._connection.cancel()
            raise
        if self._connection is not None:
            self._connection.close()
        return self._offset

    def abort(self) -> None:
        if self._connection is not None:
            self._connection.cancel()

    def _send(self, item: tuple[int, list[bytes]]) -> None:
        if self._connection is None:
            self._connection = _Connection(self._client, self._stream)
        request = self._types.AppendRowsRequest.pb()()
        request.write_stream = self._stream  # on every request (the emulator needs it)
        if self._offsets:
            request.offset.value = item[0]
        if not self._connection.schema_sent:
            request.proto_rows.writer_schema.proto_descriptor.CopyFrom(self._descriptor)
            self._connection.schema_sent = True
        request.proto_rows.rows.serialized_rows.extend(item[1])
        self._connection.requests.put(self._types.AppendRowsRequest.wrap(request))

    def _await_response(self) -> None:
        assert self._connection is not None
        offset, rows = self._pending[0]
        try:
            response = self._connection.responses.get(timeout=self._settings.timeout_s)
        except queue.Empty:
            self._reconnect(f"no answer within {self._settings.timeout_s:g}s")
            return
        if response is _EOF or isinstance(response, Exception):
            self._reconnect("the connection closed" if response is _EOF else _message(_api_error(response)))
            return
        pb = type(response).pb(response)
        if pb.HasField("error") and pb.error.code != 0:
            if pb.error.code == 6 and self._reconnects:  # ALREADY_EXISTS: taken before the reconnect
                self._pending.popleft()
                return
            raise BigQuerySinkError(self._rejection(pb, offset, len(rows)))
        self._pending.popleft()

    def _rejection(self, pb: Any, offset: int, count: int) -> str:
        details = [
            f"row {offset + row_error.index}: {row_error.message}"
            for row_error in pb.row_errors[:ROW_ERRORS_SHOWN]
        ]
        more = len(pb.row_errors) - ROW_ERRORS_SHOWN
        if more > 0:
            details.append(f"and {more} more row error(s)")
        return (
            f"{self._where}: BigQuery rejected rows {offset}..{offset + count - 1} of stream {self._stream}: "
            f"{_status_name(pb.error.code)}: {pb.error.message}"
            + (f" ({'; '.join(details)})" if details else "")
        )

    def _reconnect(self, reason: str) -> None:
        if self._connection is not None:
            self._connection.cancel()
            self._connection = None
        if self._reconnects >= self._settings.max_retries:
            raise BigQuerySinkError(f"{self._where}: appending to {self._stream} failed: {reason}")
        wait = self._settings.backoff_s * 2**self._reconnects
        self._reconnects += 1
        log.warning("%s: %s; reconnecting in %.1fs", self._where, reason, wait)
        time.sleep(wait)
        for item in list(self._pending):
            self._send(item)


def _api_error(error: Exception) -> Exception:
    import grpc

    if isinstance(error, grpc.RpcError) and hasattr(error, "code"):
        return api_exceptions.from_grpc_error(error)
    return error


def _status_name(code: int) -> str:
    import grpc

    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status.name
    return str(code)


class BigQueryPartitionWriter:
    """Executor side: one partition of a micro-batch into a new PENDING stream, finalized, named back."""

    def __init__(
        self,
        settings: ClientSettings,
        table_path: str,
        columns: list[WireColumn],
        descriptor: bytes,
        batch_size: int,
        batch_id: int,
    ) -> None:
        self.settings = settings
        self.table_path = table_path
        self.columns = columns
        self.descriptor = descriptor
        self.batch_size = batch_size
        self.batch_id = batch_id

    def write(self, batches: Iterator[pa.RecordBatch]) -> tuple[str, int] | None:
        """The stream holding the partition's rows and their number; None for an empty partition."""
        from google.cloud.bigquery_storage_v1 import types

        encoder = _encoder(self.columns, self.descriptor)
        client = write_client(self.settings)
        project, dataset, table = self.table_path.split("/")[1::2]
        where = f"bigquery sink {project}.{dataset}.{table}: batch {self.batch_id}"
        appender: StreamAppender | None = None
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                try:
                    encoded = encoder.encode(batch)
                except BigQuerySinkError as error:
                    raise BigQuerySinkError(f"{where}: {error}") from None
                if appender is None:
                    stream = call_with_retries(
                        self.settings,
                        f"{where}: creating a write stream",
                        lambda: client.create_write_stream(
                            parent=self.table_path,
                            write_stream=types.WriteStream(type_=types.WriteStream.Type.PENDING),
                            retry=None,
                            timeout=self.settings.timeout_s,
                        ),
                        also_transient=(api_exceptions.NotFound,),  # a table created a moment ago
                    )
                    appender = StreamAppender(self.settings, stream.name, self.descriptor, where)
                for rows in _chunks(encoded, self.batch_size, MAX_REQUEST_BYTES):
                    appender.append(rows)
            if appender is None:
                return None
            rows = appender.finish()
        except BaseException:
            if appender is not None:
                appender.abort()
            raise
        name = appender.stream
        call_with_retries(
            self.settings,
            f"{where}: finalizing {name}",
            lambda: client.finalize_write_stream(name=name, retry=None, timeout=self.settings.timeout_s),
        )
        return name, rows


_encoders: dict[bytes, RowEncoder] = {}


def _encoder(columns: list[WireColumn], descriptor: bytes) -> RowEncoder:
    encoder = _encoders.get(descriptor)
    if encoder is None:
        encoder = _encoders[descriptor] = RowEncoder(columns, descriptor)
    return encoder


def write_streams(batch: DataFrame, writer: BigQueryPartitionWriter) -> list[tuple[str, int]]:
    """Each non-empty partition's finalized stream and row count, from the task attempts Spark kept.

    `jobs.sinks.partitions.write_partitions` with a result per partition instead of a row count: the
    commit needs the names of the streams that successful attempts wrote.
    """
    names = batch.columns

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        written = writer.write(arrow_batch.rename_columns(names) for arrow_batch in batches)
        if written is not None:
            yield pa.RecordBatch.from_pydict({"stream": [written[0]], "rows": [written[1]]})

    positional = batch.toDF(*(f"_{index}" for index in range(len(names))))
    results = positional.mapInArrow(write_partition, "stream string, rows long").collect()
    return [(row.stream, row.rows) for row in results]


# --------------------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------------------


_COMMIT_LOG_COLUMNS = [
    WireColumn("query_id", "STRING", False),
    WireColumn("batch_id", "INT64", False),
    WireColumn("streams", "STRING", True),
    WireColumn("row_count", "INT64", False),
    WireColumn("dagger", "STRING", False),
    WireColumn("recorded_at", "TIMESTAMP", False),
]


@dataclass(frozen=True)
class _Prepared:
    columns: list[WireColumn]
    descriptor: bytes


class BigQuerySinkWriter:
    """Driver side: table set-up on the first write, then one atomic commit per micro-batch."""

    def __init__(self, sink: BigQuerySink, context: SinkContext) -> None:
        spec = context.spec
        self.sink = sink
        self.spec = spec
        self.settings = ClientSettings.of(sink)
        self.table_id = f"{sink.project}.{sink.dataset}.{sink.table}"
        self.table_path = f"projects/{sink.project}/datasets/{sink.dataset}/tables/{sink.table}"
        self.commit_log_id = f"{self.table_id}{COMMIT_LOG_SUFFIX}"
        self.commit_log_path = f"{self.table_path}{COMMIT_LOG_SUFFIX}"
        self._where = f"bigquery sink {self.table_id}"
        self._client: bigquery.Client | None = None
        self._prepared: dict[str, _Prepared] = {}
        self._known: dict[tuple[str, int], list[str]] = {}
        self._looked_up: tuple[str, int] | None = None  # (query key, first batch id looked up)
        self._last_batch: tuple[str, int] | None = None

    @property
    def reads_whole_batch(self) -> bool:
        return True

    @property
    def client(self) -> bigquery.Client:
        if self._client is None:
            options = ClientOptions(api_endpoint=self.sink.endpoint) if self.sink.endpoint else None
            try:
                self._client = bigquery.Client(
                    project=self.sink.project,
                    credentials=self.settings.credentials(),
                    location=self.sink.location,
                    client_options=options,
                )
            except DefaultCredentialsError as error:
                raise _no_credentials(error) from None
        return self._client

    def write(self, batch: DataFrame, batch_id: int) -> None:
        prepared = self._prepare(batch.schema)
        key = self._query_key(batch)
        recorded = self._recorded_streams(key, batch_id)
        if recorded is not None and self._commit_recorded(batch_id, recorded):
            # Not written again, but still computed once, as a write would: the query's state, watermark
            # and metrics advance as they do for any batch.
            batch.count()
            self._last_batch = (key, batch_id)
            return
        writer = BigQueryPartitionWriter(
            self.settings,
            self.table_path,
            prepared.columns,
            prepared.descriptor,
            self.sink.batch_size,
            batch_id,
        )
        written = write_streams(batch, writer)
        self._last_batch = (key, batch_id)
        if not written:
            return
        streams = [stream for stream, _ in written]
        rows = sum(count for _, count in written)
        self._record(key, batch_id, streams, rows)
        self._commit(batch_id, streams)
        log.info(
            "%s: batch %s: %s rows committed from %s stream(s)", self._where, batch_id, rows, len(streams)
        )

    # -- the table ----------------------------------------------------------------------------------------

    def _prepare(self, schema: T.StructType) -> _Prepared:
        cache_key = schema.json()
        prepared = self._prepared.get(cache_key)
        if prepared is None:
            try:
                table = self._table(schema)
                columns = wire_columns(schema, list(table.schema), self.table_id)
            except ValueError as error:
                raise BigQuerySinkError(f"{self._where}: {error}") from None
            self._ensure_commit_log()
            descriptor = row_descriptor(columns).SerializeToString()
            prepared = self._prepared[cache_key] = _Prepared(columns, descriptor)
        return prepared

    def _table(self, schema: T.StructType) -> bigquery.Table:
        existing = self._get_table(self.table_id)
        if existing is not None:
            self._warn_if_layout_differs(existing)
            return existing
        if not self.sink.create_table:
            raise BigQuerySinkError(
                f"{self._where}: the table does not exist and create_table is false; create it, or set "
                "create_table: true to create it from the result's columns"
            )
        _unique(schema.names, "result")
        fields = [bigquery_field(field.name, field.dataType) for field in schema.fields]
        table = bigquery.Table(self.table_id, schema=fields)
        by_name = {field.name.lower(): field for field in fields}
        if self.sink.partition_field:
            column = by_name.get(self.sink.partition_field.lower())
            if (
                column is None
                or column.mode == "REPEATED"
                or column.field_type not in ("TIMESTAMP", "DATE", "DATETIME")
            ):
                raise BigQuerySinkError(
                    f"{self._where}: partition_field {self.sink.partition_field!r} must name a TIMESTAMP, "
                    f"DATE or DATETIME column of the result (columns: {', '.join(schema.names)})"
                )
            table.time_partitioning = bigquery.TimePartitioning(
                type_=time_partitioning_type(self.sink.partition_type), field=column.name
            )
        for name in self.sink.clustering_fields:
            column = by_name.get(name.lower())
            if column is None or column.mode == "REPEATED" or column.field_type == "RECORD":
                raise BigQuerySinkError(
                    f"{self._where}: clustering_fields: {name!r} must name a top-level, non-repeated column "
                    f"of the result (columns: {', '.join(schema.names)})"
                )
        if self.sink.clustering_fields:
            table.clustering_fields = [by_name[name.lower()].name for name in self.sink.clustering_fields]
        self._create_dataset()
        created = self._create_table(table)
        log.info("%s: created the table (%s columns)", self._where, len(fields))
        return created

    def _warn_if_layout_differs(self, table: bigquery.Table) -> None:
        partitioning = table.time_partitioning
        wanted = self.sink.partition_field
        if wanted and (partitioning is None or (partitioning.field or "").lower() != wanted.lower()):
            log.warning(
                "%s: the existing table is not partitioned by %s; written as it is", self._where, wanted
            )

    def _get_table(self, table_id: str) -> bigquery.Table | None:
        def get() -> bigquery.Table | None:
            try:
                return self.client.get_table(table_id, retry=None, timeout=self.settings.timeout_s)
            except api_exceptions.NotFound:
                return None

        return call_with_retries(self.settings, f"{self._where}: reading table {table_id}", get)

    def _create_dataset(self) -> None:
        dataset = bigquery.Dataset(f"{self.sink.project}.{self.sink.dataset}")
        if self.sink.location:
            dataset.location = self.sink.location
        call_with_retries(
            self.settings,
            f"{self._where}: creating dataset {dataset.dataset_id}",
            lambda: self.client.create_dataset(
                dataset, exists_ok=True, retry=None, timeout=self.settings.timeout_s
            ),
        )

    def _create_table(self, table: bigquery.Table) -> bigquery.Table:
        def create() -> bigquery.Table:
            try:
                return self.client.create_table(table, retry=None, timeout=self.settings.timeout_s)
            except api_exceptions.Conflict:  # created meanwhile by another writer
                return self.client.get_table(table.reference, retry=None, timeout=self.settings.timeout_s)

        return call_with_retries(self.settings, f"{self._where}: creating the table", create)

    # -- the commit log -----------------------------------------------------------------------------------

    def _ensure_commit_log(self) -> None:
        if self._get_table(self.commit_log_id) is not None:
            return
        schema = [
            bigquery.SchemaField(
                column.name, column.bq_type, mode="REPEATED" if column.repeated else "NULLABLE"
            )
            for column in _COMMIT_LOG_COLUMNS
        ]
        table = bigquery.Table(self.commit_log_id, schema=schema)
        table.description = f"Micro-batches the dagger sink wrote to {self.sink.table}: do not edit."
        table.time_partitioning = bigquery.TimePartitioning(
            type_=bigquery.TimePartitioningType.DAY,
            field="recorded_at",
            expiration_ms=COMMIT_LOG_RETENTION_DAYS * 86_400_000,
        )
        table.clustering_fields = ["query_id", "batch_id"]
        self._create_table(table)

    def _query_key(self, batch: DataFrame) -> str:
        """The streaming query's id (kept in the checkpoint), else the dagger and its checkpoint."""
        try:
            query_id = batch.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
        except Exception:  # Spark Connect has no SparkContext
            query_id = None
        return query_id or f"{self.spec.name}@{self.spec.resolved_checkpoint_location}"

    def _recorded_streams(self, key: str, batch_id: int) -> list[str] | None:
        """The streams recorded for this batch by an earlier attempt, if any.

        The commit log is read at the first batch and whenever batch ids do not follow each other; a
        running query's next batch cannot have been recorded by anyone else.
        """
        follows = self._last_batch == (key, batch_id - 1)
        if not follows:
            self._known = self._lookup(key, batch_id)
        return self._known.get((key, batch_id))

    def _lookup(self, key: str, from_batch: int) -> dict[tuple[str, int], list[str]]:
        sql = (
            f"SELECT batch_id, streams FROM `{self.commit_log_id}` "
            "WHERE query_id = @query_id AND batch_id >= @batch_id ORDER BY recorded_at"
        )
        parameters = [
            bigquery.ScalarQueryParameter("query_id", "STRING", key),
            bigquery.ScalarQueryParameter("batch_id", "INT64", from_batch),
        ]
        rows = self._query(sql, parameters, "reading the commit log")
        return {(key, row["batch_id"]): list(row["streams"]) for row in rows}

    def _record(self, key: str, batch_id: int, streams: list[str], rows: int) -> None:
        """One commit-log row, appended to the log's default stream: durable and visible to queries once
        acknowledged, without a DML job per micro-batch."""
        row = pa.RecordBatch.from_pydict(
            {
                "query_id": [key],
                "batch_id": [batch_id],
                "streams": [streams],
                "row_count": [rows],
                "dagger": [self.spec.name],
                "recorded_at": pa.array([time.time_ns() // 1000], pa.timestamp("us", "UTC")),
            }
        )
        descriptor = row_descriptor(_COMMIT_LOG_COLUMNS).SerializeToString()
        encoded = _encoder(_COMMIT_LOG_COLUMNS, descriptor).encode(row).to_pylist()
        stream = f"{self.commit_log_path}/streams/_default"
        where = f"{self._where}: recording batch {batch_id} in the commit log"
        appender = StreamAppender(self.settings, stream, descriptor, where, offsets=False)
        appender.append(encoded)
        appender.finish()
        self._known[(key, batch_id)] = streams

    def _query(self, sql: str, parameters: list[Any], what: str) -> list[Any]:
        config = bigquery.QueryJobConfig(query_parameters=parameters)
        timeout = self.settings.timeout_s

        def run() -> list[Any]:
            job = self.client.query(sql, job_config=config, retry=None, job_retry=None, timeout=timeout)
            return list(job.result(retry=None, timeout=timeout))

        return call_with_retries(self.settings, f"{self._where}: {what}", run)

    # -- commits ------------------------------------------------------------------------------------------

    def _commit_recorded(self, batch_id: int, streams: list[str]) -> bool:
        """Commit the streams an earlier attempt recorded; False when they are gone (write afresh)."""
        errors = self._batch_commit(batch_id, streams)
        if not errors:
            log.warning(
                "%s: batch %s was recorded but not committed by an earlier attempt: committed its %s "
                "stream(s) now",
                self._where,
                batch_id,
                len(streams),
            )
            return True
        if all(_already_committed(error) for error in errors):
            log.info("%s: batch %s was committed by an earlier attempt: skipped", self._where, batch_id)
            return True
        if any(error.code == _storage_error_code("STREAM_NOT_FOUND") for error in errors):
            log.warning(
                "%s: batch %s was recorded by an earlier attempt, but BigQuery no longer knows its streams: "
                "writing it again (if that attempt had committed, its rows are now there twice)",
                self._where,
                batch_id,
            )
            return False
        raise BigQuerySinkError(f"{self._where}: batch {batch_id}: commit failed: {_describe_errors(errors)}")

    def _commit(self, batch_id: int, streams: list[str]) -> None:
        errors = self._batch_commit(batch_id, streams)
        if errors and not all(_already_committed(error) for error in errors):
            raise BigQuerySinkError(
                f"{self._where}: batch {batch_id}: commit failed: {_describe_errors(errors)}"
            )

    def _batch_commit(self, batch_id: int, streams: list[str]) -> list[Any]:
        from google.cloud.bigquery_storage_v1 import types

        client = write_client(self.settings)
        request = types.BatchCommitWriteStreamsRequest(parent=self.table_path, write_streams=streams)
        response = call_with_retries(
            self.settings,
            f"{self._where}: committing batch {batch_id}",
            lambda: client.batch_commit_write_streams(
                request=request, retry=None, timeout=self.settings.timeout_s
            ),
        )
        return list(response.stream_errors)


def _storage_error_code(name: str) -> int:
    from google.cloud.bigquery_storage_v1 import types

    return int(types.StorageError.StorageErrorCode[name])


def _already_committed(error: Any) -> bool:
    """BigQuery says STREAM_ALREADY_COMMITTED; the emulator INVALID_STREAM_STATE "state=COMMITTED"."""
    if error.code == _storage_error_code("STREAM_ALREADY_COMMITTED"):
        return True
    return (
        error.code == _storage_error_code("INVALID_STREAM_STATE")
        and "committed" in error.error_message.lower()
    )


def _describe_errors(errors: list[Any]) -> str:
    return "; ".join(f"{error.entity}: {error.error_message}" for error in errors[:ROW_ERRORS_SHOWN])

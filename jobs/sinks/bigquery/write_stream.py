"""BigQuery sink, Storage Write API (executors): one PENDING write stream per partition; the commit call.

Appends go through google-cloud-bigquery-storage's `AppendRowsStream` (protobuf rows: its Arrow format is
allow-listed only), `MAX_IN_FLIGHT` requests ahead of their answers, each with an explicit offset. What is
still done here, and why:

- Every request names its write stream. The library names it in a connection's first request only; the
  emulator (bqemulator 1.4) binds each request to the stream it names: it answers a later request without
  one with NOT_FOUND "Stream not found: " and closes the connection.
- The library sends nothing again: when a connection breaks it fails the requests waiting for an answer.
  So a broken connection, or no answer within `timeout`, closes that `AppendRowsStream`, and a new one
  sends the unacknowledged requests again at their offsets (at most `max_retries` times per stream,
  waiting as `jobs.engine.retry.RetryPolicy` says). The service answers ALREADY_EXISTS for a request it
  had taken before (the emulator too: "Offset 2 already buffered; next expected 10"), which then counts
  as done.
- Requests are cut at 9 MB (`rows.request_chunks`): BigQuery and the emulator refuse AppendRows requests
  over 10 MiB, and the library sends what it is given.
- Committed streams: BigQuery answers a second commit with STREAM_ALREADY_COMMITTED, the emulator with
  INVALID_STREAM_STATE "Stream must be finalized before BatchCommit; state=COMMITTED"; `already_committed`
  takes both.

PENDING streams, offsets, FinalizeWriteStream and BatchCommitWriteStreams work on the emulator as on
BigQuery, through the library's client as it is.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pyarrow as pa
from google.api_core import exceptions as api_exceptions
from google.api_core.future import polling
from google.cloud.bigquery_storage_v1 import types
from google.cloud.bigquery_storage_v1.exceptions import StreamClosedError
from google.cloud.bigquery_storage_v1.writer import AppendRowsStream

from jobs.sinks.bigquery.clients import (
    BigQuerySinkError,
    ClientSettings,
    call_with_retries,
    message,
    write_client,
)
from jobs.sinks.bigquery.rows import request_chunks, table_rows
from jobs.sinks.bigquery.schema import WireColumn

log = logging.getLogger("dagger.sink.bigquery")

MAX_REQUEST_BYTES = 9 * 1024 * 1024  # BigQuery and the emulator refuse AppendRows requests over 10 MiB
MAX_IN_FLIGHT = 4  # AppendRows requests sent ahead of their answers, per stream
ERRORS_SHOWN = 5
_ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS.value[0]
_OUT_OF_RANGE = grpc.StatusCode.OUT_OF_RANGE.value[0]
# How often a waiting append looks at its answer (the library's futures poll every 1 s to 20 s otherwise).
_ANSWER_POLLING = polling.DEFAULT_POLLING.with_delay(initial=0.001, maximum=0.02, multiplier=2)


class _ConnectionLost(Exception):
    """The connection broke or went silent: the unacknowledged requests go again on a new one."""


@dataclass
class _Request:
    offset: int
    rows: list[bytes]
    answer: Any = None  # the library's future
    resent: bool = False


class Appender:
    """Appends serialized rows to one write stream, each request at its offset (none on `_default`)."""

    def __init__(
        self, settings: ClientSettings, stream: str, descriptor: bytes, where: str, offsets: bool = True
    ) -> None:
        self._settings = settings
        self._client = write_client(settings)
        self._stream = stream
        template = types.AppendRowsRequest.pb()(write_stream=stream)
        template.proto_rows.writer_schema.proto_descriptor.MergeFromString(descriptor)
        self._template = types.AppendRowsRequest.wrap(template)  # merged into a connection's first request
        self._where = where
        self._offsets = offsets
        self._pending: deque[_Request] = deque()
        self._appended = 0
        self._connection: AppendRowsStream | None = None
        self._reconnected = False

    def write(self, requests: Iterable[list[bytes]]) -> int:
        """Append each list of rows as one request; the rows appended, once every one is acknowledged."""
        chunks = iter(requests)
        try:
            self._settings.retry.call(
                lambda: self._append(chunks),
                retry_if=lambda error: isinstance(error, _ConnectionLost),
                before_wait=lambda error, retry, delay: log.warning(
                    "%s: %s; reconnecting in %.1fs", self._where, error, delay
                ),
                give_up=lambda error, attempts: BigQuerySinkError(
                    f"{self._where}: appending to {self._stream} failed: {error}"
                ),
            )
        finally:
            self._disconnect()
        return self._appended

    def _append(self, chunks: Iterator[list[bytes]]) -> None:
        """On a new connection: the unacknowledged requests again, then the rest."""
        self._reconnected = self._connection is not None  # the previous one broke
        self._disconnect()
        self._connection = AppendRowsStream(self._client, self._template)
        for request in self._pending:
            request.resent = True
            self._send(request)
        for rows in chunks:
            request = _Request(self._appended, rows)
            self._pending.append(request)
            self._appended += len(rows)
            self._send(request)
            while len(self._pending) > MAX_IN_FLIGHT:
                self._acknowledged(self._pending[0])
        while self._pending:
            self._acknowledged(self._pending[0])

    def _send(self, request: _Request) -> None:
        assert self._connection is not None
        pb = types.AppendRowsRequest.pb()()
        # On every request, not only a connection's first as the library does: bqemulator answers a request
        # without it NOT_FOUND "Stream not found: " and closes the connection.
        pb.write_stream = self._stream
        if self._offsets:
            pb.offset.value = request.offset
        pb.proto_rows.rows.serialized_rows.extend(request.rows)
        try:
            request.answer = self._connection.send(types.AppendRowsRequest.wrap(pb))
        except (api_exceptions.GoogleAPIError, grpc.RpcError, StreamClosedError, ValueError) as error:
            raise _ConnectionLost(message(error)) from None  # opening the connection failed, or it broke

    def _acknowledged(self, request: _Request) -> None:
        try:
            request.answer.result(timeout=self._settings.timeout_s, polling=_ANSWER_POLLING)
        except TimeoutError:
            raise _ConnectionLost(f"no answer within {self._settings.timeout_s:g}s") from None
        except Exception as error:
            answer = getattr(error, "response", None)
            if not isinstance(answer, types.AppendRowsResponse):  # no answer: the connection failed
                raise _ConnectionLost(message(error)) from None
            pb = type(answer).pb(answer)
            # ALREADY_EXISTS for a request sent again: taken before the connection broke (bqemulator:
            # "Offset 2 already buffered; next expected 10"), so done.
            if pb.error.code == _OUT_OF_RANGE and self._reconnected:
                # A request of the broken connection that the service had read but not yet applied lands
                # after one of this connection's (bqemulator: "Offset 9500 beyond next expected 9000"):
                # go again from the first unacknowledged offset, as for a broken connection.
                raise _ConnectionLost(self._rejection(pb, request)) from None
            if not (pb.error.code == _ALREADY_EXISTS and request.resent):
                raise BigQuerySinkError(self._rejection(pb, request)) from None
        self._pending.popleft()

    def _rejection(self, pb: Any, request: _Request) -> str:
        status = next((code.name for code in grpc.StatusCode if code.value[0] == pb.error.code), None)
        details = [
            f"row {request.offset + row_error.index}: {row_error.message}"
            for row_error in pb.row_errors[:ERRORS_SHOWN]
        ]
        if len(pb.row_errors) > ERRORS_SHOWN:
            details.append(f"and {len(pb.row_errors) - ERRORS_SHOWN} more row error(s)")
        first, last = request.offset, request.offset + len(request.rows) - 1
        return (
            f"{self._where}: BigQuery rejected rows {first}..{last} of stream {self._stream}: "
            f"{status or pb.error.code}: {pb.error.message}" + (f" ({'; '.join(details)})" if details else "")
        )

    def _disconnect(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(StreamClosedError):  # the library had closed it (it broke)
                self._connection.close()
            self._connection = None


class BigQueryPartitionWriter:
    """One partition of a micro-batch into a new PENDING stream, finalized, named back to the driver."""

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
        project, dataset, table = self.table_path.split("/")[1::2]
        where = f"bigquery sink {project}.{dataset}.{table}: batch {self.batch_id}"
        requests = self._requests(batches, where)
        first = next(requests, None)
        if first is None:
            return None
        client = write_client(self.settings)
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
        ).name
        rows = Appender(self.settings, stream, self.descriptor, where).write(
            itertools.chain([first], requests)
        )
        call_with_retries(
            self.settings,
            f"{where}: finalizing {stream}",
            lambda: client.finalize_write_stream(name=stream, retry=None, timeout=self.settings.timeout_s),
        )
        return stream, rows

    def _requests(self, batches: Iterator[pa.RecordBatch], where: str) -> Iterator[list[bytes]]:
        encoder = table_rows(self.columns, self.descriptor)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            try:
                encoded = encoder.encode(batch)
            except ValueError as error:  # a value the table cannot take, named by column
                raise BigQuerySinkError(f"{where}: {error}") from None
            yield from request_chunks(encoded, self.batch_size, MAX_REQUEST_BYTES)


def batch_commit(settings: ClientSettings, table_path: str, streams: list[str], what: str) -> list[Any]:
    """Commit `streams` at once (all or none); the service's errors per stream, none when committed."""
    client = write_client(settings)
    request = types.BatchCommitWriteStreamsRequest(parent=table_path, write_streams=streams)
    response = call_with_retries(
        settings,
        what,
        lambda: client.batch_commit_write_streams(request=request, retry=None, timeout=settings.timeout_s),
    )
    return list(response.stream_errors)


def storage_error(error: Any, name: str) -> bool:
    return error.code == int(types.StorageError.StorageErrorCode[name])


def already_committed(error: Any) -> bool:
    """BigQuery says STREAM_ALREADY_COMMITTED; the emulator INVALID_STREAM_STATE "state=COMMITTED"."""
    if storage_error(error, "STREAM_ALREADY_COMMITTED"):
        return True
    return storage_error(error, "INVALID_STREAM_STATE") and "committed" in error.error_message.lower()


def describe_errors(errors: list[Any]) -> str:
    return "; ".join(f"{error.entity}: {error.error_message}" for error in errors[:ERRORS_SHOWN])

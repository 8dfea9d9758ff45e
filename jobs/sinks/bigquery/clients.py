"""BigQuery sink, clients: settings the executors get, the Storage Write API client, calls with retries.

**Client settings.** Credentials come from the environment (google.auth's default: a service-account file
in `GOOGLE_APPLICATION_CREDENTIALS`, the metadata server...), on the driver and on every executor.
Anonymous credentials are used instead when `endpoint` or `write_endpoint` is a plaintext `http://` URL
(an emulator) or `DAGGER_BIGQUERY_ANONYMOUS=1`. Every call has the sink's `timeout` and at most
`max_retries` retries of transient errors (`retry_backoff`, doubled each time), never the client
libraries' own open-ended retries.

A plaintext `write_endpoint` (an emulator) gets an insecure gRPC channel made here: the client library
makes TLS channels only.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import requests
from google.api_core import exceptions as api_exceptions
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.auth.exceptions import DefaultCredentialsError
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient
from google.cloud.bigquery_storage_v1.services.big_query_write.transports import BigQueryWriteGrpcTransport

from jobs.engine.retry import RetryPolicy
from jobs.sinks.bigquery.config import BigQuerySink

log = logging.getLogger("dagger.sink.bigquery")

ANONYMOUS_ENV = "DAGGER_BIGQUERY_ANONYMOUS"
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


# Its public name, in tracebacks (a Spark task's error shows it) and pickles: the writer module's.
BigQuerySinkError.__module__ = "jobs.sinks.bigquery.writer"


@dataclass(frozen=True)
class ClientSettings:
    """What executors need to reach the Storage Write API (picklable: no clients)."""

    write_endpoint: str | None
    anonymous: bool
    timeout_s: float
    retry: RetryPolicy

    @classmethod
    def of(cls, sink: BigQuerySink) -> ClientSettings:
        plaintext = any(url and url.startswith("http://") for url in (sink.endpoint, sink.write_endpoint))
        anonymous = plaintext or os.environ.get(ANONYMOUS_ENV, "").lower() in ("1", "true", "yes")
        return cls(
            write_endpoint=sink.write_endpoint,
            anonymous=anonymous,
            timeout_s=sink.timeout.total_seconds(),
            retry=RetryPolicy.of(sink),
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
                raise no_credentials(error) from None
        return client


def no_credentials(error: Exception) -> BigQuerySinkError:
    return BigQuerySinkError(
        f"no Google credentials: {error} (on every Spark node: GOOGLE_APPLICATION_CREDENTIALS, gcloud's "
        f"application-default login or a metadata server; {ANONYMOUS_ENV}=1 for an emulator)"
    )


def _new_write_client(settings: ClientSettings) -> Any:
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
    transient = (*_TRANSIENT, *also_transient, requests.exceptions.RequestException)
    try:
        return settings.retry.call(
            call,
            retry_if=lambda error: isinstance(error, transient),
            before_wait=lambda error, retry, delay: log.warning(
                "%s: %s; retrying in %.1fs", what, message(error), delay
            ),
            give_up=lambda error, attempts: BigQuerySinkError(
                f"{what}: {message(error)} (after {attempts} attempt(s))"
            ),
        )
    except api_exceptions.GoogleAPIError as error:
        raise BigQuerySinkError(f"{what}: {message(error)}") from None


def message(error: BaseException) -> str:
    return str(error) or type(error).__name__

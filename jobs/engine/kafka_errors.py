"""Why a Kafka client got no answer: its error events, kept so that a failure names the real cause.

librdkafka reports a refused login or a failed TLS handshake as an error event and keeps retrying; the
call that was waiting (a metadata request, a flush) then fails with a transport error or a timeout that
hides why. Every client of the project gets a `ClientErrors` as its `error_cb`: a wait that finds a
permanent error among them fails at once, with the client's own words, instead of retrying until its
timeout. (librdkafka's messages name brokers and mechanisms, never credentials.)
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

_Answer = TypeVar("_Answer")

# Errors a retry cannot cure: the client's settings or credentials are wrong.
PERMANENT_ERROR_CODES = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError._SSL,
        KafkaError._INVALID_ARG,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
)


class ClientErrors:
    """The latest error events of one client; pass an instance as the client's `error_cb`."""

    def __init__(self) -> None:
        self._errors: deque[KafkaError] = deque(maxlen=20)

    def __call__(self, error: KafkaError) -> None:
        self._errors.append(error)

    def clear(self) -> None:
        self._errors.clear()

    def permanent(self) -> KafkaError | None:
        """The latest error that no retry will cure, if the client reported one."""
        return next(
            (
                error
                for error in reversed(self._errors)
                if error.fatal() or error.code() in PERMANENT_ERROR_CODES
            ),
            None,
        )


def flush_or_fail(
    producer: Producer, errors: ClientErrors, timeout_s: float
) -> tuple[int, KafkaError | None]:
    """Flush `producer` (whose `error_cb` is `errors`), giving up early on a permanent error.

    Returns the records still unacknowledged and the permanent error, if that ended the wait; records left
    behind are purged, so the producer can be dropped without them.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = producer.flush(max(0.0, min(1.0, deadline - time.monotonic())))
        permanent = errors.permanent() if remaining else None
        if remaining == 0 or permanent is not None or time.monotonic() >= deadline:
            if remaining:
                producer.purge()
            return remaining, permanent


def ask_or_fail(
    client: Any, errors: ClientErrors, call: Callable[[float], _Answer], timeout_s: float
) -> _Answer:
    """`call(timeout)` on `client` (whose `error_cb` is `errors`) in short slices until it answers or
    `timeout_s` passes; a permanent error the client reports meanwhile ends the wait at once, raised as a
    `KafkaException` of that error (a refused login, a failed TLS handshake) instead of a timeout."""
    deadline = time.monotonic() + timeout_s
    slice_s = 1.0
    while True:
        try:
            return call(max(0.1, min(slice_s, deadline - time.monotonic())))
        except KafkaException:
            client.poll(0)  # serves the client's error events
            permanent = errors.permanent()
            if permanent is not None:
                raise KafkaException(permanent) from None
            if time.monotonic() >= deadline:
                raise
        slice_s = min(slice_s * 2, 8.0)

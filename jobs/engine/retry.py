"""The one retry policy of the clients that retry a failed call (the HTTP and BigQuery sinks, enrichments).

At most `max_retries` retries after the first attempt; the first retry after `retry_backoff`, each further
one after twice the wait before it (no jitter, no cap): the meaning of the `max_retries` and `retry_backoff`
keys of every sink (`jobs.sinks.config.BatchedSinkConfig`) and enrichment.

`RetryPolicy.call` runs the loop (`call_async` for a coroutine); the caller says which errors are worth
another attempt, what to log before a wait, and what to raise once the retries are spent:

    RetryPolicy.of(sink).call(
        send,
        retry_if=lambda error: isinstance(error, ConnectionError),
        before_wait=lambda error, retry, delay: log.warning("%s; retry %d in %.1fs", error, retry, delay),
        give_up=lambda error, attempts: SinkError(f"failed after {attempts} attempt(s): {error}"),
    )

An error that `retry_if` turns down is raised as it is, at once (so is the last error without `give_up`).
A retry for which `at_once(error)` holds goes without a wait, and the next wait does not double: a client
failing over to a host it has not tried yet.

Inside `tallying_retries()`, every attempt and every retry of the calls made is counted: a sink's partition
write returns the tally with its rows (`jobs.sinks.partitions`), so requests and retries reach the metrics
from the tasks Spark kept, once each.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

R = TypeVar("R")


@dataclass
class RetryTally:
    """Attempts made through `RetryPolicy` calls, and how many of them were retries of a failed one."""

    attempts: int = 0
    retries: int = 0


_tally: ContextVar[RetryTally | None] = ContextVar("retry_tally", default=None)


@contextlib.contextmanager
def tallying_retries() -> Iterator[RetryTally]:
    """Counts the attempts and retries of the `RetryPolicy` calls made inside the block."""
    tally = RetryTally()
    token = _tally.set(tally)
    try:
        yield tally
    finally:
        _tally.reset(token)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int
    backoff_s: float
    """The wait before the first retry, in seconds."""

    @classmethod
    def of(cls, config: Any) -> RetryPolicy:
        """The policy of a config with `max_retries` and `retry_backoff` (a timedelta)."""
        return cls(config.max_retries, config.retry_backoff.total_seconds())

    def delay(self, waits: int) -> float:
        """The wait before a retry that `waits` waits came before."""
        return self.backoff_s * 2**waits

    def call(
        self,
        attempt: Callable[[], R],
        *,
        retry_if: Callable[[Exception], bool],
        before_wait: Callable[[Exception, int, float], None] | None = None,
        give_up: Callable[[Exception, int], BaseException] | None = None,
        at_once: Callable[[Exception], bool] | None = None,
    ) -> R:
        """`attempt()`'s result, retried as the policy says.

        `before_wait(error, retry, delay)`: the failed attempt's error, the number of the retry to come
        (1 for the first) and the seconds about to be waited. `give_up(error, attempts)`: the exception to
        raise after the last attempt failed with a retryable `error`.
        """
        retries = _Retries(self, retry_if, before_wait, give_up, at_once, _tally.get())
        while True:
            retries.attempting()
            try:
                return attempt()
            except Exception as error:
                delay = retries.after(error)
            time.sleep(delay)

    async def call_async(
        self,
        attempt: Callable[[], Awaitable[R]],
        *,
        retry_if: Callable[[Exception], bool],
        before_wait: Callable[[Exception, int, float], None] | None = None,
        give_up: Callable[[Exception, int], BaseException] | None = None,
        at_once: Callable[[Exception], bool] | None = None,
    ) -> R:
        """`call` for a coroutine: the waits do not block the event loop."""
        retries = _Retries(self, retry_if, before_wait, give_up, at_once, _tally.get())
        while True:
            retries.attempting()
            try:
                return await attempt()
            except Exception as error:
                delay = retries.after(error)
            await asyncio.sleep(delay)


@dataclass
class _Retries:
    """One call's retries so far."""

    policy: RetryPolicy
    retry_if: Callable[[Exception], bool]
    before_wait: Callable[[Exception, int, float], None] | None
    give_up: Callable[[Exception, int], BaseException] | None
    at_once: Callable[[Exception], bool] | None
    tally: RetryTally | None
    done: int = 0
    waits: int = 0

    def attempting(self) -> None:
        if self.tally is not None:
            self.tally.attempts += 1

    def after(self, error: Exception) -> float:
        """The wait before the next attempt, after one that failed with `error`; raises when there is none."""
        if not self.retry_if(error):
            raise error
        if self.done >= self.policy.max_retries:
            if self.give_up is None:
                raise error
            raise self.give_up(error, self.done + 1) from None
        self.done += 1
        if self.tally is not None:
            self.tally.retries += 1
        if self.at_once is not None and self.at_once(error):
            return 0.0
        delay = self.policy.delay(self.waits)
        self.waits += 1
        if self.before_wait is not None:
            self.before_wait(error, self.done, delay)
        return delay

"""The HTTP transport of the enrichments that call JSON APIs (HTTP, Elasticsearch).

One aiohttp session per configured service and Python worker, created on the worker's event loop and
kept across batches: keep-alive connections, at most `size` of them. aiohttp parses HTTP in C; it costs
about a third of the CPU per call of a pure-Python client, and on a busy worker that CPU is what keeps
the calls in flight from reaching `capacity / latency` (bench/enrichment_http.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from jobs.model.config import without_credentials
from jobs.processors.enrichment.engine import CallFailed, CallTimedOut


@dataclass(frozen=True)
class Reply:
    """An answer read in full: the connection goes back to the pool before the row's values are parsed."""

    status: int
    text: str

    def excerpt(self) -> str:
        text = self.text.strip().replace("\n", " ")
        return text if len(text) <= 200 else text[:200] + "..."

    def json(self, method: str, url: str) -> Any:
        try:
            return json.loads(self.text)
        except ValueError:
            raise CallFailed(
                f"{method} {without_credentials(url)} answered HTTP {self.status} with a body that is not "
                f"JSON: {self.excerpt()!r}",
                retryable=False,
            ) from None


class HttpPool:
    """Up to `size` keep-alive connections to one service, for requests with the pool's timeouts."""

    def __init__(
        self,
        size: int,
        connect_timeout_s: float,
        timeout_s: float,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self._size = size
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_timeout_s)
        self._auth = aiohttp.BasicAuth(username, password or "") if username else None
        self._session: aiohttp.ClientSession | None = None

    def _opened(self) -> aiohttp.ClientSession:
        # Opened on first use, on the event loop the session must stay on.
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._size, ttl_dns_cache=300),
                timeout=self._timeout,
                auth=self._auth,
                trust_env=False,  # like Dagger's client: no proxies or settings from the environment
                skip_auto_headers=("Content-Type",),  # a body is typed only by the headers configured
            )
        return self._session

    async def send(
        self, method: str, url: str, body: str | None = None, headers: dict[str, str] | None = None
    ) -> Reply:
        """One request; transport errors and timeouts become retryable `CallFailed`s."""
        try:
            # The URL is sent as the pattern built it (variables already quoted): no re-quoting.
            target = URL(url, encoded=True)
            async with self._opened().request(
                method, target, data=body and body.encode(), headers=headers
            ) as response:
                return Reply(response.status, await response.text(errors="replace"))
        except TimeoutError:
            raise CallTimedOut(f"{method} {without_credentials(url)} timed out") from None
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as error:
            raise CallFailed(
                f"{method} {without_credentials(url)}: {type(error).__name__}: {error}"
            ) from None
        except (aiohttp.ClientError, ValueError) as error:  # a bad URL, an unreadable answer
            raise CallFailed(
                f"{method} {without_credentials(url)}: {type(error).__name__}: {error}", retryable=False
            ) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def retryable_status(status: int) -> bool:
    return status == 429 or status >= 500

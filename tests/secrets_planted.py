"""The credentials the secrets tests plant, and the check that none shows: a unique planted secret per
component (`SECRETS`, reaching daggers as the environment variables of `ENVIRONMENT`), the forms each
travels in (`planted_strings`: basic auth's base64, a key's PEM lines), and `assert_nothing_planted` over
what a user sees; with the orders and customers the tests' daggers read and enrich."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tests.conftest import message_class

if TYPE_CHECKING:
    from tests.secrets_servers import BigQueryKey


ORDER = "dagger.testing.Order"
KAFKA_USER, ES_USER, INFLUX_USER = "admin", "dagger-es", f"writer_{uuid.uuid4().hex[:8]}"


def planted_secret(component: str) -> str:
    return f"planted-{component}-{uuid.uuid4().hex[:16]}"


SECRETS = {
    name: planted_secret(name)
    for name in (
        *("kafka", "kafka_stream_option", "postgres", "postgres_wrong"),
        *("influx", "elasticsearch", "elasticsearch_wrong"),
    )
}
ENVIRONMENT = {f"DAGGER_SECRET_{name.upper()}": value for name, value in SECRETS.items()}
"""How the secrets reach daggers: environment variables, `${VAR}` in dagger files, EnvVars in resources."""
NUMERIC_SECRET = 900_000_000_000_000_000 + uuid.uuid4().int % 10**17
"""A password as YAML reads an unquoted number (18 digits: no timestamp or id in a log is that long)."""

CUSTOMERS = {"c1": ("Ada", 1), "c2": ("Bob", 2)}
"""customer_id -> (name in PostgreSQL, tier in Elasticsearch)."""
ORDERS = [("o0", "c1", 10.0), ("o1", "c2", 11.0), ("o2", "c1", 12.0)]


def with_credentials(url: str, user: str, password: str) -> str:
    """`http://host:port` as `http://user:password@host:port`."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}:{password}@{rest}"


def basic_auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def planted_strings(bigquery_key: BigQueryKey | None = None) -> dict[str, str]:
    """Every planted secret, and the forms it travels in (basic auth's base64, the key's PEM lines)."""
    planted = {f"{name} secret": value for name, value in SECRETS.items()}
    planted["numeric secret"] = str(NUMERIC_SECRET)
    planted["elasticsearch basic auth"] = basic_auth(ES_USER, SECRETS["elasticsearch"])
    planted["elasticsearch wrong basic auth"] = basic_auth(ES_USER, SECRETS["elasticsearch_wrong"])
    planted["influx basic auth"] = basic_auth(INFLUX_USER, SECRETS["influx"])
    if bigquery_key is not None:
        planted["bigquery private_key_id"] = bigquery_key.key_id
        for number, line in enumerate(bigquery_key.pem_body_lines()):
            planted[f"bigquery private_key line {number}"] = line
    return planted


def assert_nothing_planted(sources: Mapping[str, str | bytes], planted: Mapping[str, str]) -> None:
    """No planted string in any of `sources` (what a user sees, by where they see it)."""
    leaks = []
    for where, text in sources.items():
        data = text.encode() if isinstance(text, str) else text
        for name, secret in planted.items():
            at = data.find(secret.encode())
            if at >= 0:
                context = data[max(0, at - 200) : at + len(secret) + 100].decode(errors="replace")
                leaks.append(f"{name} in {where}: ...{context}...")
    assert not leaks, "planted credentials leaked:\n" + "\n\n".join(leaks)


def files_under(folder: Path, label: str) -> dict[str, bytes]:
    return {
        f"{label}/{path.relative_to(folder)}": path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file()
    }


def payloads_of(registry, orders: list[tuple[str, str, float]]) -> list[bytes]:
    order = message_class(registry, ORDER)
    payloads = []
    for index, (order_id, customer_id, amount) in enumerate(orders):
        message = order(order_id=order_id, customer_id=customer_id, amount=amount)
        message.created_at.FromSeconds(1_700_000_000 + index)
        payloads.append(message.SerializeToString())
    return payloads

"""The crash harness's input and what it must come to: orders o0, o1, ... (`Order`), produced up front and
while the dagger runs (`OrderFeed`), and the rows the dagger's SQL makes of them, computed here in Python
(`expected_output`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from jobs.model.schema_registry import SchemaRegistry
from tests.conftest import KafkaHelper, message_class

ORDER = "dagger.testing.Order"
START_SECONDS = 1_700_000_000  # created_at of order 0; orders are 7 s apart, so the lake gets many hours
SQL = (
    "SELECT order_id, upper(customer_id) AS customer_id, amount * 2 AS amount, created_at "
    "FROM orders WHERE customer_id <> 'c3'"
)

OutputRow = tuple[str, str, float, int]
"""order_id, customer_id, amount, created_at (epoch seconds)."""


@dataclass(frozen=True)
class Order:
    index: int

    @property
    def order_id(self) -> str:
        return f"o{self.index}"

    @property
    def customer_id(self) -> str:
        return f"c{self.index % 5}"

    @property
    def amount(self) -> float:
        return (self.index % 1000) / 4  # quarters: exact in binary, so doubling them is exact too

    @property
    def created_at(self) -> int:
        return START_SECONDS + 7 * self.index


def order_payloads(registry: SchemaRegistry, orders: Iterable[Order]) -> list[bytes]:
    message_type = message_class(registry, ORDER)
    payloads = []
    for order in orders:
        message = message_type(order_id=order.order_id, customer_id=order.customer_id, amount=order.amount)
        message.created_at.FromSeconds(order.created_at)
        payloads.append(message.SerializeToString())
    return payloads


def expected_output(orders: Iterable[Order]) -> Counter[OutputRow]:
    """The dagger's SQL, computed row by row here: customer c3 filtered out, customer upper-cased, amount
    doubled."""
    return Counter(
        (order.order_id, order.customer_id.upper(), order.amount * 2, order.created_at)
        for order in orders
        if order.customer_id != "c3"
    )


@dataclass
class OrderFeed:
    """Produces orders o0, o1, ... to a two-partition topic (order i to partition i % 2)."""

    kafka: KafkaHelper
    registry: SchemaRegistry
    topic: str
    produced: int = 0

    @property
    def orders(self) -> list[Order]:
        return [Order(index) for index in range(self.produced)]

    def produce(self, count: int) -> None:
        start = self.produced
        self.kafka.produce(
            self.topic,
            order_payloads(self.registry, (Order(index) for index in range(start, start + count))),
            partition=lambda offset: (start + offset) % 2,
        )
        self.produced += count

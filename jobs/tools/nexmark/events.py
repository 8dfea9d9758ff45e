"""Nexmark's three kinds of event (a new person, a new auction, a bid) and the generator's output record.

Times are milliseconds since the epoch, UTC. Field names are Python's; `layout` maps them to the names
Nexmark's tables use (`emailAddress`, `dateTime`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar


class EventType(IntEnum):
    """The `event_type` column of Nexmark's tables."""

    PERSON = 0
    AUCTION = 1
    BID = 2


@dataclass(frozen=True, slots=True)
class Person:
    TYPE: ClassVar[EventType] = EventType.PERSON

    id: int
    name: str
    email_address: str
    credit_card: str
    city: str
    state: str
    date_time_ms: int
    extra: str


@dataclass(frozen=True, slots=True)
class Auction:
    TYPE: ClassVar[EventType] = EventType.AUCTION

    id: int
    item_name: str
    description: str
    initial_bid: int
    """Cents."""
    reserve: int
    """Cents."""
    date_time_ms: int
    expires_ms: int
    seller: int
    category: int
    extra: str


@dataclass(frozen=True, slots=True)
class Bid:
    TYPE: ClassVar[EventType] = EventType.BID

    auction: int
    bidder: int
    price: int
    """Cents."""
    channel: str
    url: str
    date_time_ms: int
    extra: str


Payload = Person | Auction | Bid


@dataclass(frozen=True, slots=True)
class GeneratedEvent:
    """One event as the generator makes it, with its place on the timeline."""

    number: int
    """Position in generation order from 0 (Nexmark's events-so-far count when it was made)."""
    event_id: int
    """Nexmark's event id: its remainder modulo the total proportion picks the kind, and it fixes the ids."""
    payload: Payload
    emit_at_ms: int
    """When, on the event-time clock, the event is due to be written: the in-order timestamp of its number
    (Nexmark's wall-clock offset), plus any occasional delay."""
    watermark_ms: int
    """No event made at or after this one has an earlier event time."""

    @property
    def event_type(self) -> EventType:
        return self.payload.TYPE

    @property
    def event_time_ms(self) -> int:
        return self.payload.date_time_ms


def nexmark_byte_size(payload: Payload) -> int:
    """The size Nexmark pads each kind to on average: 8 bytes a number, one a character, with the fields it
    counts (a person's time is not counted, nor a bid's channel and url)."""
    match payload:
        case Person():
            strings = (payload.name, payload.email_address, payload.credit_card, payload.city, payload.state)
            return 8 + sum(map(len, strings)) + len(payload.extra)
        case Auction():
            return 8 + len(payload.item_name) + len(payload.description) + 5 * 8 + len(payload.extra)
        case Bid():
            return 4 * 8 + len(payload.extra)

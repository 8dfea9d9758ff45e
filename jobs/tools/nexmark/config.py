"""The generator's parameters: Nexmark's own (`NexmarkConfiguration`, `GeneratorConfig`) with their defaults.

Names are Nexmark's in snake case. Nexmark's query parameters (window sizes, ...) and its Flink source's
run-time switches (parallelism, keep-alive, stop-at) are left out: they do not change which events exist.
The events are one generator's timeline, as nexmark-flink's source makes them at parallelism 1.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Self

from pydantic import Field, model_validator

from jobs.model.config import ConfigModel

BEAM_BASE_TIME = datetime(2015, 7, 15, tzinfo=UTC)
"""The fixed instant Nexmark's Beam original stamps its first event with when it does not use the wall
clock; nexmark-flink's source uses the wall clock when the job starts, which no rerun can repeat."""


class NexmarkConfig(ConfigModel):
    """What the events look like and when they happen; the same config (seed included), the same events."""

    num_events: int = Field(0, ge=0)
    """How many events; 0 for no end (Nexmark's `numEvents`)."""

    seed: int = 0
    """Seeds every random choice. Nexmark's Flink generator draws from unseeded `SplittableRandom`s, so two
    runs of it never agree; this one repeats itself for a seed."""

    base_time: datetime = BEAM_BASE_TIME
    """Event time of event number 0 (aware; naive values are taken as UTC)."""

    first_event_rate: int = Field(10_000, gt=0)
    """Events per second of event time (Nexmark's `firstEventRate`)."""

    next_event_rate: int = Field(10_000, gt=0)
    """Nexmark's `nextEventRate`: its generator reads only the first rate (one step, a square shape of one
    level), so this must equal `first_event_rate`."""

    person_proportion: int = Field(1, ge=1)
    auction_proportion: int = Field(3, ge=1)
    bid_proportion: int = Field(46, ge=1)
    """Of every `person + auction + bid` consecutive event ids, the first `person_proportion` are persons,
    the next `auction_proportion` auctions and the rest bids (1:3:46)."""

    avg_person_byte_size: int = Field(200, ge=0)
    avg_auction_byte_size: int = Field(500, ge=0)
    avg_bid_byte_size: int = Field(100, ge=0)
    """Average size of each kind, as Nexmark counts it (8 bytes a number, 1 a character; see
    `events.nexmark_byte_size`): the `extra` field pads each record to it."""

    hot_auction_ratio: int = Field(2, ge=1)
    """A bid goes to the hot auction unless a draw from `range(hot_auction_ratio)` is 0: with 2, half."""

    hot_sellers_ratio: int = Field(4, ge=1)
    """An auction's seller is the hot seller unless a draw from `range(hot_sellers_ratio)` is 0."""

    hot_bidders_ratio: int = Field(4, ge=1)
    """A bid's bidder is the hot bidder unless a draw from `range(hot_bidders_ratio)` is 0."""

    num_in_flight_auctions: int = Field(100, ge=1)
    """Auctions open at a time on average: sets how long an auction runs and which a cold bid may pick."""

    num_active_people: int = Field(1_000, ge=1)
    """How many of the newest persons a cold seller or bidder is drawn from."""

    out_of_order_group_size: int = Field(1, ge=1)
    """Event numbers are shuffled within groups of this size (1: in order)."""

    occasional_delay_sec: int = Field(3, ge=0)
    prob_delayed_event: float = Field(0.1, ge=0.0, le=1.0)
    """With `delay_events`, each event is held back with this probability by 1 ms to `occasional_delay_sec`
    seconds, and written after the events due in the meantime (its event time unchanged)."""

    delay_events: bool = False
    """Nexmark's Beam source holds events back only when rate limited (`isRateLimited`, off by default);
    nexmark-flink's never does. Off, the stream is exactly the generator's order."""

    first_event_id: int = Field(1, ge=0)
    first_event_number: int = Field(1, ge=0)
    """Where ids and event numbers start: nexmark-flink's `nexmark` connector passes 1 and 1, so its first
    event has id 2 (an auction) and person 1000 and auction 1000 never appear. 0 and 0 is Beam's origin,
    starting with person 1000."""

    repeat_bidder_id_offset: bool = True
    """nexmark-flink's bid generator adds the first person id (1000) to a bidder twice, so every bidder is
    1000 above the person Nexmark's rules pick; Beam's adds it once (false)."""

    @model_validator(mode="after")
    def _one_rate(self) -> Self:
        if self.next_event_rate != self.first_event_rate:
            raise ValueError(
                "next_event_rate must equal first_event_rate: Nexmark's generator stamps events at its "
                "first rate only"
            )
        return self

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    @property
    def base_time_ms(self) -> int:
        moment = self.base_time if self.base_time.tzinfo else self.base_time.replace(tzinfo=UTC)
        return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)

    @property
    def inter_event_delay_us(self) -> float:
        """Microseconds of event time between consecutive event numbers."""
        return 1_000_000.0 / self.first_event_rate

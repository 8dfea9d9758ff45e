"""Nexmark's event generator, event by event: persons, auctions and bids at the configured rate.

Each event's kind and ids follow from its event id (`ids`), its event time from its number (`timeline`),
and its other fields from draws, in Nexmark's order, on one random stream seeded by the config's seed
(the url table and the padding text have streams of their own, as Nexmark makes them apart). The same
config gives the same events; a different seed changes the drawn fields but no id rule or time.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import replace
from random import Random

from jobs.tools.nexmark import ids
from jobs.tools.nexmark.channels import channels, pick_channel
from jobs.tools.nexmark.config import NexmarkConfig
from jobs.tools.nexmark.events import Auction, Bid, GeneratedEvent, Payload, Person
from jobs.tools.nexmark.timeline import Timeline
from jobs.tools.nexmark.values import padding, padding_source, price, random_string

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = (
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
)
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
"""Few values on purpose: Nexmark's queries filter and group on them and must find matches in small runs."""

_NUMBER_BYTES = 8
"""What Nexmark counts a number (id, price, time) as when it pads a record to its average size."""


class NexmarkGenerator:
    """Makes one config's events; `events()` yields them in the order they are written."""

    def __init__(self, config: NexmarkConfig) -> None:
        self.config = config
        self.made = 0
        self._timeline = Timeline(config)
        self._rng = Random(f"nexmark-events-{config.seed}")
        self._delay_rng = Random(f"nexmark-delays-{config.seed}")
        self._padding_source = padding_source(config.seed)
        self._channels = channels(config.seed)

    def make_next(self) -> GeneratedEvent:
        """The next event in generation order (occasional delays are `events()`'s)."""
        timeline = self._timeline
        made = self.made
        number = timeline.shuffled_number(made)
        event_time = timeline.time_ms(number)
        event_id = self.config.first_event_id + number
        kind = event_id % self.config.total_proportion
        payload: Payload
        if kind < self.config.person_proportion:
            payload = self._person(event_id, event_time)
        elif kind < self.config.person_proportion + self.config.auction_proportion:
            payload = self._auction(made, event_id, event_time)
        else:
            payload = self._bid(event_id, event_time)
        self.made += 1
        return GeneratedEvent(
            number=made,
            event_id=event_id,
            payload=payload,
            emit_at_ms=timeline.time_ms(timeline.number(made)),
            watermark_ms=timeline.time_ms(timeline.watermark_number(made)),
        )

    def events(self) -> Iterator[GeneratedEvent]:
        """The remaining events (`num_events` in all; endless for 0), held-back ones after those due before
        them when `delay_events` is on."""
        config = self.config
        delay_ms = config.occasional_delay_sec * 1000
        delaying = config.delay_events and delay_ms > 0 and config.prob_delayed_event > 0
        held: list[tuple[int, int, GeneratedEvent]] = []
        while not config.num_events or self.made < config.num_events:
            event = self.make_next()
            if delaying and self._delay_rng.random() < config.prob_delayed_event:
                due = event.emit_at_ms + 1 + self._delay_rng.randrange(delay_ms)
                heapq.heappush(held, (due, event.number, replace(event, emit_at_ms=due)))
                continue
            while held and held[0][0] <= event.emit_at_ms:
                yield heapq.heappop(held)[2]
            yield event
        while held:
            yield heapq.heappop(held)[2]

    def _person(self, event_id: int, event_time: int) -> Person:
        rng = self._rng
        name = f"{FIRST_NAMES[rng.randrange(len(FIRST_NAMES))]} {LAST_NAMES[rng.randrange(len(LAST_NAMES))]}"
        email = f"{random_string(rng, 7)}@{random_string(rng, 5)}.com"
        credit_card = " ".join(f"{rng.randrange(10_000):04d}" for _ in range(4))
        city = US_CITIES[rng.randrange(len(US_CITIES))]
        state = US_STATES[rng.randrange(len(US_STATES))]
        counted = _NUMBER_BYTES + len(name) + len(email) + len(credit_card) + len(city) + len(state)
        return Person(
            id=ids.last_person(self.config, event_id) + ids.FIRST_PERSON_ID,
            name=name,
            email_address=email,
            credit_card=credit_card,
            city=city,
            state=state,
            date_time_ms=event_time,
            extra=padding(rng, self._padding_source, counted, self.config.avg_person_byte_size),
        )

    def _auction(self, made: int, event_id: int, event_time: int) -> Auction:
        rng, config = self._rng, self.config
        if rng.randrange(config.hot_sellers_ratio) > 0:
            seller = ids.hot_seller(config, event_id)
        else:
            seller = ids.cold_person(config, event_id, rng)
        category = ids.FIRST_CATEGORY_ID + rng.randrange(ids.NUM_CATEGORIES)
        initial_bid = price(rng)
        horizon_ms = self._timeline.auction_horizon_ms(made, event_time)
        expires = event_time + 1 + rng.randrange(max(horizon_ms * 2, 1))
        item_name = random_string(rng, 20)
        description = random_string(rng, 100)
        reserve = initial_bid + price(rng)
        counted = len(item_name) + len(description) + 6 * _NUMBER_BYTES
        return Auction(
            id=ids.last_auction(config, event_id) + ids.FIRST_AUCTION_ID,
            item_name=item_name,
            description=description,
            initial_bid=initial_bid,
            reserve=reserve,
            date_time_ms=event_time,
            expires_ms=expires,
            seller=seller + ids.FIRST_PERSON_ID,
            category=category,
            extra=padding(rng, self._padding_source, counted, config.avg_auction_byte_size),
        )

    def _bid(self, event_id: int, event_time: int) -> Bid:
        rng, config = self._rng, self.config
        if rng.randrange(config.hot_auction_ratio) > 0:
            auction = ids.hot_auction(config, event_id)
        else:
            auction = ids.cold_auction(config, event_id, rng)
        if rng.randrange(config.hot_bidders_ratio) > 0:
            bidder = ids.hot_bidder(config, event_id)
        else:
            bidder = ids.cold_person(config, event_id, rng)
        bid_price = price(rng)
        channel, url = pick_channel(rng, self._channels)
        offsets = 2 if config.repeat_bidder_id_offset else 1
        return Bid(
            auction=auction + ids.FIRST_AUCTION_ID,
            bidder=bidder + offsets * ids.FIRST_PERSON_ID,
            price=bid_price,
            channel=channel,
            url=url,
            date_time_ms=event_time,
            extra=padding(rng, self._padding_source, 4 * _NUMBER_BYTES, config.avg_bid_byte_size),
        )

"""Nexmark's id arithmetic: every id follows from the event id, so no state is kept.

Event ids come in epochs of `total_proportion` (50): in each, the first `person_proportion` ids make
persons, the next `auction_proportion` auctions, the rest bids. Person and auction ids count those events
from 0 ("base 0") and are published 1000 higher. A cold reference draws among recent ids plus a lead of 10
ids not made yet, so a bid may name an auction (and an auction a seller) a few events before it appears.
"""

from __future__ import annotations

from random import Random

from jobs.tools.nexmark.config import NexmarkConfig

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5

PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
"""How many ids past the newest a cold reference may name."""

HOT_GROUP_SIZE = 100
"""A hot seller, bidder or auction is the first (a bidder: the second) of the newest block of 100 ids."""


def last_person(config: NexmarkConfig, event_id: int) -> int:
    """Base-0 id of the newest person at `event_id` (the one it makes, if it makes one)."""
    epoch, offset = divmod(event_id, config.total_proportion)
    return epoch * config.person_proportion + min(offset, config.person_proportion - 1)


def last_auction(config: NexmarkConfig, event_id: int) -> int:
    """Base-0 id of the newest auction at `event_id` (the one it makes, if it makes one); -1 before any."""
    epoch, offset = divmod(event_id, config.total_proportion)
    if offset < config.person_proportion:
        return epoch * config.auction_proportion - 1  # the previous epoch's last
    return epoch * config.auction_proportion + min(
        offset - config.person_proportion, config.auction_proportion - 1
    )


def cold_person(config: NexmarkConfig, event_id: int, rng: Random) -> int:
    """A base-0 person among the `num_active_people` newest or up to 10 not made yet."""
    people = last_person(config, event_id) + 1
    active = min(people, config.num_active_people)
    return people - active + rng.randrange(active + PERSON_ID_LEAD)


def cold_auction(config: NexmarkConfig, event_id: int, rng: Random) -> int:
    """A base-0 auction among the `num_in_flight_auctions` before the newest, the newest, or up to 10 not
    made yet."""
    newest = last_auction(config, event_id)
    oldest = max(newest - config.num_in_flight_auctions, 0)
    return oldest + rng.randrange(newest - oldest + 1 + AUCTION_ID_LEAD)


def hot_seller(config: NexmarkConfig, event_id: int) -> int:
    return last_person(config, event_id) // HOT_GROUP_SIZE * HOT_GROUP_SIZE


def hot_bidder(config: NexmarkConfig, event_id: int) -> int:
    """The second of the block, so hot bidders and hot sellers differ."""
    return last_person(config, event_id) // HOT_GROUP_SIZE * HOT_GROUP_SIZE + 1


def hot_auction(config: NexmarkConfig, event_id: int) -> int:
    return last_auction(config, event_id) // HOT_GROUP_SIZE * HOT_GROUP_SIZE

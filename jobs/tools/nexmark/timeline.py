"""When events happen: event numbers, their event times, out-of-order groups and auction lengths.

The n-th event made (from 0) has event number `first_event_number + n`. Event number k happens at
`base_time + floor(k * 1e6 / rate) // 1000` ms: 10 numbers a millisecond at 10,000/s. With an out-of-order
group size g > 1, the event made at number k takes the number `k // g * g + (k * 953) % g` (its id and its
event time both come from it), so events are shuffled within each group of g and never across groups.
"""

from __future__ import annotations

from jobs.tools.nexmark.config import NexmarkConfig

_SHUFFLE_FACTOR = 953
"""A prime: within a group whose size it does not divide, `k * 953 % g` visits every offset once."""


class Timeline:
    """Event numbers and event times for one config."""

    def __init__(self, config: NexmarkConfig) -> None:
        self._config = config
        self._base_time_ms = config.base_time_ms
        self._delay_us = config.inter_event_delay_us
        self._group_size = config.out_of_order_group_size

    def number(self, made_so_far: int) -> int:
        """In-order event number of the event made after `made_so_far` others."""
        return self._config.first_event_number + made_so_far

    def shuffled_number(self, made_so_far: int) -> int:
        """The number the event actually takes: its in-order number moved within its group."""
        number = self.number(made_so_far)
        return number // self._group_size * self._group_size + number * _SHUFFLE_FACTOR % self._group_size

    def watermark_number(self, made_so_far: int) -> int:
        """The first number of the event's group: no event from here on takes a smaller one."""
        return self.number(made_so_far) // self._group_size * self._group_size

    def time_ms(self, number: int) -> int:
        """Event time of event number `number` (the microseconds truncated, then whole milliseconds)."""
        return self._base_time_ms + int(number * self._delay_us) // 1000

    def auction_horizon_ms(self, made_so_far: int, event_time_ms: int) -> int:
        """How far ahead of `event_time_ms` the auction `num_in_flight_auctions` auctions later will be made:
        auctions last twice this at most, this on average."""
        config = self._config
        numbers_per_in_flight = (
            config.num_in_flight_auctions * config.total_proportion // config.auction_proportion
        )
        return self.time_ms(self.shuffled_number(made_so_far) + numbers_per_in_flight) - event_time_ms

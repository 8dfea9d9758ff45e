"""Where bids come from: Nexmark's four hot channels and its 10,000 numbered ones, each with a url.

Half the bids (a draw from `range(2)` above 0) come through a hot channel, each of the four equally often;
the rest through `channel-<n>`, n uniform below 10,000. Urls are `https://www.nexmark.com/` and three
random path parts of 3 or 4 characters (`_` one time in 13), then `item.htm?query=1`; nine numbered channels
in ten add `&channel_id=` and the absolute value of n's 32 bits reversed, as a signed Java int (so
channel-1's is -2147483648: Java's absolute value of the smallest int is itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from random import Random

from jobs.tools.nexmark.values import random_string

HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
NUMBERED_CHANNELS = 10_000
HOT_CHANNEL_RATIO = 2


@dataclass(frozen=True)
class Channels:
    hot_urls: tuple[str, ...]
    numbered: tuple[tuple[str, str], ...]
    """(name, url) of channel n at index n."""


def _url(rng: Random) -> str:
    parts = (random_string(rng, 5, "_") for _ in range(3))
    return "https://www.nexmark.com/" + "/".join(parts) + "/item.htm?query=1"


def _reversed_int32_magnitude(number: int) -> int:
    """Java's `Math.abs(Integer.reverse(number))`, overflow included."""
    bits = int(f"{number & 0xFFFF_FFFF:032b}"[::-1], 2)
    signed = bits - (1 << 32) if bits >= (1 << 31) else bits
    return signed if signed == -(1 << 31) else abs(signed)


@lru_cache(maxsize=4)
def channels(seed: int) -> Channels:
    """A seed's channels: the hot urls are drawn first, then channel 0's url onwards (Nexmark draws them
    once per JVM, unseeded)."""
    rng = Random(f"nexmark-channels-{seed}")
    hot_urls = tuple(_url(rng) for _ in HOT_CHANNELS)
    numbered = []
    for number in range(NUMBERED_CHANNELS):
        url = _url(rng)
        if rng.randrange(10) > 0:
            url += f"&channel_id={_reversed_int32_magnitude(number)}"
        numbered.append((f"channel-{number}", url))
    return Channels(hot_urls, tuple(numbered))


def pick_channel(rng: Random, table: Channels) -> tuple[str, str]:
    """(channel, url) of one bid."""
    if rng.randrange(HOT_CHANNEL_RATIO) > 0:
        index = rng.randrange(len(HOT_CHANNELS))
        return HOT_CHANNELS[index], table.hot_urls[index]
    return table.numbered[rng.randrange(NUMBERED_CHANNELS)]

"""Random field values by Nexmark's rules: short strings, prices, and the `extra` padding.

Every function takes the `random.Random` to draw from and draws in a fixed order, so a seeded generator
repeats itself. Nexmark draws from Java's `SplittableRandom`; the draws here are the same in kind
(`randrange(n)` for `nextInt(n)`, `random()` for `nextDouble()`), not in value.
"""

from __future__ import annotations

import math
from functools import lru_cache
from random import Random

import numpy as np

MIN_STRING_LENGTH = 3
PADDING_SOURCE_LENGTH = 1024 * 1024
"""Nexmark cuts `extra` from one random text of this many characters, made once."""

_LETTERS_PER_DRAW = 6
"""Letters taken from one random 32-bit number (26**6 < 2**31)."""


def random_string(rng: Random, max_length: int, special: str = " ") -> str:
    """3 to `max_length - 1` characters, each `special` one time in 13 and otherwise a lower-case letter,
    then stripped of surrounding spaces (so a string of spaces may end up shorter, even empty)."""
    length = MIN_STRING_LENGTH + rng.randrange(max_length - MIN_STRING_LENGTH)
    characters = [special if rng.randrange(13) == 0 else chr(97 + rng.randrange(26)) for _ in range(length)]
    return "".join(characters).strip(" ")


def price(rng: Random) -> int:
    """Cents, log-uniform from 1 dollar to a million: 10 to the power of a uniform [0, 6), times 100,
    rounded half up."""
    return math.floor(10.0 ** (rng.random() * 6.0) * 100.0 + 0.5)


def letters_from_signed_draws(draws: list[int], length: int) -> str:
    """Nexmark's exact-length text: six letters from each signed 32-bit draw, its remainder by 26 added to
    'a', then the draw divided by 26, both rounding toward zero as Java does. A negative draw gives
    characters below 'a' (down to 'H', backslash and brackets included): Nexmark's padding has them too."""
    values = np.array(draws, dtype=np.int64)
    digits = np.empty((len(values), _LETTERS_PER_DRAW), dtype=np.int64)
    for position in range(_LETTERS_PER_DRAW):
        remainder = np.fmod(values, 26)
        digits[:, position] = remainder
        values = (values - remainder) // 26
    return (digits.reshape(-1)[:length] + 97).astype(np.uint8).tobytes().decode("ascii")


def _signed_draws(rng: Random, count: int) -> list[int]:
    return [
        (bits - (1 << 32)) if bits >= (1 << 31) else bits
        for bits in (rng.getrandbits(32) for _ in range(count))
    ]


def exact_letters(rng: Random, length: int) -> str:
    """A fresh text of exactly `length` characters, drawn from `rng`."""
    return letters_from_signed_draws(_signed_draws(rng, -(-length // _LETTERS_PER_DRAW)), length)


@lru_cache(maxsize=4)
def padding_source(seed: int) -> str:
    """The one long text every `extra` is cut from (a seed's own; Nexmark's is unseeded)."""
    return exact_letters(Random(f"nexmark-padding-{seed}"), PADDING_SOURCE_LENGTH)


def padding(rng: Random, source: str, current_size: int, average_size: int) -> str:
    """`extra` for a record whose other fields count `current_size`: none when they already exceed the
    average, else a length uniform over the 40% band centred on what is missing (to within one byte),
    cut at a random place from `source` (or drawn fresh when longer than half of it)."""
    if current_size > average_size:
        return ""
    missing = average_size - current_size
    spread = math.floor(missing * 0.2 + 0.5)
    length = missing - spread + (rng.randrange(2 * spread) if spread else 0)
    if length < len(source) // 2:
        start = rng.randrange(len(source) - length)
        return source[start : start + length]
    return exact_letters(rng, length)

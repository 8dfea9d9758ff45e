"""Flink's INTERVAL literals: the forms Flink (Calcite) accepts, as Spark writes them, and their lengths."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot.tokens import TokenType

from jobs.raystack.flink_sql.tokens import TokenScan

_TIME_UNITS_MS = {"DAY": 86_400_000, "HOUR": 3_600_000, "MINUTE": 60_000, "SECOND": 1_000}
_DAY_TIME_ORDER = ["DAY", "HOUR", "MINUTE", "SECOND"]
_INTERVAL_UNITS = {"YEAR", "MONTH", *_DAY_TIME_ORDER}


@dataclass(frozen=True)
class IntervalLiteral:
    """`INTERVAL [-]'value' UNIT[(p)] [TO UNIT[(p)]]`, the forms Flink (Calcite) accepts."""

    value: str
    units: tuple[str, ...]  # none (Spark's `INTERVAL '1 hour'`), one unit, or (from, to)
    last: int  # index of its last token
    needs_rewrite: bool  # a precision or a plural unit, which Spark does not read

    @classmethod
    def parse(cls, scan: TokenScan, first: int) -> IntervalLiteral | None:
        tokens = scan.tokens
        if tokens[first].token_type != TokenType.INTERVAL:
            return None
        position = first + 1
        sign = ""
        if position < len(tokens) and tokens[position].text in ("-", "+"):
            sign, position = tokens[position].text.replace("+", ""), position + 1
        if position >= len(tokens) or tokens[position].token_type not in (TokenType.STRING, TokenType.NUMBER):
            return None
        value, last = sign + tokens[position].text.strip(), position
        position += 1
        units: list[str] = []
        rewrite = False
        while position < len(tokens):
            unit = tokens[position].text.upper()
            singular = unit[:-1] if unit.endswith("S") and unit[:-1] in _INTERVAL_UNITS else unit
            if singular not in _INTERVAL_UNITS:
                break
            units.append(singular)
            rewrite = rewrite or singular != unit
            last, position = position, position + 1
            if position < len(tokens) and tokens[position].token_type == TokenType.L_PAREN:
                rewrite = True  # a precision, e.g. HOUR(2)
                last = scan.partner[position]
                position = last + 1
            if len(units) == 1 and position < len(tokens) and tokens[position].text.upper() == "TO":
                position += 1
                continue
            break
        return cls(value, tuple(units), last, rewrite)

    def spark(self) -> str:
        return f"INTERVAL '{self.value}' {' TO '.join(self.units)}"

    def milliseconds(self) -> int:
        """The interval's length; only day-time intervals with millisecond resolution size a window."""
        if not self.units:
            raise ValueError(f"INTERVAL '{self.value}' needs a unit (SECOND, MINUTE, HOUR or DAY)")
        if self.units[0] in ("YEAR", "MONTH"):
            raise ValueError("year-month intervals cannot size a window (months have no fixed length)")
        start = _DAY_TIME_ORDER.index(self.units[0])
        end = _DAY_TIME_ORDER.index(self.units[-1])
        if end < start:
            raise ValueError(f"INTERVAL ... {' TO '.join(self.units)} is not a valid range of units")
        negative = self.value.startswith("-")
        parts = re.split(r"[ :]", self.value.lstrip("-+"))
        units = _DAY_TIME_ORDER[start : end + 1]
        if len(parts) != len(units):
            raise ValueError(f"INTERVAL '{self.value}' does not fit {' TO '.join(self.units)}")
        total = Decimal(0)
        for part, unit in zip(parts, units, strict=True):
            try:
                amount = Decimal(part)
            except InvalidOperation:
                raise ValueError(f"INTERVAL '{self.value}': {part!r} is not a number") from None
            if amount != amount.to_integral_value() and unit != "SECOND":
                raise ValueError(f"INTERVAL '{self.value}': only seconds may have a fraction")
            total += amount * _TIME_UNITS_MS[unit]
        if total != total.to_integral_value():
            raise ValueError(f"INTERVAL '{self.value}': windows have millisecond resolution")
        return int(-total if negative else total)


def window_length_ms(scan: TokenScan, first: int, last: int, call: str) -> int:
    """The length of the INTERVAL literal of tokens first..last, which sizes a window of `call`."""
    literal = IntervalLiteral.parse(scan, first)
    if literal is None or literal.last != last:
        raise scan.fail(first, f"{call}: expected an INTERVAL literal, got {scan.source(first, last)!r}")
    try:
        milliseconds = literal.milliseconds()
    except ValueError as error:
        raise scan.fail(first, f"{call}: {error}") from None
    if milliseconds <= 0:
        raise scan.fail(first, f"{call}: a window needs a positive interval")
    return milliseconds


def spark_duration(milliseconds: int) -> str:
    for unit, size in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000), ("second", 1_000)):
        if milliseconds % size == 0:
            count = milliseconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{milliseconds} milliseconds"

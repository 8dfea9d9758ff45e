"""Flink's INTERVAL literals (read into `exp.Interval` by the dialect) and the lengths of those that size a
window."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from jobs.raystack.flink_sql.errors import UserText

_TIME_UNITS_MS = {"DAY": 86_400_000, "HOUR": 3_600_000, "MINUTE": 60_000, "SECOND": 1_000}
_DAY_TIME_ORDER = ["DAY", "HOUR", "MINUTE", "SECOND"]


@dataclass(frozen=True)
class IntervalLiteral:
    """`INTERVAL [-]'value' UNIT [TO UNIT]`: the value and none (Spark's `INTERVAL '1 hour'`), one or two
    units."""

    value: str
    units: tuple[str, ...]

    @classmethod
    def of(cls, node: exp.Expr) -> IntervalLiteral | None:
        """The literal `node` is, None when it is no INTERVAL literal."""
        if not isinstance(node, exp.Interval) or not isinstance(node.this, exp.Literal):
            return None
        unit = node.args.get("unit")
        if isinstance(unit, exp.IntervalSpan):
            units: tuple[str, ...] = (unit.this.name.upper(), unit.expression.name.upper())
        else:
            units = (unit.name.upper(),) if unit is not None else ()
        return cls(node.this.name.strip(), units)

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


def window_length_ms(user: UserText, node: exp.Expr, call: str) -> int:
    """The length of the INTERVAL literal `node`, which sizes a window of `call`."""
    literal = IntervalLiteral.of(node)
    if literal is None:
        raise user.fail(node, f"{call}: expected an INTERVAL literal, got {node.sql(dialect='spark')!r}")
    try:
        milliseconds = literal.milliseconds()
    except ValueError as error:
        raise user.fail(node, f"{call}: {error}") from None
    if milliseconds <= 0:
        raise user.fail(node, f"{call}: a window needs a positive interval")
    return milliseconds


def spark_duration(milliseconds: int) -> str:
    for unit, size in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000), ("second", 1_000)):
        if milliseconds % size == 0:
            count = milliseconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{milliseconds} milliseconds"

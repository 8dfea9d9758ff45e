"""Flink's built-in functions, and what the translator does with a call of each.

The table is data, `functions.toml`: a row for every function a Flink 2.3 query can call by name (the
oracle's version; tests/test_flink_oracle.py checks the table against that Flink's own list). Each row
has a status:

- `identical`: Spark's function of the same name; `oracle` names the oracle query that gives Flink's
  rows and types with it on real Flink.
- `translated`: the translator rewrites the call (`spark` says into what). Where `oracle` is given, that
  query gives Flink's rows; a `difference` says what still differs.
- `differs`: Spark's function of the same name, with the `difference` stated; where `oracle` is given, the
  oracle pins the difference to the dagger's exact rows (a known difference).
- `refused`: a call is refused by name before anything starts, with the `reason`: Spark has no such
  function, or its function of that name gives another answer.
- `contract`: Spark's function of the same name, whose results are random: no two runs give the same
  rows, so it is checked against Flink's documented contract (`contract` says what: range, spread,
  uniqueness, format) over many rows rather than row by row.
- `unchecked`: Spark's function of the same name, not yet compared on the oracle. The docs list these as
  such, so that a difference found later was never a silent one.

The docs page, docs/flink-functions.md, shows the table as it is when the site is built.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("functions.toml")


class FunctionStatus(StrEnum):
    IDENTICAL = "identical"
    TRANSLATED = "translated"
    DIFFERS = "differs"
    REFUSED = "refused"
    CONTRACT = "contract"
    UNCHECKED = "unchecked"


_REQUIRED = {
    FunctionStatus.IDENTICAL: "oracle",
    FunctionStatus.TRANSLATED: "spark",
    FunctionStatus.DIFFERS: "difference",
    FunctionStatus.REFUSED: "reason",
    FunctionStatus.CONTRACT: "contract",
}
"""The field each status must fill in."""


@dataclass(frozen=True)
class FlinkFunction:
    """One of Flink's built-in functions and the translator's answer to a call of it."""

    name: str
    status: FunctionStatus
    oracle: str = ""
    """The oracle query (tests/flink/corpus.py) that calls it on real Flink."""
    spark: str = ""
    """What a translated call becomes."""
    difference: str = ""
    """What the dagger's result still has otherwise than Flink's."""
    reason: str = ""
    """Why a call is refused."""
    contract: str = ""
    """What every result of a random function keeps, as Flink documents it."""

    def __post_init__(self) -> None:
        required = _REQUIRED.get(self.status)
        if required is not None and not getattr(self, required):
            raise ValueError(f"{TABLE.name}: {self.name} is {self.status} but has no `{required}`")


@dataclass(frozen=True)
class FunctionTable:
    functions: dict[str, FlinkFunction]
    """By upper-case name."""
    not_called_by_name: frozenset[str]
    """Entries of Flink's own list that are syntax or planner-internal, not functions a query calls."""


@cache
def function_table() -> FunctionTable:
    with TABLE.open("rb") as file:
        data = tomllib.load(file)
    functions = {}
    for name, row in data["functions"].items():
        try:
            status = FunctionStatus(row.get("status", ""))
        except ValueError:
            choices = ", ".join(FunctionStatus)
            raise ValueError(f"{TABLE.name}: {name}: `status` must be one of {choices}") from None
        fields = {key: value for key, value in row.items() if key != "status"}
        functions[name.upper()] = FlinkFunction(name=name.upper(), status=status, **fields)
    return FunctionTable(functions, frozenset(data["not_called_by_name"]))


def refusal(name: str) -> str | None:
    """Why a call of Flink's built-in `name` is refused; None when it is not."""
    function = function_table().functions.get(name.upper())
    if function is None or function.status is not FunctionStatus.REFUSED:
        return None
    return f"{function.name}() is not supported: {function.reason}"


def markdown_table() -> str:
    """The table as the docs show it (docs/hooks/generated_tables.py puts it into its page)."""
    table = function_table()
    functions = sorted(table.functions.values(), key=lambda function: function.name)
    counts = ", ".join(
        f"{sum(function.status is status for function in functions)} {status}" for status in FunctionStatus
    )
    not_called = ", ".join(f"`{name}`" for name in sorted(table.not_called_by_name))
    lines = [
        f"{len(functions)} functions: {counts}. Not in the table: entries of Flink's own list that a query "
        f"does not call by that name (syntax, the planner's own, internal names of functions above): "
        f"{not_called}.",
        "",
        "| function | status | in Spark | note |",
        "|---|---|---|---|",
    ]
    for function in functions:
        spark = function.spark or ("" if function.status is FunctionStatus.REFUSED else function.name)
        note = function.reason or function.difference or function.contract
        if function.oracle:
            note = f"{note} (oracle: `{function.oracle}`)" if note else f"oracle: `{function.oracle}`"
        lines.append(f"| `{function.name}` | {function.status} | {spark} | {note} |")
    return "\n".join(lines) + "\n"

"""Hypothesis strategies of queries over two projects' table names, for the Analysis API's tests.

`shop` owns the collections `pageview` and `orders` (and the tables `continuous.daily_revenue` and
`materialized.top_pages`); `rival` owns `secrets`. Queries combine SELECT, JOIN, UNION/INTERSECT/EXCEPT,
derived tables, IN/EXISTS/scalar subqueries and WITH clauses (nested anywhere, their CTEs named like
either project's tables, in any case) over those names, bare or qualified (`continuous.`, `rival.`,
`global_temp.`, `spark_catalog.default.`, ...) and sometimes backticked.

A query selects whole rows (`SELECT *`) at its top, so any row of another project in its result shows with
every column; below the top (subqueries, derived tables, set operations) it selects `user_id`, which all
the planted tables have, so a query that isolation accepts also runs on Spark. Each generated query knows
which tables it reads by Spark's scoping rules (`Query.reads`), independently of
`jobs.analysis.isolation`, so tests can tell exactly what it must accept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from hypothesis import strategies as st

from jobs.analysis.isolation import ProjectTables

SHOP = ProjectTables(
    project="shop",
    collections=frozenset({"pageview", "orders"}),
    continuous=frozenset({"daily_revenue"}),
    materialized=frozenset({"top_pages"}),
)
RIVAL_NAMES = frozenset({"secrets"})
"""Tables of `rival` that `shop` does not have (its `pageview` is one `shop` has too)."""

QUALIFIERS = ("",) * 3 + (
    "continuous",
    "materialized",
    "rival",
    "shop",
    "global_temp",
    "spark_catalog.default",
)
"""How a table name may be qualified; bare names are drawn more often, as queries mostly write them."""

Read = tuple[str, str]
"""(qualifier, lower-case name) of a table a query reads from the catalog."""


@dataclass(frozen=True)
class TableName:
    qualifier: str
    name: str
    upper: bool
    quoted: bool

    def sql(self) -> str:
        name = self.name.upper() if self.upper else self.name
        return f"{self.qualifier}." * bool(self.qualifier) + (f"`{name}`" if self.quoted else name)

    def reads(self, ctes: frozenset[str]) -> frozenset[Read]:
        if not self.qualifier and self.name in ctes:
            return frozenset()
        return frozenset({(self.qualifier, self.name)})


@dataclass(frozen=True)
class Derived:
    query: Query

    def sql(self) -> str:
        return f"({self.query.sql()})"

    def reads(self, ctes: frozenset[str]) -> frozenset[Read]:
        return self.query.reads(ctes)


@dataclass(frozen=True)
class Condition:
    kind: Literal["IN", "EXISTS", "scalar"]
    query: Query

    def sql(self) -> str:
        subquery = self.query.sql()
        if self.kind == "IN":
            return f"user_id IN ({subquery})"
        if self.kind == "EXISTS":
            return f"EXISTS ({subquery})"
        return f"user_id = (SELECT max(user_id) FROM ({subquery}) AS s)"


@dataclass(frozen=True)
class Select:
    relations: tuple[TableName | Derived, ...]
    condition: Condition | None

    def sql(self, whole_rows: bool = False) -> str:
        first, *joined = (f"{relation.sql()} AS t{i}" for i, relation in enumerate(self.relations))
        joins = "".join(f" JOIN {relation} USING (user_id)" for relation in joined)
        where = f" WHERE {self.condition.sql()}" if self.condition else ""
        return f"SELECT {'*' if whole_rows else 'user_id'} FROM {first}{joins}{where}"

    def reads(self, ctes: frozenset[str]) -> frozenset[Read]:
        reads = frozenset().union(*(relation.reads(ctes) for relation in self.relations))
        return reads | (self.condition.query.reads(ctes) if self.condition else frozenset())


@dataclass(frozen=True)
class SetOperation:
    left: Query
    operator: str
    right: Query

    def sql(self, whole_rows: bool = False) -> str:  # both sides must have the same columns
        return f"({self.left.sql()}) {self.operator} ({self.right.sql()})"

    def reads(self, ctes: frozenset[str]) -> frozenset[Read]:
        return self.left.reads(ctes) | self.right.reads(ctes)


@dataclass(frozen=True)
class With:
    ctes: tuple[tuple[str, Query], ...]
    body: Select | SetOperation

    def sql(self, whole_rows: bool = False) -> str:
        return (
            "WITH "
            + ", ".join(f"{name} AS ({query.sql()})" for name, query in self.ctes)
            + f" {self.body.sql(whole_rows)}"
        )

    def reads(self, ctes: frozenset[str]) -> frozenset[Read]:
        """Spark's scoping: a CTE's body sees the CTEs before it (never itself), the query body sees all."""
        reads: frozenset[Read] = frozenset()
        for name, query in self.ctes:
            reads |= query.reads(ctes)
            ctes |= {name.lower()}
        return reads | self.body.reads(ctes)


Query = Select | SetOperation | With


def query_trees(
    tables: ProjectTables, other_names: Iterable[str], own_names_only: bool = False
) -> st.SearchStrategy[Query]:
    """Queries over the project's names, `other_names` and `recent` (a name only CTEs take), qualified in
    any of QUALIFIERS; or, `own_names_only`, over the project's tables named as the project may name them
    (bare collections, `continuous.<name>`, `materialized.<name>`), which isolation mostly accepts."""
    names = sorted(
        tables.collections | tables.continuous | tables.materialized | set(other_names) | {"recent"}
    )
    spelled = {"upper": st.booleans(), "quoted": st.booleans()}
    if own_names_only:
        forms = [("", name) for name in sorted(tables.collections)]
        forms += [
            (kind, name) for kind in ("continuous", "materialized") for name in sorted(getattr(tables, kind))
        ]
        table_names = st.sampled_from(forms).flatmap(
            lambda form: st.builds(TableName, qualifier=st.just(form[0]), name=st.just(form[1]), **spelled)
        )
    else:
        table_names = st.builds(
            TableName, qualifier=st.sampled_from(QUALIFIERS), name=st.sampled_from(names), **spelled
        )
    cte_names = st.builds(
        lambda name, upper: name.upper() if upper else name, st.sampled_from(names), st.booleans()
    )

    def selects(queries: st.SearchStrategy[Query]) -> st.SearchStrategy[Select]:
        relations = st.one_of(table_names, queries.map(Derived))
        conditions = st.none() | st.builds(
            Condition, kind=st.sampled_from(["IN", "EXISTS", "scalar"]), query=queries
        )
        return st.builds(
            Select, relations=st.lists(relations, min_size=1, max_size=3).map(tuple), condition=conditions
        )

    def extend(queries: st.SearchStrategy[Query]) -> st.SearchStrategy[Query]:
        set_operations = st.builds(
            SetOperation,
            left=queries,
            operator=st.sampled_from(["UNION ALL", "UNION", "INTERSECT", "EXCEPT"]),
            right=queries,
        )
        ctes = st.lists(st.tuples(cte_names, queries), min_size=1, max_size=3).map(_first_of_each_name)
        withs = st.builds(With, ctes=ctes, body=selects(queries) | set_operations)
        return selects(queries) | set_operations | withs

    leaves = st.builds(Select, relations=st.tuples(table_names), condition=st.none())
    return st.recursive(leaves, extend, max_leaves=8)


def _first_of_each_name(ctes: list[tuple[str, Query]]) -> tuple[tuple[str, Query], ...]:
    """One WITH's CTEs, each name once (Spark refuses a WITH defining a name twice)."""
    first: dict[str, tuple[str, Query]] = {}
    for name, query in ctes:
        first.setdefault(name.lower(), (name, query))
    return tuple(first.values())


def queries_over(tables: ProjectTables, other_names: Iterable[str]) -> st.SearchStrategy[str]:
    """The SQL of `query_trees`, selecting whole rows."""
    return query_trees(tables, other_names).map(lambda query: query.sql(whole_rows=True))

"""Real-time mode's conditions, checked on the built query before it starts.

Spark's real-time mode reads only its Kafka source, writes only its Kafka sink, and runs no Python: the
result's analysed plan (read in the JVM) shows whether a UDF or a plan step would hand rows to Python, and
whether the query holds state (which real-time mode emits as updates, never once a window closes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame

from jobs.model.errors import DaggerBuildError
from jobs.model.spec import DaggerSpec
from jobs.sources.kafka.config import KafkaStream


def require_real_time_stages(spec: DaggerSpec, result: DataFrame, writes_through_connector: bool) -> None:
    """Real-time mode reads only Spark's Kafka source and writes only its Kafka sink, with no Python in
    between: anything else is refused here, naming the stage, instead of failing once started.

    `writes_through_connector`: the dagger's one sink is Kafka on Spark's connector, written from the query
    (at least once: exactly-once delivery needs a driver step per micro-batch).
    """
    refused = [
        f"streams[{index}] ({stream.table}): it reads through connector 'python'"
        for index, stream in enumerate(spec.streams)
        if not (isinstance(stream, KafkaStream) and stream.connector == "spark")
    ]
    if not writes_through_connector:
        refused.append(
            "sinks: real-time mode writes one Kafka sink with connector 'spark', at least once (an "
            "exactly_once sink commits once per micro-batch)"
        )
    python_functions, python_steps = _python_in_plan(result)
    if python_functions:
        refused.append(
            f"the query (SQL or processors) calls Python function(s) {', '.join(python_functions)}"
        )
    if python_steps:
        refused.append(f"the query runs Python steps ({', '.join(python_steps)}: processors or plugins)")
    if spec.output_mode == "append" and not is_stateless(result):
        # Real-time mode emits a window's or a key's row as it changes (update), never once when closed.
        refused.append(
            "output_mode 'append' of an aggregation, join or deduplicate (use output_mode 'update')"
        )
    if refused:
        raise DaggerBuildError(
            f"dagger {spec.name}: execution 'real_time' cannot run {'; '.join(refused)} "
            "(use execution 'micro_batch')"
        )


def _python_in_plan(result: DataFrame) -> tuple[list[str], list[str]]:
    """What of the result's plan runs in Python: the UDFs it calls, by name, and its plan steps that hand
    rows to Python (`mapInArrow`, pandas functions)."""
    functions, steps = set(), set()
    for node in _plan_nodes(result):
        kind = node.getClass().getSimpleName()
        if any(marker in kind for marker in ("Python", "InArrow", "InPandas")):
            steps.add(kind)
        functions.update(
            expression.name()
            for expression in _expressions(node)
            if expression.getClass().getSimpleName() == "PythonUDF"
        )
    return sorted(functions), sorted(steps)


_STATEFUL_OPERATORS = frozenset({"Aggregate", "Join", "Deduplicate", "DeduplicateWithinWatermark"})


def is_stateless(result: DataFrame) -> bool:
    """Whether the result's plan holds no stateful streaming operator (aggregation, join, deduplicate)."""
    return not any(node.getClass().getSimpleName() in _STATEFUL_OPERATORS for node in _plan_nodes(result))


def _plan_nodes(result: DataFrame) -> Iterator[Any]:
    """The nodes of the result's analysed plan, as the JVM holds them (classic sessions)."""
    pending = [result._jdf.queryExecution().analyzed()]  # type: ignore[attr-defined]
    while pending:
        node = pending.pop()
        yield node
        children = node.children()
        pending.extend(children.apply(index) for index in range(children.size()))


def _expressions(node: Any) -> Iterator[Any]:
    """Every expression of a plan node, nested ones included."""
    top = node.expressions()
    pending = [top.apply(index) for index in range(top.size())]
    while pending:
        expression = pending.pop()
        yield expression
        children = expression.children()
        pending.extend(children.apply(index) for index in range(children.size()))

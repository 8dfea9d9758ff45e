"""The engine every external enrichment runs on: asynchronous, batched calls inside Arrow batches.

For each Arrow batch of a partition, the engine reads the variables of every row (the columns the
enrichment names), makes one call per row with at most `capacity` calls in flight, retries failed calls
with exponential back-off, and appends the output fields, in the rows' order, cast to their declared
types. Calls run on one asyncio event loop per Python worker (in a background thread), so clients and
their connection pools live across batches and micro-batches.

A call that still fails after its retries (error, timeout, or an answer the kind calls a failure) fails
the micro-batch when `fail_on_errors` is true, naming the enrichment and the row's variables; otherwise the
row goes on with null output fields. A row whose variables are all null or empty skips its call (Dagger's
`empty_input`). An output path that is missing from a successful answer fails the micro-batch, as in
Dagger.

A kind plugs in a `Caller`: given one row's variables, return the answer as a JSON-like document, raise
`CallFailed`, or raise `NoAnswer` to let the row go on with null output fields without a failure.

Each row's call is accounted for in two hidden columns (its outcome, and its time over all attempts),
summed per micro-batch by a Spark observation named `enrichment.<key>` and dropped before anything else
sees them: the tasks that succeeded deliver the counts with the batch's progress report, so a retried
task is never counted twice (`jobs/metrics/exporter.py` turns them into the dagger's metrics).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    _parse_datatype_string,
)

from jobs.engine.retry import RetryPolicy
from jobs.processors.config import Enrichment, OutputField
from jobs.processors.context import TransformContext


class EnrichmentError(RuntimeError):
    """An enrichment that cannot go on; the micro-batch fails (and is replayed after a restart)."""


class CallFailed(Exception):
    """One call's failure, worth a retry when `retryable`."""

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class CallTimedOut(CallFailed):
    """A call the service did not answer in time (counted as a timeout, retried like a failure)."""


class NoAnswer(Exception):
    """Raised by a caller when a row has nothing to look up or the service answered without a document
    (Dagger's `empty_input`, Elasticsearch's non-200 successes): the row goes on with null output fields,
    whatever `fail_on_errors` says, and is not retried."""


class EmptyInput(NoAnswer):
    """Dagger's `empty_input`: the row's variables give nothing to ask, so no call is made."""


class Caller(Protocol):
    """One kind's client, created on the worker's event loop and kept across batches."""

    async def call(self, variables: Sequence[Any]) -> Any:
        """The answer for one row's variables (in the order the config names them); raise `CallFailed`."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class EnrichmentPlan:
    """Everything an executor needs, picklable: no clients, no Spark objects."""

    name: str
    """Used in errors: `post_processors.http[0]` and the like."""
    variables: list[str]
    outputs: dict[str, OutputField]
    capacity: int
    timeout_s: float
    retry: RetryPolicy
    fail_on_errors: bool
    caller_key: str
    """Identifies the client configuration, so a worker reuses one client per configuration."""
    make_caller: Callable[[], Caller]
    extract: Callable[[Any, str], Any]
    """The value at an output path in an answer; raise `KeyError` when the path is missing."""

    @classmethod
    def for_config(
        cls,
        config: Enrichment,
        key: str,
        variables: Sequence[str],
        caller_key: str,
        make_caller: Callable[[], Caller],
        extract: Callable[[Any, str], Any],
    ) -> EnrichmentPlan:
        """The plan of an enrichment configured at `key`, with the settings every kind shares."""
        return cls(
            name=key,
            variables=list(variables),
            outputs=dict(config.output_mapping),
            capacity=config.capacity,
            timeout_s=config.stream_timeout.total_seconds(),
            retry=RetryPolicy.of(config),
            fail_on_errors=config.fail_on_errors,
            caller_key=caller_key,
            make_caller=make_caller,
            extract=extract,
        )


def _output_schema(
    frame: DataFrame, outputs: dict[str, OutputField], context: TransformContext
) -> StructType:
    fields = list(frame.schema.fields)
    existing = {field.name for field in fields}
    for column, output in outputs.items():
        if column in existing:
            raise context.error(f"output field {column!r} is already a column of the result")
        try:
            data_type = _parse_datatype_string(output.type)
        except Exception as error:  # Spark raises several kinds for a bad type string
            raise context.error(f"output field {column!r}: unknown type {output.type!r}: {error}") from None
        fields.append(StructField(column, data_type, nullable=True))
    return StructType(fields)


def _check_variables(frame: DataFrame, variables: Sequence[str], context: TransformContext) -> None:
    missing = [column for column in variables if column not in frame.columns]
    if missing:
        raise context.error(
            f"variable column(s) {', '.join(missing)} not in the result (columns: {', '.join(frame.columns)})"
        )


ENRICHMENT_METRIC = "enrichment"
"""Observation `enrichment.<key>` of each enrichment: see `call_observations`."""
OUTCOMES = ("success", "failure", "timeout", "no_answer", "empty_input")
"""What became of a row's call: answered; failed or timed out after its retries (the row goes on with
null output fields, unless `fail_on_errors`); the kind found nothing (`NoAnswer`); not made, as every
variable was null or empty."""
CALL_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_OUTCOME, _SECONDS, _RETRIES = "__dagger_call_outcome", "__dagger_call_seconds", "__dagger_call_retries"


def call_observations() -> list[Column]:
    """The per-batch sums of an enrichment's hidden call columns: a count per outcome, the calls' time
    (`seconds`), retries, and how many calls took at most each bucket's bound (`le_<bound>`)."""
    outcome, seconds = F.col(_OUTCOME), F.col(_SECONDS)
    return [
        *(F.count(F.when(outcome == name, 1)).alias(name) for name in OUTCOMES),
        F.coalesce(F.sum(seconds), F.lit(0.0)).alias("seconds"),
        F.coalesce(F.sum(F.col(_RETRIES)), F.lit(0)).alias("retries"),
        *(F.count(F.when(seconds <= bound, 1)).alias(f"le_{bound}") for bound in CALL_SECONDS_BUCKETS),
    ]


def enrich(frame: DataFrame, plan: EnrichmentPlan, context: TransformContext) -> DataFrame:
    """`frame` with the plan's output fields appended; a plan that cannot apply is reported at `context`."""
    _check_variables(frame, plan.variables, context)
    schema = _output_schema(frame, plan.outputs, context)
    input_names = frame.columns
    output_types = [to_arrow_type(schema[name].dataType, timezone="UTC") for name in plan.outputs]
    accounted = StructType([
        *schema.fields,
        StructField(_OUTCOME, StringType(), False),
        StructField(_SECONDS, DoubleType(), True),
        StructField(_RETRIES, IntegerType(), False),
    ])  # fmt: skip

    def enrich_partition(batches):
        for batch in batches:
            batch = batch.rename_columns(input_names)
            calls = _run(_call_all(plan, _variables(batch, plan.variables)))
            columns = [
                _column(
                    [_extract(plan, call.answer, output.path, column) for call in calls],
                    arrow_type,
                    plan,
                    column,
                )
                for (column, output), arrow_type in zip(plan.outputs.items(), output_types, strict=True)
            ]
            accounting = [
                pa.array([call.outcome for call in calls], pa.string()),
                pa.array([call.seconds for call in calls], pa.float64()),
                pa.array([call.retries for call in calls], pa.int32()),
            ]
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, *columns, *accounting], names=accounted.fieldNames()
            )

    enriched = frame.mapInArrow(enrich_partition, accounted)
    observed = enriched.observe(f"{ENRICHMENT_METRIC}.{plan.name}", *call_observations())
    return observed.drop(_OUTCOME, _SECONDS, _RETRIES)


def _variables(batch: pa.RecordBatch, names: Sequence[str]) -> list[tuple[Any, ...]]:
    columns = [batch.column(name).to_pylist() for name in names]
    return list(zip(*columns, strict=True)) if columns else [() for _ in range(batch.num_rows)]


_NO_OUTPUT = object()
"""The answer of a row whose output fields stay null."""


@dataclass(frozen=True)
class _Call:
    """One row's call: its answer, outcome (one of `OUTCOMES`), time over all attempts and retries."""

    answer: Any
    outcome: str
    seconds: float | None = None
    retries: int = 0


_EMPTY_INPUT = _Call(_NO_OUTPUT, "empty_input")


def _extract(plan: EnrichmentPlan, answer: Any, path: str, column: str) -> Any:
    if answer is _NO_OUTPUT:
        return None
    try:
        value = plan.extract(answer, path)
    except KeyError:
        raise EnrichmentError(
            f"{plan.name}: output field {column!r}: path {path!r} not in the answer"
        ) from None
    return value


def _column(values: list[Any], arrow_type: pa.DataType, plan: EnrichmentPlan, column: str) -> pa.Array:
    """Values cast to the declared type; structures into STRING columns as JSON text."""
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        values = [value if value is None or isinstance(value, str) else json.dumps(value) for value in values]
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        try:
            return pa.array([None if value is None else str(value) for value in values]).cast(arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise EnrichmentError(
                f"{plan.name}: output field {column!r}: cannot cast to {arrow_type}: {error}"
            ) from None


async def _call_all(plan: EnrichmentPlan, rows: list[tuple[Any, ...]]) -> list[_Call]:
    """Every row's call, in row order, from `capacity` lanes that each take the next row to call."""
    caller = await _worker_caller(plan)
    calls: list[_Call] = [_EMPTY_INPUT] * len(rows)
    next_rows = iter(enumerate(rows))  # shared by the lanes: each row is taken by exactly one

    async def lane() -> None:
        for index, variables in next_rows:
            if not (variables and all(value is None or value == "" for value in variables)):
                calls[index] = await _call_with_retries(plan, caller, variables)

    lanes = [asyncio.ensure_future(lane()) for _ in range(min(plan.capacity, len(rows)))]
    try:
        await asyncio.gather(*lanes)
    except BaseException:
        for running in lanes:  # a failed batch stops its other calls rather than leave them running
            running.cancel()
        raise
    return calls


async def _call_with_retries(plan: EnrichmentPlan, caller: Caller, variables: tuple[Any, ...]) -> _Call:
    attempts = 0

    async def attempt() -> Any:
        nonlocal attempts
        attempts += 1
        async with asyncio.timeout(plan.timeout_s):
            return await caller.call(variables)

    started = time.perf_counter()
    try:
        answer = await plan.retry.call_async(attempt, retry_if=_retryable)
    except EmptyInput:
        return _EMPTY_INPUT
    except NoAnswer:
        return _Call(_NO_OUTPUT, "no_answer", time.perf_counter() - started, attempts - 1)
    except (CallFailed, TimeoutError, OSError) as error:
        if plan.fail_on_errors:
            reason = "timed out" if isinstance(error, TimeoutError) else str(error)
            raise EnrichmentError(f"{plan.name}: call for {list(variables)} failed: {reason}") from None
        outcome = "timeout" if isinstance(error, TimeoutError | CallTimedOut) else "failure"
        return _Call(_NO_OUTPUT, outcome, time.perf_counter() - started, attempts - 1)
    return _Call(answer, "success", time.perf_counter() - started, attempts - 1)


def _retryable(error: Exception) -> bool:
    if isinstance(error, CallFailed):
        return error.retryable
    return isinstance(error, TimeoutError | OSError)


# One event loop per Python worker, in a daemon thread; callers live on it across batches.
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()
_callers: dict[str, Caller] = {}


def _worker_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="dagger-enrichment", daemon=True).start()
            atexit.register(_close_callers)
        return _loop


def _close_callers() -> None:
    """Close connections and pools when the worker exits, rather than leave that to the garbage collector."""

    async def close_all() -> None:
        await asyncio.gather(*(caller.close() for caller in _callers.values()), return_exceptions=True)

    with contextlib.suppress(Exception):  # the worker is exiting: nothing is left to report to
        asyncio.run_coroutine_threadsafe(close_all(), _worker_loop()).result(timeout=5)


def _run(coroutine: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coroutine, _worker_loop()).result()


async def _worker_caller(plan: EnrichmentPlan) -> Caller:
    caller = _callers.get(plan.caller_key)
    if caller is None:
        caller = _callers[plan.caller_key] = plan.make_caller()
    return caller

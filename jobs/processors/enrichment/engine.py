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
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from jobs.processors.config import Enrichment, OutputField
from jobs.processors.context import TransformContext
from jobs.retry import RetryPolicy


class EnrichmentError(RuntimeError):
    """An enrichment that cannot go on; the micro-batch fails (and is replayed after a restart)."""


class CallFailed(Exception):
    """One call's failure, worth a retry when `retryable`."""

    def __init__(self, message: str, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class NoAnswer(Exception):
    """Raised by a caller when a row has nothing to look up or the service answered without a document
    (Dagger's `empty_input`, Elasticsearch's non-200 successes): the row goes on with null output fields,
    whatever `fail_on_errors` says, and is not retried."""


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


def enrich(frame: DataFrame, plan: EnrichmentPlan, context: TransformContext) -> DataFrame:
    """`frame` with the plan's output fields appended; a plan that cannot apply is reported at `context`."""
    _check_variables(frame, plan.variables, context)
    schema = _output_schema(frame, plan.outputs, context)
    input_names = frame.columns
    output_types = [to_arrow_type(schema[name].dataType, timezone="UTC") for name in plan.outputs]

    def enrich_partition(batches):
        for batch in batches:
            batch = batch.rename_columns(input_names)
            answers = _run(_call_all(plan, _variables(batch, plan.variables)))
            columns = [
                _column(
                    [_extract(plan, answer, output.path, column) for answer in answers],
                    arrow_type,
                    plan,
                    column,
                )
                for (column, output), arrow_type in zip(plan.outputs.items(), output_types, strict=True)
            ]
            yield pa.RecordBatch.from_arrays([*batch.columns, *columns], names=[*input_names, *plan.outputs])

    return frame.mapInArrow(enrich_partition, schema)


def _variables(batch: pa.RecordBatch, names: Sequence[str]) -> list[tuple[Any, ...]]:
    columns = [batch.column(name).to_pylist() for name in names]
    return list(zip(*columns, strict=True)) if columns else [() for _ in range(batch.num_rows)]


_SKIPPED = object()
_FAILED = object()


def _extract(plan: EnrichmentPlan, answer: Any, path: str, column: str) -> Any:
    if answer is _SKIPPED or answer is _FAILED:
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


async def _call_all(plan: EnrichmentPlan, rows: list[tuple[Any, ...]]) -> list[Any]:
    """Every row's answer, in row order, from `capacity` lanes that each take the next row to call."""
    caller = await _worker_caller(plan)
    answers: list[Any] = [_SKIPPED] * len(rows)
    next_rows = iter(enumerate(rows))  # shared by the lanes: each row is taken by exactly one

    async def lane() -> None:
        for index, variables in next_rows:
            if not (variables and all(value is None or value == "" for value in variables)):
                answers[index] = await _call_with_retries(plan, caller, variables)

    lanes = [asyncio.ensure_future(lane()) for _ in range(min(plan.capacity, len(rows)))]
    try:
        await asyncio.gather(*lanes)
    except BaseException:
        for running in lanes:  # a failed batch stops its other calls rather than leave them running
            running.cancel()
        raise
    return answers


async def _call_with_retries(plan: EnrichmentPlan, caller: Caller, variables: tuple[Any, ...]) -> Any:
    async def attempt() -> Any:
        async with asyncio.timeout(plan.timeout_s):
            return await caller.call(variables)

    try:
        return await plan.retry.call_async(attempt, retry_if=_retryable)
    except NoAnswer:
        return _SKIPPED
    except (CallFailed, TimeoutError, OSError) as error:
        if plan.fail_on_errors:
            reason = "timed out" if isinstance(error, TimeoutError) else str(error)
            raise EnrichmentError(f"{plan.name}: call for {list(variables)} failed: {reason}") from None
        return _FAILED


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

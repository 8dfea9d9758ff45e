"""Apache Flink as the oracle: the same Flink SQL over the same rows, on Flink and as a dagger, the same
rows out.

Flink runs every query of `tests/flink/corpus.py` once, in its own virtualenv (`build/flink-venv`, made by
`make test`), over JSON-lines files (`tests/flink/runner.py`). Each query then runs here as a dagger:
the query through the project's Flink-SQL translator, the tables as Parquet streams of the same rows
(one file per micro-batch) in a bounded run, which ends its input as Flink's does, the rows out of its
log sink. Rows are compared as multisets, with their
column names and the type of each value (an INT 2 is neither a BIGINT 2 nor a DOUBLE 2.0; a DECIMAL's
precision and scale count); instants at millisecond precision, as Flink hands them over. A query listed
in `KNOWN_DIFFERENCES` must give exactly the rows recorded there for the dagger: each is a known limit
in the docs. The last test reports "N queries, N identical".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import StructType

from jobs.project import PROJECT_ROOT
from jobs.raystack.flink_sql import translate
from jobs.raystack.flink_sql.errors import FlinkSqlError
from jobs.raystack.flink_sql.functions import function_table
from jobs.running.runner import DaggerBuildError, DaggerQueryError
from jobs.tools.flink_process import FLINK_PYTHON, FlinkResults
from jobs.tools.flink_rows import spark_tagged
from tests.conftest import REPORT_PROPERTY, kafka_stream, message_class
from tests.flink.corpus import (
    FLUSH_CUTOFF,
    KNOWN_DIFFERENCES,
    QUERIES,
    TABLES,
    WATERMARK_DELAY_S,
    Query,
    Table,
)
from tests.flink.projections import Projection, cut, merged_sql, plain_projection

# The module takes minutes (Flink runs every query of the corpus, then each runs as a dagger): `make test`
# hands it out among the first files (tests/conftest.py).
pytestmark = pytest.mark.slow

RUNNER = PROJECT_ROOT / "tests" / "flink" / "runner.py"
ARTIFACT = PROJECT_ROOT / "test-artifacts" / "flink-oracle.json"
FLINK_TIMEOUT_S = 1800
FUNCTIONS_RESULT = "__functions__"
"""The runner's last result: Flink's own list of its functions, and the table's names it does not know."""

KNOWN_ROWS_FILE = PROJECT_ROOT / "tests" / "flink" / "known_differences.json"
KNOWN_DAGGER_ROWS: dict[str, Any] = json.loads(KNOWN_ROWS_FILE.read_text())
"""The dagger's rows of each query in `KNOWN_DIFFERENCES`, as reviewed when the difference was recorded."""

PROJECTIONS: dict[str, Projection] = {
    query.id: projection
    for query in QUERIES
    if not (query.stream_settings or query.upsert_key or query.id in KNOWN_DIFFERENCES)
    and (projection := plain_projection(query.id, query.sql, (table.name for table in TABLES)))
}
"""The corpus's plain projections: each table's run as one query on each engine (flink/projections.py)."""


outcomes: dict[str, bool] = {}
"""Per query, whether the dagger's rows were Flink's."""
differences: dict[str, dict[str, Any]] = {}
"""Per differing query, both sides' rows (kept in the artifact)."""


def _flink_line(row: dict[str, Any]) -> str:
    def value(item: Any) -> Any:
        return item.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if isinstance(item, datetime) else item

    return json.dumps({name: value(item) for name, item in row.items()})


def _arrow_type(flink_type: str) -> pa.DataType:
    return {
        "STRING": pa.string(), "DOUBLE": pa.float64(), "INT": pa.int32(), "BIGINT": pa.int64(),
        "TIMESTAMP(3)": pa.timestamp("us", tz="UTC"), "ARRAY<STRING>": pa.list_(pa.string()),
        "ARRAY<BIGINT>": pa.list_(pa.int64()),
    }[flink_type]  # fmt: skip


def _write_table(table: Table, folder: Path) -> None:
    flink_file = folder / "flink" / table.name / "rows.json"
    flink_file.parent.mkdir(parents=True)
    flink_file.write_text("".join(_flink_line(row) + "\n" for row in table.rows))
    schema = pa.schema([(name, _arrow_type(kind)) for name, kind in table.columns])
    for index, batch in enumerate(table.batches):
        path = folder / "parquet" / table.name / f"part-{index:04d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(batch, schema=schema), path)


@pytest.fixture(scope="module")
def oracle_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("flink-oracle")
    for table in TABLES:
        _write_table(table, folder)
    return folder


@pytest.fixture(scope="module")
def selected(request: pytest.FixtureRequest) -> set[str]:
    """The ids of the queries this run tests: the whole corpus in a full run, `-k`'s pick otherwise."""
    return {
        item.callspec.id
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }


@pytest.fixture(scope="module")
def merged_queries(selected: set[str]) -> dict[str, Query]:
    """Per table, the selected plain projections as one query (tests/flink/projections.py)."""
    by_table: dict[str, list[Projection]] = {}
    for query_id, projection in PROJECTIONS.items():
        if query_id in selected:
            by_table.setdefault(projection.table, []).append(projection)
    return {table: Query(f"__projections_of_{table}__", merged_sql(rows)) for table, rows in by_table.items()}


class FlinkOracle(FlinkResults):
    """The corpus running on Flink in a process of its own, started once per module: a test asks for its
    query's result, which Flink may still be computing, and waits for it meanwhile."""

    def __init__(self, folder: Path, queries: list[Query]) -> None:
        job = {
            "tables": [
                {
                    "name": table.name,
                    "columns": table.columns,
                    "time_column": table.time_column,
                    "watermark_delay_s": WATERMARK_DELAY_S,
                    "path": str(folder / "flink" / table.name / "rows.json"),
                }
                for table in TABLES
            ],
            "queries": [{"id": query.id, "sql": query.sql} for query in queries],
            "function_names": sorted(function_table().functions),
        }
        super().__init__(RUNNER, job, folder / "flink-runner", FLINK_TIMEOUT_S)


@pytest.fixture(scope="module")
def flink(oracle_input: Path, selected: set[str], merged_queries: dict[str, Query]) -> Iterator[FlinkOracle]:
    """Every selected query's result on Flink (one Flink process for them all, started at once): the
    whole corpus in a full run, and only the queries `-k` picks otherwise, so that one query's check does
    not wait for Flink to run the hundred before it. The plain projections run merged, a query per table."""
    assert FLINK_PYTHON.exists(), f"{FLINK_PYTHON} is missing: `make test` makes it"
    alone = [query for query in QUERIES if query.id in selected and query.id not in PROJECTIONS]
    oracle = FlinkOracle(oracle_input, [*merged_queries.values(), *alone])
    try:
        yield oracle
    finally:
        oracle.stop()


def _from_flush(row: list[Any]) -> bool:
    return any(value is not None and value[0] == "ts" and value[1] >= FLUSH_CUTOFF for value in row)


def _comparable(columns: list[str], rows: list[list[Any]], before_flush: bool = False) -> dict[str, Any]:
    """The rows as a sorted multiset; `before_flush`: without the rows of the tables' flush rows."""
    kept = sorted(json.dumps(row) for row in rows if not (before_flush and _from_flush(row)))
    return {"columns": columns, "rows": [json.loads(row) for row in kept]}


def _dagger_rows(query: Query, folder: Path, make_dagger: Callable, start_dagger: Callable) -> dict[str, Any]:
    streams = [
        {
            "kind": "parquet",
            "table": table.name,
            "proto_message": table.proto_message,
            "event_time_field": table.time_column,
            "paths": [str(folder / "parquet" / table.name)],
            "max_files_per_batch": 1,
            **query.stream_settings,
        }
        for table in query.tables()
    ]
    return _run_as_dagger(query, streams, make_dagger, start_dagger, query.upsert_key)


def _run_as_dagger(
    query: Query,
    streams: list[dict[str, Any]],
    make_dagger: Callable,
    start_dagger: Callable,
    upsert_key: tuple[str, ...] = (),
    bounded: bool = True,
) -> dict[str, Any]:
    """The query's rows out of a dagger reading `streams`: a bounded run, which ends its input as Flink
    does, or (not `bounded`) a streaming one once it has processed every record there is, without the rows
    of the flush rows, which it leaves open; with an `upsert_key`, its final table: the last row of each
    key, as a sink that upserts keeps them."""
    translated = translate(query.sql)
    spec = make_dagger(
        name="oracle",
        streams=streams,
        sql=query.sql,
        sql_dialect="flink",
        output_mode="update" if translated.unwindowed_aggregation else "append",
        watermark_delay=f"{WATERMARK_DELAY_S}s",
        sinks=[{"kind": "log", "max_rows_per_batch": 100_000}],
    )
    try:
        running = start_dagger(spec, bounded=bounded)  # a micro-batch per file or per 8 records
        if bounded:
            assert running.run.wait(timeout_s=600), f"the bounded run of {query.id} did not end"
        else:
            running.process_available()
    except (DaggerBuildError, DaggerQueryError) as error:
        return {"error": str(error)}
    schema: StructType = running.run.built.result.schema
    rows = []
    last_of_key: dict[tuple, list[Any]] = {}
    for line in running.logged:
        values = json.loads(line.split(" | ", 1)[1])
        rows.append([spark_tagged(values[field.name], field.dataType) for field in schema.fields])
        last_of_key[tuple(values[name] for name in upsert_key)] = rows[-1]
    kept = list(last_of_key.values()) if upsert_key else rows
    return _comparable(schema.fieldNames(), kept, before_flush=not bounded)


merged_dagger_results: dict[str, dict[str, Any]] = {}
"""Each merged query's rows as a dagger, by its id: run by the first of its projections to be tested."""


def _projection_results(
    projection: Projection,
    merged: Query,
    query: Query,
    flink: FlinkOracle,
    oracle_input: Path,
    make_dagger: Callable,
    start_dagger: Callable,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A plain projection's rows on each engine, cut from its table's `merged` run; should the dagger fail
    the merged query, this query runs alone, so that the failure is the query's own."""
    if merged.id not in merged_dagger_results:
        try:
            merged_dagger_results[merged.id] = _dagger_rows(merged, oracle_input, make_dagger, start_dagger)
        except FlinkSqlError as error:
            merged_dagger_results[merged.id] = {"error": str(error)}
    if "error" in merged_dagger_results[merged.id]:
        ours = _dagger_rows(query, oracle_input, make_dagger, start_dagger)
    else:
        cut_rows = cut(merged_dagger_results[merged.id], projection)
        ours = _comparable(cut_rows["columns"], cut_rows["rows"])
    return ours, cut(flink.result(merged.id), projection)


@pytest.mark.parametrize("query", QUERIES, ids=[query.id for query in QUERIES])
def test_the_dagger_gives_flinks_rows(
    query: Query,
    flink: FlinkOracle,
    merged_queries: dict[str, Query],
    oracle_input: Path,
    make_dagger,
    start_dagger,
) -> None:
    if query.id in PROJECTIONS:
        projection = PROJECTIONS[query.id]
        merged = merged_queries[projection.table]
        ours, theirs = _projection_results(
            projection, merged, query, flink, oracle_input, make_dagger, start_dagger
        )
    else:
        ours = _dagger_rows(query, oracle_input, make_dagger, start_dagger)  # while Flink runs this or next
        theirs = flink.result(query.id)
    assert "error" not in theirs, f"Flink could not run {query.id}: {theirs['error']}"
    flink_rows = _comparable(theirs["columns"], theirs["rows"])
    assert flink_rows["rows"], f"{query.id} compares nothing: Flink gave no rows"
    outcomes[query.id] = ours == flink_rows
    if ours != flink_rows:
        differences[query.id] = {"sql": query.sql, "flink": flink_rows, "dagger": ours}
    if query.id in KNOWN_DIFFERENCES:
        assert ours != flink_rows, (
            f"{query.id} now gives Flink's rows: drop it from KNOWN_DIFFERENCES and the docs"
        )
        # The difference is the one documented, to the row: the dagger's rows as recorded.
        assert ours == KNOWN_DAGGER_ROWS.get(query.id), (
            f"{query.id} differs from Flink otherwise than recorded in {KNOWN_ROWS_FILE.name} (both sides' "
            f"rows are in {ARTIFACT})"
        )
        return
    assert "error" not in ours, f"{query.id}: the dagger failed: {ours['error']}"
    assert ours["columns"] == flink_rows["columns"]
    assert ours["rows"] == flink_rows["rows"], f"{query.id}: {query.sql}"


ON_KAFKA = {"tvf_window_time": (), "over_running_window": (), "top_n_overall": ("rn",)}
"""Queries run end to end on Apache Kafka too, with the upsert key of those that give updates: a window
table function, an OVER aggregation, a Top-N. None partitions by customer: over protobuf a NULL customer
and an empty one are the same string."""


KAFKA_RUNS = [*((query_id, False) for query_id in ON_KAFKA), ("tvf_window_time", True)]
"""Each query of `ON_KAFKA` as a streaming run; the window's as a bounded run too (the OVER aggregation's
and the Top-N's bounded runs give Flink's rows as well, but cost the suite minutes for what the Parquet
runs of the corpus prove already)."""


@pytest.mark.parametrize(
    ("query_id", "bounded"), KAFKA_RUNS, ids=[f"{q}-{'bounded' if b else 'streaming'}" for q, b in KAFKA_RUNS]
)
def test_on_apache_kafka_the_dagger_gives_flinks_rows(
    query_id: str, bounded: bool, flink: FlinkOracle, kafka, registry, make_dagger, start_dagger
) -> None:
    """The query end to end as a dagger: the orders as protobuf records on Apache Kafka, read through
    Spark's connector in micro-batches of 8, against Flink's rows of the same orders. A bounded run ends
    its input as Flink's does, and every row is compared; a streaming run, once it has read every record,
    leaves the windows of the flush row open, whose rows are left out on both sides."""
    [query] = [query for query in QUERIES if query.id == query_id]
    [orders] = query.tables()
    topic = kafka.new_topic("oracle-orders")
    order = message_class(registry, orders.proto_message)
    payloads = []
    for row in orders.rows:
        message = order(order_id=row["order_id"], customer_id=row["customer_id"], amount=row["amount"])
        message.created_at.FromDatetime(row["created_at"])
        payloads.append(message.SerializeToString())
    kafka.produce(topic, payloads, partition=0)
    stream = kafka_stream(
        kafka.bootstrap_servers, orders.name, orders.proto_message, orders.time_column, topics=[topic],
        connector="spark", max_records_per_batch=8,
    )  # fmt: skip
    ours = _run_as_dagger(query, [stream], make_dagger, start_dagger, ON_KAFKA[query_id], bounded=bounded)
    theirs = flink.result(query.id)
    assert ours["rows"], "the dagger gave no rows"
    assert ours == _comparable(theirs["columns"], theirs["rows"], before_flush=not bounded)


def test_the_function_table_holds_every_function_flink_lists_and_no_other(flink: FlinkOracle) -> None:
    """The translator's table of Flink's functions against the oracle's Flink: each SQL name of its
    SHOW FUNCTIONS (capitals; the Table API's names are in camel case) has a row or is known as syntax,
    and every row names a function that Flink knows."""
    result = flink.result(FUNCTIONS_RESULT)
    table = function_table()
    sql_names = {name for name in result["listed"] if name == name.upper()}
    assert len(sql_names) > 50, result["listed"]
    assert sorted(sql_names - set(table.functions) - table.not_called_by_name) == []
    assert result["unknown"] == [], "functions.toml has rows for functions Flink does not know"


def test_the_oracle_report(record_property: Callable[[str, object], None]) -> None:
    """Runs after the corpus: how many queries gave Flink's rows, kept in test-artifacts/."""
    identical = sorted(query for query, same in outcomes.items() if same)
    different = sorted(query for query, same in outcomes.items() if not same)
    report = f"{len(outcomes)} queries, {len(identical)} identical"
    if different:
        report += f"; differing: {', '.join(different)}"
    ARTIFACT.parent.mkdir(exist_ok=True)
    summary = {"report": report, "identical": identical, "differences": differences}
    ARTIFACT.write_text(json.dumps(summary, indent=1))
    record_property(REPORT_PROPERTY, report)
    assert len(outcomes) == len(QUERIES), f"only {len(outcomes)} of {len(QUERIES)} queries ran"
    assert set(different) == set(KNOWN_DIFFERENCES), report

"""Nexmark (issue 49), as Flink runs it: every query on Apache Flink 2.3 and as a dagger, over the same
generated events in one Apache Kafka topic, the same rows out.

The generator (`jobs.tools.nexmark`) writes 3,000 events, 100 a second of event time (30 s: three
10-second windows, sessions and joins across them), into a topic of the session's Apache Kafka. Flink runs
the queries that run as daggers in one PyFlink process, started once for the module, reading the topic
through its Kafka SQL connector to the end with its final watermark. Each dagger is the project's query
files (`jobs/tools/nexmark/queries`) as a script, run bounded through its Kafka source in the tests' Spark
session, its sink swapped for a log sink whose rows are kept (`jobs/tools/nexmark/oracle.py`). Rows are
compared as multisets, with their column names and each value's type; an updating query as its final
table.

`STATUS` is the one table of what each query does today: `matches` (Flink's rows, to the row), `differs`
with the documented reason (the test checks the difference to the row), or `refused` with the reason the
dagger gives before its query starts. When an operator lands, its query's entry moves to `matches`;
docs/nexmark.md shows the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from jobs.model.spec import DaggerConfigError
from jobs.tools.nexmark.config import NexmarkConfig
from jobs.tools.nexmark.generator import NexmarkGenerator
from jobs.tools.nexmark.oracle import (
    QUERY_IDS,
    UPSERT_KEYS,
    FlinkNexmark,
    NexmarkScripts,
    comparable,
    dagger_rows,
    flink_rows,
    generate,
)

EVENTS = NexmarkConfig(
    num_events=3000, first_event_rate=100, next_event_rate=100, repeat_bidder_id_offset=False
)
"""Beam's bidder ids (Nexmark's rule once): with nexmark-flink's, bidders run 1000 above the persons made, so
at this scale no bid's bidder is a person and q23's join has no rows."""

MATCHES = "matches"
NO_FINAL_WATERMARK = (
    "differs: the windows the input's last watermark leaves open are not written (Spark's Kafka connector "
    "gives no final watermark, docs/limits.md)"
)
GLOBAL_WATERMARK = (
    "refused: the query cannot run as a stream: Detected pattern of possible 'correctness' issue due to "
    "global watermark"
)
STATUS: dict[str, str] = {
    "q0": MATCHES,
    "q1": MATCHES,
    "q2": MATCHES,
    "q3": MATCHES,
    "q4": GLOBAL_WATERMARK,
    "q5": GLOBAL_WATERMARK,
    "q6": "refused: [TABLE_OR_VIEW_NOT_FOUND] The table or view `auction` cannot be found",
    "q7": NO_FINAL_WATERMARK,
    "q8": NO_FINAL_WATERMARK,
    "q9": "refused: [TABLE_OR_VIEW_NOT_FOUND] The table or view `auction` cannot be found",
    "q10": "refused: PARTITIONED BY has no counterpart in a dagger",
    "q11": NO_FINAL_WATERMARK,
    "q12": "refused: processing time (PROCTIME()) is not supported",
    "q13": "refused: processing time (PROCTIME()) is not supported",
    "q14": "refused: functions declared by CREATE FUNCTION (a Java class) cannot run here",
    "q15": "refused: [PARSE_SYNTAX_ERROR] Syntax error at or near '('",
    "q16": "refused: [PARSE_SYNTAX_ERROR] Syntax error at or near '('",
    "q17": MATCHES,
    "q18": "refused: [TABLE_OR_VIEW_NOT_FOUND] The table or view `bid` cannot be found",
    "q19": "refused: [TABLE_OR_VIEW_NOT_FOUND] The table or view `bid` cannot be found",
    "q20": MATCHES,
    "q21": MATCHES,
    "q22": "refused: SPLIT_INDEX() is not supported",
    "q23": MATCHES,
}
"""Each query's status today: `matches`, `differs: <why>` or `refused: <what the refusal says>`."""

RUNNING = [query for query in QUERY_IDS if not STATUS[query].startswith("refused: ")]
REFUSED = [query for query in QUERY_IDS if STATUS[query].startswith("refused: ")]

WINDOW_ENDS: dict[str, Callable[[dict[str, datetime]], datetime]] = {
    "q7": lambda row: (
        row["dateTime"].replace(second=row["dateTime"].second // 10 * 10, microsecond=0)
        + timedelta(seconds=10)
    ),
    "q8": lambda row: row["stime"] + timedelta(seconds=10),
    "q11": lambda row: row["endtime"],
}
"""Where the window of a row of each NO_FINAL_WATERMARK query ends (q7: the bid's 10-second window)."""


def _last_watermark() -> datetime:
    """The watermark after the last event: the latest event time less the DDL's 4 seconds."""
    latest_ms = max(event.event_time_ms for event in NexmarkGenerator(EVENTS).events())
    return datetime(1970, 1, 1) + timedelta(milliseconds=latest_ms - 4000)  # naive UTC, as the rows


def _closed_windows_only(query: str, flink: dict[str, Any]) -> dict[str, Any]:
    """Flink's rows but those of windows that the last watermark leaves open."""

    def instants(row: list[Any]) -> dict[str, datetime]:
        return {
            name: datetime.fromisoformat(value[1])
            for name, value in zip(flink["columns"], row, strict=True)
            if value is not None and value[0] == "ts"
        }

    watermark = _last_watermark()
    kept = [row for row in flink["rows"] if WINDOW_ENDS[query](instants(row)) <= watermark]
    return comparable(flink["columns"], kept)


@pytest.fixture(scope="module")
def scripts(kafka, tmp_path_factory: pytest.TempPathFactory) -> NexmarkScripts:
    """The queries' scripts over a topic of the generator's events."""
    topic = f"nexmark-{kafka.new_topic('unused').rsplit('-', 1)[-1]}"
    assert generate(kafka.bootstrap_servers, topic, EVENTS) == EVENTS.num_events
    return NexmarkScripts(kafka.bootstrap_servers, topic, tmp_path_factory.mktemp("nexmark"))


@pytest.fixture(scope="module")
def flink(scripts: NexmarkScripts) -> Iterator[FlinkNexmark]:
    """The running queries on Flink, one process for all, started at once."""
    oracle = FlinkNexmark(scripts, RUNNING)
    try:
        yield oracle
    finally:
        oracle.stop()


def test_every_query_has_one_status() -> None:
    assert list(STATUS) == list(QUERY_IDS)


@pytest.mark.parametrize("query", RUNNING)
def test_the_dagger_gives_flinks_rows(
    query: str, scripts: NexmarkScripts, flink: FlinkNexmark, spark
) -> None:
    ours = dagger_rows(spark, scripts.dagger(query), UPSERT_KEYS.get(query, ()))  # while Flink runs
    theirs = flink_rows(flink.result(query))
    assert "error" not in theirs, f"Flink could not run {query}: {theirs['error']}"
    assert "error" not in ours, ours["error"]
    assert theirs["rows"], f"{query} compares nothing: Flink gave no rows"
    assert ours["columns"] == theirs["columns"]
    if STATUS[query] == NO_FINAL_WATERMARK:
        assert ours != theirs, f"{query} now gives all of Flink's rows: its status is {MATCHES!r}"
        theirs = _closed_windows_only(query, theirs)
        assert theirs["rows"], f"{query} compares nothing: every window is left open"
    assert ours["rows"] == theirs["rows"]


@pytest.mark.parametrize("query", REFUSED)
def test_a_query_that_does_not_run_yet_is_refused_before_it_starts(
    query: str, scripts: NexmarkScripts, spark
) -> None:
    reason = STATUS[query].removeprefix("refused: ")
    try:
        spec = scripts.dagger(query)
    except DaggerConfigError as error:
        refusal = str(error)
    else:
        refusal = dagger_rows(spark, spec, UPSERT_KEYS.get(query, ()))["error"]
        assert refusal.startswith("refused before the start"), refusal
    assert reason in refusal

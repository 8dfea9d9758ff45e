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

`STATUS` is the one table of what each query does today: `matches` (Flink's rows, to the row) or `refused`
with the reason the dagger gives before its query starts. When an operator lands, its query's entry moves
to `matches`; docs/nexmark.md shows the same table.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobs.model.spec import DaggerConfigError
from jobs.tools.nexmark.config import NexmarkConfig
from jobs.tools.nexmark.oracle import (
    QUERY_IDS,
    UPSERT_KEYS,
    FlinkNexmark,
    NexmarkScripts,
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
STATUS: dict[str, str] = {
    "q0": MATCHES,
    "q1": MATCHES,
    "q2": MATCHES,
    "q3": MATCHES,
    "q4": MATCHES,
    "q5": MATCHES,
    "q6": "refused: A column, variable, or function parameter with name `rownum` cannot be resolved",
    "q7": MATCHES,
    "q8": MATCHES,
    "q9": MATCHES,
    "q10": MATCHES,
    "q11": MATCHES,
    "q12": "refused: a bounded run of a processing-time window (TUMBLE on PROCTIME()) would never end",
    "q13": MATCHES,
    "q14": "refused: function class com.github.nexmark.flink.udf.CountChar is not on the class path",
    "q15": MATCHES,
    "q16": MATCHES,
    "q17": MATCHES,
    "q18": MATCHES,
    "q19": MATCHES,
    "q20": MATCHES,
    "q21": MATCHES,
    "q22": MATCHES,
    "q23": MATCHES,
}
"""Each query's status today: `matches`, `differs: <why>` or `refused: <what the refusal says>`."""

RUNNING = [query for query in QUERY_IDS if not STATUS[query].startswith("refused: ")]
REFUSED = [query for query in QUERY_IDS if STATUS[query].startswith("refused: ")]


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
    theirs = flink_rows(flink.result(query), UPSERT_KEYS.get(query, ()))
    assert "error" not in theirs, f"Flink could not run {query}: {theirs['error']}"
    assert "error" not in ours, ours["error"]
    assert theirs["rows"], f"{query} compares nothing: Flink gave no rows"
    assert ours["columns"] == theirs["columns"]
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

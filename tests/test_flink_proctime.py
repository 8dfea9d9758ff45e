"""Processing time in Flink SQL scripts (Nexmark q12 and q13's shapes) on Apache Kafka and Spark: TUMBLE
windows on a `PROCTIME()` attribute, which come out as the wall clock passes their end (and, in a bounded
run, at the end of the input), and lookup joins of a bounded CSV side table `FOR SYSTEM_TIME AS OF` it;
and what stays refused, by name."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs.model.errors import DaggerBuildError
from jobs.model.spec import DaggerConfigError
from jobs.raystack.flink_sql import FlinkSqlError, translate
from tests.test_flink_scripts import BID_VIEW, EVENTS_TABLE, VARIABLES, load

WINDOW_S = 2
PER_BIDDER_WINDOWS = f"""
CREATE TABLE counts (bidder BIGINT, bid_count BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3))
WITH ('connector' = 'print');

CREATE VIEW B AS SELECT *, PROCTIME() AS p_time FROM bid;

INSERT INTO counts
SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(p_time), INTERVAL '{WINDOW_S}' SECOND))
GROUP BY bidder, window_start, window_end
"""


def _bid(auction: int, bidder: int, price: int = 10) -> bytes:
    bid = {"auction": auction, "bidder": bidder, "price": price, "dateTime": "2026-12-01 10:00:00.000"}
    return json.dumps({"event_type": 1, "bid": bid}).encode()


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _logged_rows(running) -> list[dict]:
    return [json.loads(line.split(" | ", 1)[1]) for line in running.logged]


def _rows_read(running) -> int:
    return sum(progress["numInputRows"] for progress in running.run.query.recentProgress)


def _wait_for(condition, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        running_out = time.monotonic() > deadline
        assert not running_out, "not within the time allowed"
        time.sleep(0.2)


def test_processing_time_windows_count_every_bid_once_and_close_on_the_wall_clock(
    tmp_path, kafka, start_dagger
):
    events = kafka.new_topic("events")
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    scripts = {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": PER_BIDDER_WINDOWS}
    spec = load(tmp_path, scripts, variables, trigger_interval="200ms")
    assert spec.output_mode == "append"
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    running = start_dagger(spec)
    rounds = [[_bid(1, 7), _bid(2, 7), _bid(1, 8)], [_bid(3, 7), _bid(3, 9)]]
    produced = 0
    for round_bids in rounds:
        kafka.produce(events, round_bids)
        produced += len(round_bids)
        # A processing-time operator runs a batch at every trigger, so the query never idles (Spark's
        # processAllAvailable would wait for ever): the rows read are counted instead.
        _wait_for(lambda: _rows_read(running) >= produced)  # noqa: B023 (called before the next round)
        time.sleep(WINDOW_S + 0.5)  # the next round falls into a later window of the wall clock
    # No record comes after the last round: its windows close on the wall clock alone.
    _wait_for(lambda: sum(row["bid_count"] for row in _logged_rows(running)) >= produced)
    rows = _logged_rows(running)
    closed_by = datetime.now(UTC)
    # Stopped now: a graceful stop waits for a moment between batches, which a query busy at every
    # trigger on a loaded machine may not give for a while.
    running.run.query.stop()

    totals: dict[int, int] = {}
    for row in rows:
        totals[row["bidder"]] = totals.get(row["bidder"], 0) + row["bid_count"]
    assert totals == {7: 3, 8: 1, 9: 1}  # every bid counted exactly once across the windows
    windows = sorted({(row["starttime"], row["endtime"]) for row in rows})
    assert len(windows) == 2  # the two rounds, in two windows
    for start, end in windows:
        assert _instant(end) - _instant(start) == timedelta(seconds=WINDOW_S)
        assert _instant(start).timestamp() % WINDOW_S == 0  # aligned, as Flink's TUMBLE windows
        assert started <= _instant(start) and _instant(end) <= closed_by
    first, second = windows
    by_window = {
        window: {
            row["bidder"]: row["bid_count"] for row in rows if (row["starttime"], row["endtime"]) == window
        }
        for window in windows
    }
    assert by_window == {first: {7: 2, 8: 1}, second: {7: 1, 9: 1}}


@pytest.mark.parametrize(
    ("size", "totals"),
    [("'1' HOUR", {}), ("'0.1' SECOND", {7: 2, 8: 1, 9: 1})],
    ids=["still-open-dropped", "passed-comes-out"],
)
def test_a_bounded_run_ends_with_its_input_as_flink_s_emitting_the_windows_the_clock_has_passed(
    tmp_path, kafka, start_dagger, size, totals
):
    """Flink 2.3's bounded run quiesces its processing-time timers at the end of the input: a window still
    open then never comes out (an hour's TUMBLE over a bounded input gives no rows on Flink). One the wall
    clock has passed came out: here a tenth of a second's, which the batches after the bids' outlast."""
    events = kafka.new_topic("events")
    kafka.produce(events, [_bid(1, 7), _bid(2, 7), _bid(1, 8), _bid(3, 9)])
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    query = PER_BIDDER_WINDOWS.replace(f"INTERVAL '{WINDOW_S}' SECOND", f"INTERVAL {size}")
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": query}, variables)
    started = datetime.now(UTC) - timedelta(seconds=1)
    running = start_dagger(spec, bounded=True)
    # Ends by itself, where Spark's processing-time operator would ask for a batch at every trigger.
    assert running.run.wait(timeout_s=300), "the bounded run did not end"
    rows = _logged_rows(running)
    counted: dict[int, int] = {}
    for row in rows:
        counted[row["bidder"]] = counted.get(row["bidder"], 0) + row["bid_count"]
    assert counted == totals  # every bid counted once, or its window dropped
    for row in rows:
        assert _instant(row["endtime"]) - _instant(row["starttime"]) == timedelta(milliseconds=100)
        assert started <= _instant(row["starttime"]) <= datetime.now(UTC)


def test_a_bounded_run_that_does_not_end_with_the_input_is_refused_as_it_would_never_end(
    tmp_path, kafka, start_dagger
):
    events = kafka.new_topic("events")
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    scripts = {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": PER_BIDDER_WINDOWS}
    spec = load(tmp_path, scripts, variables, bounded_end="open")
    with pytest.raises(DaggerBuildError, match=r"a bounded run of a processing-time window .* never end"):
        start_dagger(spec, bounded=True)


SIDE_TABLE = """
CREATE TABLE side_input (
  key BIGINT,
  `value` VARCHAR
) WITH (
  'connector.type' = 'filesystem',
  'connector.path' = 'file://${SIDE_HOME}/side_input.txt',
  'format.type' = 'csv'
);
"""
LOOKUP = """
CREATE TABLE enriched (auction BIGINT, bidder BIGINT, `value` VARCHAR)
WITH ('connector' = 'print');

INSERT INTO enriched
SELECT B.auction, B.bidder, S.`value`
FROM (SELECT *, PROCTIME() AS p_time FROM bid) B
{join} JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
ON mod(B.auction, 4) = S.key
"""


@pytest.mark.parametrize(
    ("join", "expected"),
    [
        ("", [(1, 7, "one"), (2, 7, "two"), (5, 9, "one")]),
        ("LEFT", [(1, 7, "one"), (2, 7, "two"), (3, 8, None), (5, 9, "one")]),
    ],
    ids=["inner", "left"],
)
def test_a_lookup_join_of_a_csv_side_table_enriches_each_bid_as_flink_does(
    tmp_path, kafka, start_dagger, join, expected
):
    # Flink 2.3 gives these rows for this join of these bids and this file (checked on PyFlink 2.3 with
    # the same legacy CSV table: an INNER join drops a bid without a match, a LEFT one keeps it).
    (tmp_path / "side_input.txt").write_text("0,zero\n1,one\n2,two\n")
    events = kafka.new_topic("events")
    kafka.produce(events, [_bid(1, 7), _bid(2, 7), _bid(3, 8), _bid(5, 9)])
    variables = {
        **VARIABLES,
        "BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "EVENTS_TOPIC": events,
        "SIDE_HOME": str(tmp_path),
    }
    scripts = {"ddl.sql": EVENTS_TABLE + SIDE_TABLE, "views.sql": BID_VIEW, "q.sql": LOOKUP.format(join=join)}
    spec = load(tmp_path, scripts, variables)
    assert [stream.table for stream in spec.streams] == ["events"]  # the side table is no stream
    running = start_dagger(spec)
    running.process_available()
    rows = [(row["auction"], row["bidder"], row["value"]) for row in _logged_rows(running)]
    assert sorted(rows) == expected


def _refusal(tmp_path: Path, scripts: dict[str, str], **variables: str) -> str:
    with pytest.raises(DaggerConfigError) as raised:
        load(tmp_path, scripts, {**VARIABLES, "SIDE_HOME": str(tmp_path), **variables})
    return str(raised.value)


def test_a_side_table_that_is_no_csv_file_flink_looks_up_is_refused_by_name(tmp_path):
    (tmp_path / "side_input.txt").write_text("0,zero\n")
    query = {"views.sql": BID_VIEW, "q.sql": LOOKUP.format(join="")}
    current = SIDE_TABLE.replace("'connector.type'", "'connector'").replace("'format.type'", "'format'")
    message = _refusal(tmp_path, {"ddl.sql": EVENTS_TABLE + current, **query})
    assert "CREATE TABLE side_input: a table looked up FOR SYSTEM_TIME AS OF is a CSV file" in message
    missing = _refusal(tmp_path, {"ddl.sql": EVENTS_TABLE + SIDE_TABLE, **query}, SIDE_HOME="/nowhere")
    assert (
        "CREATE TABLE side_input: 'connector.path' = 'file:///nowhere/side_input.txt': no such file"
        in missing
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "SELECT o.id FROM o JOIN r FOR SYSTEM_TIME AS OF o.rowtime AS x ON o.id = x.id",
            "a temporal join AS OF o.rowtime (an event-time temporal join of a versioned table) is not "
            "supported",
        ),
        (
            "SELECT o.id FROM (SELECT *, PROCTIME() AS pt FROM o) AS o "
            "FULL JOIN r FOR SYSTEM_TIME AS OF o.pt AS x ON o.id = x.id",
            "a lookup join (FOR SYSTEM_TIME AS OF) is INNER or LEFT, as in Flink",
        ),
        (
            "SELECT k, COUNT(*) AS n FROM (SELECT *, PROCTIME() AS pt FROM t) "
            "GROUP BY TUMBLE(pt, INTERVAL '1' SECOND), k",
            "a group window on processing time (TUMBLE(pt, ...)) is not supported; the TUMBLE window table "
            "function on it is",
        ),
        (
            "SELECT k, SUM(x) OVER (PARTITION BY k ORDER BY pt) AS s "
            "FROM (SELECT *, PROCTIME() AS pt FROM t)",
            "an OVER window or ROW_NUMBER() ordered by processing time (pt) is not supported",
        ),
        (
            "WITH v AS (SELECT *, PROCTIME() AS pt FROM t) SELECT window_start, COUNT(*) AS n "
            "FROM TABLE(HOP(TABLE v, DESCRIPTOR(pt), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) "
            "GROUP BY window_start, window_end",
            "HOP windows on processing time are not supported; TUMBLE is",
        ),
        (
            "WITH v AS (SELECT *, PROCTIME() AS pt FROM t) SELECT window_start, COUNT(DISTINCT x) AS n "
            "FROM TABLE(TUMBLE(TABLE v, DESCRIPTOR(pt), INTERVAL '1' SECOND)) "
            "GROUP BY window_start, window_end",
            "COUNT(DISTINCT x) in a processing-time window is not supported",
        ),
        (
            "WITH v AS (SELECT *, PROCTIME() AS pt FROM t) SELECT y, COUNT(*) AS n "
            "FROM TABLE(TUMBLE(TABLE v, DESCRIPTOR(pt), INTERVAL '1' SECOND)) "
            "GROUP BY window_start, window_end",
            "y is neither a GROUP BY key nor aggregated",
        ),
    ],
    ids=[
        "event-time-temporal-join",
        "full-lookup-join",
        "group-window",
        "over",
        "hop",
        "distinct",
        "ungrouped",
    ],
)
def test_processing_time_where_it_does_not_run_here_is_refused_by_name(query, message):
    with pytest.raises(FlinkSqlError, match=re.escape(message)):
        translate(query)


def test_a_processing_time_window_s_keys_aggregates_and_having_read_the_operator_s_columns():
    query = translate(
        "SELECT k, COUNT(*) AS n, SUM(x) + 1 AS s, window_end FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(pt), "
        "INTERVAL '1' SECOND)) WHERE x > 0 GROUP BY k, window_start, window_end HAVING COUNT(*) > 1",
        proctime_columns=frozenset({"pt"}),
    )
    (view,) = query.over_views
    assert view.source_sql == "SELECT k AS __key_0, x AS __argument_1 FROM t WHERE x > 0"
    assert (view.keys, view.size_ms, view.functions, view.arguments) == (
        ("__key_0",), 1000, ("COUNT", "SUM", "COUNT"), ("", "__argument_1", ""),
    )  # fmt: skip
    assert query.sql == (
        "SELECT __key_0 AS k, __aggregate_0 AS n, __aggregate_1 + 1 AS s, window_end "
        f"FROM {view.name} WHERE __aggregate_2 > 1"
    )
    assert query.output_columns == ("k", "n", "s", "window_end")

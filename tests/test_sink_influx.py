"""The InfluxDB sink against a real InfluxDB (Debian's influxd 1.6, authentication on), fed by daggers
reading the real broker on local Spark: exactly the expected points, tags, fields and times come out.

The v2 write path (the `influxdb-client` write API, `/api/v2/write`) cannot be served by InfluxDB 1.6
(404). It is exercised against the same server through InfluxDB 1.8's compatibility mapping, which
`tests.servers.influxdb.CompatProxy` implements in front of it: bucket `database/retention_policy`, token
`username:password`, forwarded to 1.6's `/write?db=&rp=`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetKey

from dagger_assets.health import live_evaluations
from jobs.model.spec import DaggerChecks, DaggerConfigError
from jobs.running.runner import DaggerBuildError, DaggerQueryError, build_dagger
from jobs.sinks.base import SinkContext, Written
from jobs.sinks.influx.writer import InfluxSinkError, InfluxSinkWriter
from tests.conftest import kafka_stream, order_payloads
from tests.servers.influxdb import ADMIN_PASSWORD, ADMIN_USER

START = 1_700_000_000  # created_at of order o0 (2023-11-14T22:13:20Z); o<i> is i seconds later
MEASUREMENT = "orders"

# Every kind of column the sink maps: tags with and without their prefix (one null), integer, float (also
# FLOAT), boolean and string fields (one null), a timestamp and a date as text, nested values as JSON,
# and a point time with microseconds.
MAPPED_SQL = """
    SELECT
        order_id AS tag_order,
        customer_id AS label_customer,
        CASE WHEN amount % 2 = 0 THEN 'even' END AS label_parity,
        amount,
        CAST(amount AS BIGINT) * 10 AS amount_tenfold,
        CAST(amount / 10 AS FLOAT) AS tenth,
        amount >= 2 AS big,
        CASE WHEN amount != 1 THEN concat('note-', order_id) END AS note,
        created_at AS created,
        CAST(created_at AS DATE) AS day,
        named_struct('id', order_id, 'n', CAST(amount AS INT)) AS detail,
        array(amount, amount + 0.5) AS pair,
        map('k', order_id) AS attrs,
        created_at + INTERVAL '0.123456' SECOND AS window_timestamp
    FROM orders
"""


def expected_points(count: int) -> list[dict[str, Any]]:
    """`SELECT *` (epoch=u) of the points MAPPED_SQL makes of orders o0..o<count-1>."""
    points = []
    for index in range(count):
        points.append(
            {
                "time": (START + index) * 1_000_000 + 123_456,
                "amount": index,  # InfluxDB's JSON prints the float 2.0 as 2
                "amount_tenfold": index * 10,
                "attrs": f'{{"k":"o{index}"}}',
                "big": index >= 2,
                "created": f"2023-11-14T22:13:{20 + index}Z",
                "customer": "c",
                "day": "2023-11-14",
                "detail": f'{{"id":"o{index}","n":{index}}}',
                "note": None if index == 1 else f"note-o{index}",
                "pair": f"[{float(index)},{index + 0.5}]",
                "parity": "even" if index % 2 == 0 else None,
                "tag_order": f"o{index}",
                "tenth": [0, 0.1, 0.2, 0.3][index],
            }
        )
    return points


MAPPED_FIELD_TYPES = {
    "amount": "float",
    "amount_tenfold": "integer",
    "attrs": "string",
    "big": "boolean",
    "created": "string",
    "day": "string",
    "detail": "string",
    "note": "string",
    "pair": "string",
    "tenth": "float",
}


def influx_sink(url: str, database: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "kind": "influx",
        "url": url,
        "database": database,
        "measurement": MEASUREMENT,
        "username": ADMIN_USER,
        "password": ADMIN_PASSWORD,
        **fields,
    }


def orders_dagger(make_dagger, kafka, topic: str, sql: str, sink: dict[str, Any], **fields: Any):
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )
    return make_dagger(streams=[stream], sql=sql, sinks=[sink], **fields)


def orders_topic(kafka, registry, count: int, start: int = 0) -> str:
    topic = kafka.new_topic("influx-orders")
    kafka.produce(topic, order_payloads(registry, start, count))
    return topic


@pytest.fixture
def proxy(influxdb):
    influxdb.proxy.reset()
    yield influxdb.proxy
    influxdb.proxy.reset()


def test_v1_writes_daggers_tags_fields_and_times(kafka, registry, make_dagger, start_dagger, influxdb):
    database = influxdb.create_database()
    topic = orders_topic(kafka, registry, 4)
    spec = orders_dagger(make_dagger, kafka, topic, MAPPED_SQL, influx_sink(influxdb.url, database))
    start_dagger(spec).process_available()

    assert influxdb.rows(database, MEASUREMENT) == expected_points(4)
    assert influxdb.tag_keys(database, MEASUREMENT) == ["customer", "parity", "tag_order"]
    assert influxdb.field_types(database, MEASUREMENT) == MAPPED_FIELD_TYPES


def test_v2_write_api_through_the_18_compatibility_mapping(
    kafka, registry, make_dagger, start_dagger, influxdb, proxy
):
    """api v2 (influxdb-client's write API) against InfluxDB 1.6 through the 1.8 compatibility mapping:
    bucket `database/retention_policy` and token `username:password` by default."""
    database = influxdb.create_database(retention_policy="keep")
    topic = orders_topic(kafka, registry, 4)
    sink = influx_sink(proxy.url, database, api="v2", retention_policy="keep", batch_size=3)
    start_dagger(orders_dagger(make_dagger, kafka, topic, MAPPED_SQL, sink)).process_available()

    assert influxdb.rows(database, MEASUREMENT, "keep") == expected_points(4)
    assert influxdb.tag_keys(database, MEASUREMENT, "keep") == ["customer", "parity", "tag_order"]
    assert influxdb.field_types(database, MEASUREMENT, "keep") == MAPPED_FIELD_TYPES
    assert sorted(len(request.lines) for request in proxy.requests) == [1, 3]  # batch_size points a request
    for request in proxy.requests:
        assert request.path == "/api/v2/write"
        assert request.params == {"bucket": f"{database}/keep", "org": "", "precision": "us"}
        assert request.authorization == f"Token {ADMIN_USER}:{ADMIN_PASSWORD}"


def test_a_replayed_batch_overwrites_its_points(
    kafka, registry, make_dagger, start_dagger, influxdb, tmp_path: Path
):
    """Batch 1 runs twice (the second time from a copy of the checkpoint taken before it): same points."""
    database = influxdb.create_database()
    topic = orders_topic(kafka, registry, 5)
    sql = "SELECT order_id AS tag_order, amount, created_at AS window_timestamp FROM orders"
    spec = orders_dagger(make_dagger, kafka, topic, sql, influx_sink(influxdb.url, database))
    checkpoint, before_batch_1 = Path(spec.resolved_checkpoint_location), tmp_path / "before-batch-1"

    first = start_dagger(spec)
    first.process_available()
    first.run.stop()
    shutil.copytree(checkpoint, before_batch_1)
    kafka.produce(topic, order_payloads(registry, 5, 5))
    second = start_dagger(spec)
    second.process_available()
    second.run.stop()
    written = influxdb.rows(database, MEASUREMENT)
    assert [row["tag_order"] for row in written] == [f"o{index}" for index in range(10)]

    shutil.rmtree(checkpoint)
    shutil.copytree(before_batch_1, checkpoint)
    replay = start_dagger(spec)
    replay.process_available()
    assert [(report.batch_id, report.input_rows) for report in replay.run.reports if report.input_rows] == [
        (1, 5)
    ]
    assert influxdb.rows(database, MEASUREMENT) == written


def test_updated_window_aggregates_overwrite_their_point(
    kafka, registry, make_dagger, start_dagger, influxdb
):
    """Dagger's use: a tumbling window in update mode writes each window's latest aggregate over the last."""
    database = influxdb.create_database()
    topic = orders_topic(kafka, registry, 5)
    sql = """
        SELECT window.end AS window_timestamp, customer_id AS tag_customer,
               count(*) AS orders, sum(amount) AS total
        FROM orders GROUP BY window(rowtime, '10 seconds'), customer_id
    """
    spec = orders_dagger(
        make_dagger, kafka, topic, sql, influx_sink(influxdb.url, database), output_mode="update"
    )
    running = start_dagger(spec)
    running.process_available()
    assert influxdb.rows(database, MEASUREMENT) == [
        {"time": (START + 10) * 1_000_000, "orders": 5, "tag_customer": "c", "total": 10}
    ]

    kafka.produce(topic, order_payloads(registry, 5, 8))
    running.process_available()
    assert influxdb.rows(database, MEASUREMENT) == [
        {"time": (START + 10) * 1_000_000, "orders": 10, "tag_customer": "c", "total": 45},
        {"time": (START + 20) * 1_000_000, "orders": 3, "tag_customer": "c", "total": 33},
    ]


def test_failed_requests_are_retried_with_backoff(
    kafka, registry, make_dagger, start_dagger, influxdb, proxy
):
    database = influxdb.create_database()
    topic = orders_topic(kafka, registry, 3)
    sql = "SELECT order_id AS tag_order, amount, created_at AS window_timestamp FROM orders"
    sink = influx_sink(proxy.url, database, max_retries=3, retry_backoff="200ms")
    running = start_dagger(orders_dagger(make_dagger, kafka, topic, sql, sink))
    proxy.fail_next(2, 503, "overloaded")
    running.process_available()

    assert len(proxy.requests) == 3
    first, second, third = (request.received_at for request in proxy.requests)
    assert second - first >= 0.2 and third - second >= 0.4  # 200 ms, then 400 ms
    assert proxy.requests[0].lines == proxy.requests[2].lines
    assert influxdb.count(database, MEASUREMENT) == 3

    # Counted as the task that wrote them reported them: the requests, the retries, and the health check
    # on the sinks' error ratio, which two failed requests of three turn red.
    [written] = [report.sinks["0_influx"] for report in running.run.reports if report.input_rows]
    assert written == Written(rows=3, requests=3, retries=2)
    labels = {"dagger": "test-dagger", "sink": "0_influx"}
    assert running.run.metrics.registry.get_sample_value("dagger_sink_retries_total", labels) == 2
    assert running.run.metrics.registry.get_sample_value("dagger_sink_requests_total", labels) == 3
    [evaluation] = [
        evaluation
        for evaluation in live_evaluations(AssetKey("sql"), DaggerChecks(), running.run.reports)
        if evaluation.check_name == "sink_errors_below_threshold"
    ]
    assert not evaluation.passed
    assert evaluation.metadata["error_ratio"].value == round(2 / 3, 6)


def test_retries_are_bounded_then_the_batch_fails_naming_the_sink(
    kafka, registry, make_dagger, start_dagger, influxdb, proxy
):
    database = influxdb.create_database()
    topic = orders_topic(kafka, registry, 3)
    sql = "SELECT order_id AS tag_order, amount, created_at AS window_timestamp FROM orders"
    sink = influx_sink(proxy.url, database, max_retries=2, retry_backoff="100ms")
    running = start_dagger(orders_dagger(make_dagger, kafka, topic, sql, sink))
    proxy.fail_next(100, 503, "overloaded")
    with pytest.raises(
        DaggerQueryError,
        match=rf"influx sink {proxy.url} database '{database}' measurement 'orders': batch 0: "
        r"write failed after 3 attempt\(s\): HTTP 503: overloaded",
    ):
        running.process_available()
    assert len(proxy.requests) == 3
    assert influxdb.count(database, MEASUREMENT) == 0


def test_an_unreachable_server_fails_the_batch_after_the_retries(
    kafka, registry, make_dagger, start_dagger, influxdb
):
    from jobs.tools.broker import free_port

    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    topic = orders_topic(kafka, registry, 3)
    sql = "SELECT order_id AS tag_order, amount, created_at AS window_timestamp FROM orders"
    sink = influx_sink(nowhere, "metrics", max_retries=2, retry_backoff="100ms", timeout="2s")
    running = start_dagger(orders_dagger(make_dagger, kafka, topic, sql, sink))
    with pytest.raises(
        DaggerQueryError,
        match=rf"influx sink {nowhere} database 'metrics' measurement 'orders': batch 0: "
        r"write failed after 3 attempt\(s\): .*(Connection refused|NewConnectionError)",
    ):
        running.process_available()


@pytest.mark.parametrize(
    ("database", "password", "answer"),
    [
        ("missing_db", ADMIN_PASSWORD, 'HTTP 404: database not found: "missing_db"'),
        (None, "wrong", "HTTP 401: authorization failed"),
    ],
)
def test_client_errors_fail_at_once_with_the_servers_message(
    kafka, registry, make_dagger, start_dagger, influxdb, proxy, database, password, answer
):
    database = database or influxdb.create_database()
    topic = orders_topic(kafka, registry, 3)
    sql = "SELECT order_id AS tag_order, amount, created_at AS window_timestamp FROM orders"
    sink = influx_sink(proxy.url, database, password=password, max_retries=3, retry_backoff="10s")
    running = start_dagger(orders_dagger(make_dagger, kafka, topic, sql, sink))
    with pytest.raises(DaggerQueryError, match=rf"batch 0: write rejected: {answer}$"):
        running.process_available()
    assert len(proxy.requests) == 1  # no retry


def test_a_row_without_fields_fails_the_batch_naming_the_row(
    kafka, registry, make_dagger, start_dagger, influxdb
):
    database = influxdb.create_database()
    topic = orders_topic(kafka, registry, 3)
    sql = """
        SELECT order_id AS tag_order, CASE WHEN amount != 1 THEN amount END AS amount,
               CASE WHEN amount != 1 THEN double('NaN') END AS ratio, created_at AS window_timestamp
        FROM orders
    """
    running = start_dagger(orders_dagger(make_dagger, kafka, topic, sql, influx_sink(influxdb.url, database)))
    with pytest.raises(
        DaggerQueryError,
        match=r"batch 0: the row with tags \[tag_order=o1\] and time 2023-11-14T22:13:21Z has no non-null "
        r"field \(amount, ratio are all null or NaN\); InfluxDB rejects a point without fields",
    ):
        running.process_available()
    assert influxdb.count(database, MEASUREMENT) == 0  # the partition's points were not sent


def test_a_time_column_of_another_type_fails_the_first_batch_before_writing(
    kafka, registry, make_dagger, start_dagger, influxdb
):
    database = influxdb.create_database()
    topic = orders_topic(kafka, registry, 2)
    sql = "SELECT amount, CAST(created_at AS STRING) AS window_timestamp FROM orders"
    running = start_dagger(orders_dagger(make_dagger, kafka, topic, sql, influx_sink(influxdb.url, database)))
    with pytest.raises(
        DaggerQueryError,
        match=rf"influx sink {influxdb.url} database '{database}' measurement 'orders': time_column "
        r"'window_timestamp' is string; it must be a TIMESTAMP or DATE \(CAST it, or set time_column\)$",
    ):
        running.process_available()
    assert influxdb.count(database, MEASUREMENT) == 0


def test_points_beyond_the_retention_policy_are_dropped_without_failing(
    kafka, registry, make_dagger, start_dagger, influxdb
):
    """As in Dagger: InfluxDB's 'partial write: points beyond retention policy' is a warning."""
    database = influxdb.create_database(retention_policy="hour", duration="1h")
    topic = orders_topic(kafka, registry, 3)
    sql = """
        SELECT order_id AS tag_order, amount,
               CASE WHEN amount = 0 THEN current_timestamp() ELSE created_at END AS window_timestamp
        FROM orders
    """
    sink = influx_sink(influxdb.url, database, retention_policy="hour")
    running = start_dagger(orders_dagger(make_dagger, kafka, topic, sql, sink))
    running.process_available()
    assert [row["tag_order"] for row in influxdb.rows(database, MEASUREMENT, "hour")] == ["o0"]
    running.assert_still_running()


def test_settings_errors_name_the_key(kafka, make_dagger):
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=["t"]
    )

    def problem(**sink: Any) -> str:
        with pytest.raises(DaggerConfigError) as raised:
            make_dagger(streams=[stream], sql="SELECT amount FROM orders", sinks=[{"kind": "influx", **sink}])
        return str(raised.value)

    assert "sinks[0].measurement: required key is missing" in problem(url="http://h:8086", database="d")
    assert "sinks[0]: api 'v1' needs 'database'" in problem(url="http://h:8086", measurement="m")
    assert "sinks[0].url: expected an http:// or https:// URL (got 'h:8086')" in problem(
        url="h:8086", database="d", measurement="m"
    )
    assert "sinks[0]: api 'v2' needs 'bucket'" in problem(url="http://h:8086", api="v2", measurement="m")


def test_settings_that_cannot_work_fail_before_start(kafka, make_dagger, spark, registry):
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=["t"]
    )

    def build(**sink: Any) -> None:
        spec = make_dagger(
            streams=[stream],
            sql="SELECT amount FROM orders",
            sinks=[{"kind": "influx", "measurement": "m", "database": "d", **sink}],
        )
        build_dagger(spark, spec, registry)

    with pytest.raises(
        DaggerBuildError, match=r"sinks\[0\] \(influx\): url 'http://h:99999': Port out of range"
    ):
        build(url="http://h:99999")
    with pytest.raises(DaggerBuildError, match=r"url 'http://h:8086': set 'username' and 'password' instead"):
        build(url="http://me:secret@h:8086")
    with pytest.raises(
        DaggerBuildError, match=r"sinks\[0\] \(influx\): api 'v1' does not use 'token' \(api 'v2' settings\)"
    ):
        build(url="http://h:8086", token="t")


def test_result_columns_that_cannot_be_points_fail_the_batch_before_writing(spark, make_dagger, kafka):
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=["t"]
    )
    spec = make_dagger(
        streams=[stream],
        sql="SELECT amount FROM orders",
        sinks=[{"kind": "influx", "url": "http://h:8086", "measurement": "m", "database": "d"}],
    )
    writer = InfluxSinkWriter(spec.sinks[0], SinkContext(spec))

    def layout_error(sql: str) -> str:
        with pytest.raises(InfluxSinkError) as raised:
            writer.layout(spark.sql(sql))
        return str(raised.value)

    prefix = "influx sink http://h:8086 database 'd' measurement 'm': "
    assert layout_error("SELECT 1 AS x, 'a' AS window_timestamp") == (
        prefix + "time_column 'window_timestamp' is string; it must be a TIMESTAMP or DATE (CAST it, or set "
        "time_column)"
    )
    assert layout_error("SELECT 'a' AS tag_a, 'b' AS label_b, current_timestamp() AS window_timestamp") == (
        prefix + "the result has no field column (every column is a tag or the time); InfluxDB rejects "
        "points without fields"
    )
    assert layout_error("SELECT 'a' AS tag_x, 'b' AS label_tag_x, 1 AS v") == (
        prefix + "columns 'tag_x' and 'label_tag_x' would both write 'tag_x'; rename one"
    )
    assert layout_error("SELECT 'a' AS label_v, 1 AS v") == (
        prefix + "columns 'label_v' and 'v' would both write 'v'; rename one"
    )
    assert layout_error("SELECT 1 AS time") == (
        prefix + "column 'time' would be a field named 'time', which InfluxDB rejects; rename it"
    )

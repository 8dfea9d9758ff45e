"""Elasticsearch sink end to end: Kafka -> Spark -> Elasticsearch 8.15 (the decisive ones also on 7.17:
`test_elasticsearch7.py`).

Every test reads back what the server holds: documents by id, searches, counts and index names.
"""

from __future__ import annotations

import base64
import math
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from jobs.model.spec import DaggerConfigError, parse_dagger
from jobs.running.runner import DaggerBuildError, DaggerQueryError, build_dagger
from jobs.sinks.base import SinkContext
from jobs.sinks.elasticsearch.writer import ElasticsearchSinkWriter, IndexTemplate, documents
from jobs.tools.broker import free_port
from tests.conftest import kafka_stream, order_payloads
from tests.servers.elasticsearch import Fault, FaultyProxy

ORDER = "dagger.testing.Order"
FIRST_ORDER_TIME = datetime.fromtimestamp(1_700_000_000, UTC)  # order i: this + i seconds


def orders_stream(kafka, topic: str) -> dict:
    return kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[topic])


def es_sink(hosts: str | list[str], index: str, **fields) -> dict:
    return {
        "kind": "elasticsearch",
        "hosts": [hosts] if isinstance(hosts, str) else hosts,
        "index": index,
        "retry_backoff": "50ms",
        **fields,
    }


def orders_topic(kafka, registry, count: int) -> str:
    topic = kafka.new_topic("es-orders")
    kafka.produce(topic, order_payloads(registry, 0, count))
    return topic


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --------------------------------------------------------------------------------------------------------
# Indexing
# --------------------------------------------------------------------------------------------------------

EVERY_KIND_SQL = """
    SELECT order_id, customer_id, amount, created_at,
           timestamp_seconds(unix_seconds(created_at) + CAST(amount AS BIGINT) * 43200) AS booked_at,
           to_date(created_at) AS created_on,
           CAST(amount AS DECIMAL(10, 2)) AS amount_exact,
           CAST(order_id AS BINARY) AS raw_id,
           named_struct('customer', customer_id, 'at', created_at) AS detail,
           array(amount, amount * 2) AS amounts,
           map('id', order_id) AS tags,
           CAST(NULL AS STRING) AS note
    FROM orders
"""


def expected_order_document(index: int) -> dict:
    created = FIRST_ORDER_TIME + timedelta(seconds=index)
    return {
        "order_id": f"o{index}",
        "customer_id": "c",
        "amount": float(index),
        "created_at": iso(created),
        "booked_at": iso(created + timedelta(hours=12 * index)),
        "created_on": "2023-11-14",
        "amount_exact": f"{index}.00",
        "raw_id": base64.b64encode(f"o{index}".encode()).decode(),
        "detail": {"customer": "c", "at": iso(created)},
        "amounts": [float(index), float(2 * index)],
        "tags": {"id": f"o{index}"},
        "note": None,
    }


def test_documents_are_indexed_by_id_into_date_pattern_indices(
    kafka, registry, make_dagger, start_dagger, elasticsearch
):
    count = 20
    topic, prefix = orders_topic(kafka, registry, count), elasticsearch.unique_name("orders")
    spec = make_dagger(
        streams=[orders_stream(kafka, topic)],
        sql=EVERY_KIND_SQL,
        sinks=[
            es_sink(elasticsearch.url, f"{prefix}-{{booked_at:%Y.%m.%d}}", id_column="order_id", batch_size=7)
        ],
    )
    start_dagger(spec).process_available()

    expected_index = {}  # order i is booked i * 12 h after it was created, so two orders a day
    for index in range(count):
        booked = FIRST_ORDER_TIME + timedelta(seconds=index, hours=12 * index)
        expected_index[f"o{index}"] = f"{prefix}-{booked:%Y.%m.%d}"
    for index in range(count):
        order_id = f"o{index}"
        assert elasticsearch.get(expected_index[order_id], order_id) == expected_order_document(index)

    assert elasticsearch.ids(f"{prefix}-*") == sorted(expected_index)
    hits = elasticsearch.search(f"{prefix}-*", {"range": {"amount": {"gte": 15}}})
    assert sorted((hit["_index"], hit["_id"]) for hit in hits) == sorted(
        (expected_index[f"o{index}"], f"o{index}") for index in range(15, count)
    )
    days = [f"{prefix}-2023.11.{day}" for day in range(14, 25)]
    assert elasticsearch.indices(f"{prefix}-*") == days
    assert [elasticsearch.count(day) for day in days] == [1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1]


@pytest.mark.parametrize(
    ("id_column", "count_after_replay"),
    [("order_id", 12), (None, 24)],
    ids=["with-id-column-overwrites", "without-id-column-duplicates"],
)
def test_a_batch_replayed_from_the_checkpoint(
    kafka, registry, make_dagger, start_dagger, elasticsearch, tmp_path, id_column, count_after_replay
):
    topic, index = orders_topic(kafka, registry, 12), elasticsearch.unique_name("replay")
    spec = make_dagger(
        streams=[orders_stream(kafka, topic)],
        sql="SELECT order_id, amount, created_at FROM orders",
        sinks=[es_sink(elasticsearch.url, index, id_column=id_column, batch_size=5)],
    )
    first = start_dagger(spec)
    first.process_available()
    first.run.stop()
    assert [(report.batch_id, report.input_rows) for report in first.run.reports] == [(0, 12)]
    assert elasticsearch.count(index) == 12

    # As if the query died after the sink wrote batch 0 but before Spark committed it: the restarted
    # query runs batch 0 again over the same offsets.
    commits = Path(tmp_path, "checkpoint", "commits")
    for name in ("0", ".0.crc"):
        (commits / name).unlink(missing_ok=True)
    second = start_dagger(spec)
    second.process_available()
    assert [(report.batch_id, report.input_rows) for report in second.run.reports] == [(0, 12)]

    assert elasticsearch.count(index) == count_after_replay
    hits = elasticsearch.search(index)
    assert sorted(hit["_source"]["order_id"] for hit in hits) == sorted(
        [f"o{i}" for i in range(12)] * (count_after_replay // 12)
    )
    if id_column:
        assert sorted(hit["_id"] for hit in hits) == sorted(f"o{i}" for i in range(12))
        assert elasticsearch.get(index, "o7") == {
            "order_id": "o7",
            "amount": 7.0,
            "created_at": iso(FIRST_ORDER_TIME + timedelta(seconds=7)),
        }


MAPPINGS = {
    "properties": {
        "order_id": {"type": "keyword"},
        "created_at": {"type": "date"},
        "customer_id": {"type": "text", "index": False},
    }
}


def test_an_index_is_created_with_the_declared_mappings(
    kafka, registry, make_dagger, start_dagger, elasticsearch
):
    topic, index = orders_topic(kafka, registry, 3), elasticsearch.unique_name("mapped")
    spec = make_dagger(
        streams=[orders_stream(kafka, topic)],
        sql="SELECT order_id, customer_id, created_at, amount FROM orders",
        sinks=[es_sink(elasticsearch.url, index, id_column="order_id", mappings=MAPPINGS)],
    )
    start_dagger(spec).process_available()
    properties = elasticsearch.ok("GET", f"/{index}/_mapping")[index]["mappings"]["properties"]
    assert {name: properties[name] for name in MAPPINGS["properties"]} == MAPPINGS["properties"]
    assert {hit["_id"]: hit["_source"] for hit in elasticsearch.search(index)} == {
        f"o{i}": {
            "order_id": f"o{i}",
            "customer_id": "c",
            "created_at": iso(FIRST_ORDER_TIME + timedelta(seconds=i)),
            "amount": float(i),
        }
        for i in range(3)
    }
    assert elasticsearch.ids(index, {"term": {"order_id": "o1"}}) == ["o1"]  # keyword: the whole value


def test_an_existing_index_gets_the_fields_it_lacks_and_a_conflict_stops_the_start(
    kafka, registry, make_dagger, start_dagger, elasticsearch
):
    topic, index = orders_topic(kafka, registry, 1), elasticsearch.unique_name("existing")
    elasticsearch.create_index(index, {"order_id": {"type": "keyword"}})
    sql = "SELECT order_id, customer_id, created_at FROM orders"
    adding = make_dagger(
        streams=[orders_stream(kafka, topic)],
        sql=sql,
        sinks=[es_sink(elasticsearch.url, index, mappings=MAPPINGS)],
    )
    start_dagger(adding)
    properties = elasticsearch.ok("GET", f"/{index}/_mapping")[index]["mappings"]["properties"]
    assert properties["created_at"] == {"type": "date"}

    conflicting = {"properties": {"order_id": {"type": "long"}}}
    spec = make_dagger(
        name="conflicting",
        streams=[orders_stream(kafka, topic)],
        sql=sql,
        sinks=[es_sink(elasticsearch.url, index, mappings=conflicting)],
    )
    with pytest.raises(
        DaggerBuildError,
        match=r"its mapping was refused: mapper \[order_id\] cannot be changed from type \[keyword\] "
        r"to \[long\]$",
    ):
        start_dagger(spec)


def test_a_date_pattern_index_gets_its_mappings_through_an_index_template(
    kafka, registry, make_dagger, start_dagger, elasticsearch
):
    topic, prefix = orders_topic(kafka, registry, 2), elasticsearch.unique_name("daily")
    spec = make_dagger(
        streams=[orders_stream(kafka, topic)],
        sql="SELECT order_id, customer_id, created_at FROM orders",
        sinks=[es_sink(elasticsearch.url, f"{prefix}-{{created_at:%Y.%m.%d}}", mappings=MAPPINGS)],
    )
    start_dagger(spec).process_available()
    index = f"{prefix}-2023.11.14"
    properties = elasticsearch.ok("GET", f"/{index}/_mapping")[index]["mappings"]["properties"]
    assert {name: properties[name] for name in MAPPINGS["properties"]} == MAPPINGS["properties"]
    assert elasticsearch.indices(f"{prefix}-*") == [index]
    hits = elasticsearch.search(f"{prefix}-*")
    assert [hit["_index"] for hit in hits] == [index, index]
    assert sorted((hit["_source"] for hit in hits), key=lambda document: document["order_id"]) == [
        {"order_id": f"o{i}", "customer_id": "c", "created_at": iso(FIRST_ORDER_TIME + timedelta(seconds=i))}
        for i in range(2)
    ]


# --------------------------------------------------------------------------------------------------------
# Failures
# --------------------------------------------------------------------------------------------------------


def test_rejected_documents_fail_the_batch_naming_index_id_and_reason(
    kafka, registry, make_dagger, start_dagger, elasticsearch
):
    topic, index = orders_topic(kafka, registry, 8), elasticsearch.unique_name("conflict")
    elasticsearch.create_index(index, {"customer_id": {"type": "long"}})
    spec = make_dagger(
        streams=[orders_stream(kafka, topic)],
        # orders 0-2 carry a number, the others text that a `long` field refuses
        sql="SELECT order_id, CASE WHEN amount < 3 THEN '7' ELSE customer_id END AS customer_id FROM orders",
        sinks=[es_sink(elasticsearch.url, index, id_column="order_id")],
    )
    running = start_dagger(spec)
    reason = (
        "failed to parse field [customer_id] of type [long] in document with id '{id}'. "
        "Preview of field's value: 'c'"
    )
    if elasticsearch.version.startswith("7."):
        reason = "400 mapper_parsing_exception: " + reason
    else:  # 8.x: a document that does not parse has an error type of its own, and the place in its source
        reason = "400 document_parsing_exception: [1:32] " + reason
    rejected = "; ".join(f"{index}/o{i}: " + reason.format(id=f"o{i}") for i in (3, 4, 5))
    with pytest.raises(DaggerQueryError) as failure:
        running.process_available()
    assert str(failure.value) == (
        "dagger test-dagger stopped: jobs.sinks.elasticsearch.writer.ElasticsearchSinkError: "
        "elasticsearch sink "
        f"{elasticsearch.url} index '{index}': batch 0: 5 of 8 document(s) rejected: {rejected}; and 2 more"
    )
    assert not running.run.query.isActive
    # Accepted documents stay (a bulk request is not a transaction); the replay overwrites them.
    assert elasticsearch.ids(index) == ["o0", "o1", "o2"]


def test_an_unreachable_host_fails_after_bounded_retries_naming_it(
    kafka, registry, make_dagger, start_dagger
):
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    spec = make_dagger(
        streams=[orders_stream(kafka, orders_topic(kafka, registry, 3))],
        sql="SELECT order_id FROM orders",
        sinks=[es_sink(nowhere, "lost", max_retries=2, retry_backoff="100ms", timeout="2s")],
    )
    running = start_dagger(spec)
    with pytest.raises(
        DaggerQueryError,
        match=rf"elasticsearch sink {nowhere} index 'lost': batch 0: gave up after 2 retries: "
        rf"{nowhere}/_bulk: NewConnectionError: .*Connection refused",
    ):
        running.process_available()


def test_a_host_that_is_down_is_failed_over(kafka, registry, make_dagger, start_dagger, elasticsearch):
    index = elasticsearch.unique_name("failover")
    dead = f"http://127.0.0.1:{free_port()}"
    spec = make_dagger(
        streams=[orders_stream(kafka, orders_topic(kafka, registry, 10))],
        sql="SELECT order_id FROM orders",
        # requests rotate over the hosts: some start on the dead one and move on at once
        sinks=[es_sink([dead, elasticsearch.url], index, id_column="order_id", batch_size=2, max_retries=1)],
    )
    start_dagger(spec).process_available()
    assert elasticsearch.ids(index) == sorted(f"o{i}" for i in range(10))


def test_requests_and_documents_rejected_for_now_are_retried(
    kafka, registry, make_dagger, start_dagger, elasticsearch
):
    index = elasticsearch.unique_name("retried")
    proxy = FaultyProxy(elasticsearch.url, [Fault(429), Fault(429, reject_items=[1, 4])])
    try:
        spec = make_dagger(
            streams=[orders_stream(kafka, orders_topic(kafka, registry, 6))],
            sql="SELECT order_id FROM orders",
            sinks=[es_sink(proxy.url, index, id_column="order_id", max_retries=2)],
        )
        start_dagger(spec).process_available()
    finally:
        proxy.close()
    # 1: answered 429 as a whole; 2: documents o1 and o4 rejected with 429; 3: those two alone
    assert [len(proxy.documents(n)) for n in range(len(proxy.bodies))] == [6, 6, 2]
    assert proxy.documents(2) == [{"order_id": "o1"}, {"order_id": "o4"}]
    assert elasticsearch.ids(index) == sorted(f"o{i}" for i in range(6))


def test_a_request_that_times_out_is_sent_again(kafka, registry, make_dagger, start_dagger, elasticsearch):
    index = elasticsearch.unique_name("slow")
    # Forwarded late (indexed all the same), long after the sink gave up on it. The timeout leaves the
    # request sent again seconds to be answered, even by an Elasticsearch busy with a whole test suite.
    proxy = FaultyProxy(elasticsearch.url, [Fault(delay_s=8)])
    try:
        spec = make_dagger(
            streams=[orders_stream(kafka, orders_topic(kafka, registry, 4))],
            sql="SELECT order_id FROM orders",
            sinks=[es_sink(proxy.url, index, id_column="order_id", timeout="3s", max_retries=1)],
        )
        start_dagger(spec).process_available()
    finally:
        proxy.close()
    assert len(proxy.bodies) == 2
    assert proxy.bodies[0] == proxy.bodies[1]
    assert elasticsearch.ids(index) == ["o0", "o1", "o2", "o3"]  # sent twice, indexed once (ids)


def test_retries_stop_at_max_retries_with_the_servers_message(
    kafka, registry, make_dagger, start_dagger, elasticsearch
):
    proxy = FaultyProxy(elasticsearch.url, [Fault(503), Fault(503), Fault(429, reject_items=[0])])
    try:
        spec = make_dagger(
            streams=[orders_stream(kafka, orders_topic(kafka, registry, 3))],
            sql="SELECT order_id FROM orders",
            sinks=[es_sink(proxy.url, "busy", id_column="order_id", max_retries=2)],
        )
        running = start_dagger(spec)
        with pytest.raises(DaggerQueryError) as failure:
            running.process_available()
    finally:
        proxy.close()
    assert len(proxy.bodies) == 3
    assert str(failure.value).endswith(
        f"elasticsearch sink {proxy.url} index 'busy': batch 0: gave up after 2 retries: 1 of 3 "
        "document(s) rejected for now: busy/o0: 429 es_rejected_execution_exception: injected: queue full"
    )


def test_credentials_are_sent_and_kept_out_of_messages(
    kafka, registry, make_dagger, start_dagger, elasticsearch, tmp_path
):
    proxy = FaultyProxy(elasticsearch.url, [])
    try:
        host_with_user = proxy.url.replace("://", "://reader:s3cret@")
        for attempt, (sink_fields, authorization) in enumerate(
            [
                ({"api_key": "a2V5LWlkOmtleQ=="}, "ApiKey a2V5LWlkOmtleQ=="),
                (
                    {"username": "elastic", "password": "pw"},
                    "Basic " + base64.b64encode(b"elastic:pw").decode(),
                ),
                ({"hosts": [host_with_user]}, "Basic " + base64.b64encode(b"reader:s3cret").decode()),
            ]
        ):
            spec = make_dagger(
                checkpoint_location=str(tmp_path / f"checkpoint-{attempt}"),
                streams=[orders_stream(kafka, orders_topic(kafka, registry, 1))],
                sql="SELECT order_id FROM orders",
                sinks=[{**es_sink(proxy.url, "auth"), **sink_fields}],
            )
            running = start_dagger(spec)
            running.process_available()
            running.run.stop()
            assert proxy.headers[-1]["Authorization"] == authorization
            assert proxy.headers[-1]["Content-Type"] == "application/x-ndjson"
    finally:
        proxy.close()
    # the last dagger's host carries the credentials: messages name the host without them
    assert (
        ElasticsearchSinkWriter(spec.sinks[0], SinkContext(spec)).label
        == f"elasticsearch sink {proxy.url} index 'auth'"
    )


# --------------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"hosts": ["localhost:9200"]}, "sinks[0].hosts[0]: expected an http:// or https:// URL"),
        ({"hosts": []}, "sinks[0].hosts: List should have at least 1 item"),
        ({"index": None}, "sinks[0].index: required key is missing"),
        ({"idcolumn": "order_id"}, "sinks[0].idcolumn: unknown key"),
        ({"batch_size": 0}, "sinks[0].batch_size: Input should be greater than 0"),
    ],
)
def test_config_errors_name_the_key(descriptor_set, fields, problem):
    sink = {
        k: v for k, v in {**es_sink("http://127.0.0.1:9200", "orders"), **fields}.items() if v is not None
    }
    document = {
        "name": "es",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "streams": [kafka_stream("127.0.0.1:9092", "orders", ORDER, "created_at", topics=["t"])],
        "sql": "SELECT order_id FROM orders",
        "sinks": [sink],
    }
    with pytest.raises(DaggerConfigError) as error:
        parse_dagger(document, "es.yaml")
    assert f"\n  {problem}" in str(error.value)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (
            {"index": "orders-{created_at}"},
            "index 'orders-{created_at}': placeholder '{created_at}' needs a strftime format, "
            "such as {created_at:%Y.%m.%d}",
        ),
        ({"index": "orders-{created_at:%Y"}, "index 'orders-{created_at:%Y': unbalanced '{' or '}'"),
        ({"index": "Orders"}, "index 'Orders' is not a valid index name: it must be lowercase"),
        (
            {"index": "orders-{created_at:%b}"},
            "index 'orders-{created_at:%b}' renders as 'orders-Feb', which is not a valid index name: "
            "it must be lowercase",
        ),
        ({"index": "_orders"}, "is not a valid index name: it must not start with '_', '-' or '+'"),
        ({"username": "elastic"}, "username and password go together: set both or neither"),
        ({"api_key": "k", "username": "u", "password": "p"}, "set either api_key or username/password"),
    ],
)
def test_sink_errors_are_reported_before_start(kafka, spark, registry, make_dagger, fields, problem):
    spec = make_dagger(
        streams=[orders_stream(kafka, "unused")],
        sql="SELECT order_id, created_at FROM orders",
        sinks=[{**es_sink("http://127.0.0.1:9200", "orders"), **fields}],
    )
    with pytest.raises(DaggerBuildError) as error:
        build_dagger(spark, spec, registry)
    assert str(error.value).startswith("dagger test-dagger: sinks[0] (elasticsearch): ")
    assert problem in str(error.value)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (
            {"index": "orders-{booked_at:%Y}"},
            "index column 'booked_at' is not a result column; columns: order_id, amount, created_at",
        ),
        (
            {"index": "orders-{amount:%Y}"},
            "index column 'amount' is double, expected a date or timestamp",
        ),
        (
            {"index": "orders", "id_column": "id"},
            "id_column 'id' is not a result column; columns: order_id, amount, created_at",
        ),
    ],
)
def test_columns_are_checked_at_the_first_batch(
    kafka, registry, make_dagger, start_dagger, elasticsearch, fields, problem
):
    spec = make_dagger(
        streams=[orders_stream(kafka, orders_topic(kafka, registry, 2))],
        sql="SELECT order_id, amount, created_at FROM orders",
        sinks=[{**es_sink(elasticsearch.url, "orders"), **fields}],
    )
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError) as failure:
        running.process_available()
    assert str(failure.value).endswith(
        f"elasticsearch sink {elasticsearch.url} index {fields['index']!r}: {problem}"
    )


# --------------------------------------------------------------------------------------------------------
# Documents from Arrow batches (no server)
# --------------------------------------------------------------------------------------------------------


def test_arrow_values_become_json_documents():
    moment = datetime(2024, 5, 1, 12, 0, 3, 250, tzinfo=UTC)
    batch = pa.RecordBatch.from_pydict(
        {
            "ts": pa.array([moment, None], pa.timestamp("us", tz="UTC")),
            "ntz": pa.array([moment.replace(tzinfo=None), None], pa.timestamp("us")),
            "day": pa.array([date(2024, 5, 1), None], pa.date32()),
            "price": pa.array([Decimal("12.50"), Decimal("1E+3")], pa.decimal128(10, 2)),
            "raw": pa.array([b"\x00\xff", b""], pa.binary()),
            "ratio": pa.array([math.nan, -math.inf], pa.float64()),
            "elapsed": pa.array([timedelta(seconds=90.5), timedelta(days=1)], pa.duration("us")),
            "by_number": pa.array([[(1, moment)], []], pa.map_(pa.int32(), pa.timestamp("us", tz="UTC"))),
            "segments": pa.array(
                [[{"at": moment, "score": math.nan}], None],
                pa.list_(pa.struct([("at", pa.timestamp("us", tz="UTC")), ("score", pa.float32())])),
            ),
            "point": pa.array(
                [None, {"x": 1.5, "label": None}], pa.struct([("x", pa.float64()), ("label", pa.string())])
            ),
        }
    )
    assert documents(batch) == [
        {
            "ts": "2024-05-01T12:00:03.000250Z",
            "ntz": "2024-05-01T12:00:03.000250",
            "day": "2024-05-01",
            "price": "12.50",
            "raw": "AP8=",
            "ratio": None,
            "elapsed": 90.5,
            "by_number": {"1": "2024-05-01T12:00:03.000250Z"},
            "segments": [{"at": "2024-05-01T12:00:03.000250Z", "score": None}],
            "point": None,
        },
        {
            "ts": None,
            "ntz": None,
            "day": None,
            "price": "1000.00",
            "raw": "",
            "ratio": None,
            "elapsed": 86400,
            "by_number": {},
            "segments": None,
            "point": {"x": 1.5, "label": None},
        },
    ]


def test_index_templates_render_in_utc():
    template = IndexTemplate.parse("logs-{at:%Y.%m.%d}-{day:%Y}")
    assert template.columns == ["at", "day"]
    moment = datetime(2024, 5, 1, 23, 30, tzinfo=UTC).astimezone(UTC)
    local = datetime(2024, 5, 2, 1, 30).astimezone()  # any zone: rendered in UTC
    assert template.render({"at": moment, "day": date(2023, 1, 1)}) == "logs-2024.05.01-2023"
    assert template.render({"at": local, "day": date(2023, 1, 1)}) == (
        f"logs-{local.astimezone(UTC):%Y.%m.%d}-2023"
    )
    assert IndexTemplate.parse("plain").constant == "plain"

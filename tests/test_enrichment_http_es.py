"""HTTP and Elasticsearch enrichment post-processors: real broker, real Spark, a real HTTP server started
here (JSON per path, delays, failures, concurrency count) and the session's Elasticsearch 8.15 (7.17 in
`test_elasticsearch7.py`); exact rows out for rows in, and the requests the API saw."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from jobs.running.runner import DaggerBuildError, DaggerQueryError
from jobs.tools.broker import free_port
from tests.conftest import kafka_stream, message_class

LOG = [{"kind": "log", "max_rows_per_batch": 1000}]
SQL = "SELECT order_id, customer_id, amount, created_at FROM orders"


# --------------------------------------------------------------------------------------------------------
# A JSON API
# --------------------------------------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: str

    @property
    def segments(self) -> list[str]:
        return [unquote(part) for part in urlsplit(self.path).path.split("/") if part]

    @property
    def query(self) -> dict[str, str]:
        return {key: values[0] for key, values in parse_qs(urlsplit(self.path).query).items()}


class Api:
    """A JSON API on a loopback port: `respond(request)` gives (status, answer); each request first waits
    `delay_s(request)`; the first `fail_first` requests of each path are answered 503. Records every
    request and the most requests it had in flight at once."""

    def __init__(
        self,
        respond: Callable[[Request], tuple[int, Any]],
        delay_s: Callable[[Request], float] = lambda request: 0.0,
        fail_first: int = 0,
    ) -> None:
        self.requests: list[Request] = []
        self.in_flight = self.max_in_flight = 0
        self._failures: Counter[str] = Counter()
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                api._handle(self, respond, delay_s, fail_first)

            do_POST = do_PUT = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _handle(self, handler: BaseHTTPRequestHandler, respond, delay_s, fail_first: int) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length", 0))).decode()
        request = Request(
            handler.command, handler.path, {k.lower(): v for k, v in handler.headers.items()}, body
        )
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._failures[request.path] += 1
            failing = self._failures[request.path] <= fail_first
        try:
            time.sleep(delay_s(request))
            status, answer = (503, {"error": "injected"}) if failing else respond(request)
        finally:
            with self._lock:
                self.in_flight -= 1
        data = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def paths(self) -> Counter[str]:
        return Counter(request.path for request in self.requests)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def api_server() -> Any:
    servers: list[Api] = []

    def start(*args: Any, **kwargs: Any) -> Api:
        servers.append(Api(*args, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


# --------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------


def produce_orders(kafka, registry, rows: list[tuple[str, str, float]]) -> str:
    """A topic with `dagger.testing.Order`s (order_id, customer_id, amount), one second apart from
    2023-11-14 22:13:20 UTC."""
    topic = kafka.new_topic("enrich")
    order = message_class(registry, "dagger.testing.Order")
    payloads = []
    for index, (order_id, customer_id, amount) in enumerate(rows):
        message = order(order_id=order_id, customer_id=customer_id, amount=amount)
        message.created_at.FromSeconds(1_700_000_000 + index)
        payloads.append(message.SerializeToString())
    kafka.produce(topic, payloads)
    return topic


def orders(kafka, topic: str) -> dict:
    return kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )


def logged(running) -> list[dict]:
    """The rows the log sink printed, in the order printed."""
    return [json.loads(line.split(" | ", 1)[1]) for line in running.logged]


def by_order(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def run(make_dagger, start_dagger, kafka, topic: str, post: dict, sql: str = SQL):
    spec = make_dagger(streams=[orders(kafka, topic)], sql=sql, post_processors=post, sinks=LOG)
    running = start_dagger(spec)
    running.process_available()
    return running


def customers(request: Request) -> tuple[int, Any]:
    """`.../customers/<id>`: a customer document."""
    customer = request.segments[-1]
    return 200, {"data": {"name": f"name of {customer}", "tier": len(customer), "tags": ["a", customer]}}


# --------------------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------------------


def test_get_fills_the_url_and_headers_and_maps_the_answer_into_daggers_output(
    kafka, registry, make_dagger, start_dagger, api_server
):
    api = api_server(customers)
    topic = produce_orders(kafka, registry, [("o0", "c 1", 1.5), ("o1", "c/2", 2.0)])
    post = {
        "http": [
            {
                "endpoint": f"{api.url}/api",
                "verb": "GET",
                "request_pattern": "/customers/%s?at=%s&pct=100%%",
                "request_variables": ["customer_id", "created_at"],
                "headers": {"Authorization": "Bearer static"},
                "header_pattern": '{"X-Customer": "%s", "X-Amount": %s}',
                "header_variables": ["customer_id", "amount"],
                "output_mapping": {
                    "customer_name": "$.data.name",
                    "tier": {"path": "$.data.tier", "type": "INT"},
                    "tags": "$.data.tags",
                    "second_tag": "$.data.tags[1]",
                },
            }
        ],
        "internal": [{"output_field": "order_id", "type": "sql", "value": "order_id"}],
    }
    running = run(make_dagger, start_dagger, kafka, topic, post)

    rows = by_order(logged(running))
    assert rows == [
        {
            "customer_name": f"name of {customer}",
            "tier": len(customer),
            "tags": json.dumps(["a", customer]),
            "second_tag": customer,
            "order_id": order_id,
        }
        for order_id, customer in [("o0", "c 1"), ("o1", "c/2")]
    ]
    assert [list(row) for row in rows] == [["customer_name", "tier", "tags", "second_tag", "order_id"]] * 2
    requests = sorted(api.requests, key=lambda request: request.path)
    assert [(request.method, request.path) for request in requests] == [
        ("GET", "/api/customers/c%201?at=2023-11-14%2022%3A13%3A20&pct=100%"),
        ("GET", "/api/customers/c%2F2?at=2023-11-14%2022%3A13%3A21&pct=100%"),
    ]
    assert [
        (request.headers["authorization"], request.headers["x-customer"], request.headers["x-amount"])
        for request in requests
    ] == [("Bearer static", "c 1", "1.5"), ("Bearer static", "c/2", "2.0")]


def test_post_and_put_send_the_filled_pattern_as_the_body(
    kafka, registry, make_dagger, start_dagger, api_server
):
    def respond(request: Request) -> tuple[int, Any]:
        if request.method == "POST":
            sent = json.loads(request.body)
            return 200, {"score": sent["amount"] * 2, "echo": sent}
        return 201, {"stored": request.body, "type": request.headers.get("content-type")}

    api = api_server(respond)
    topic = produce_orders(kafka, registry, [("o0", "c1", 1.5), ("o1", "c2", 4.0)])
    post = {
        "http": [
            {
                "endpoint": f"{api.url}/orders/%s/score",
                "endpoint_variables": ["order_id"],
                "verb": "post",
                "request_pattern": '{"customer": "%s", "amount": %s, "at": "%s"}',
                "request_variables": ["customer_id", "amount", "created_at"],
                "output_mapping": {"score": {"path": "$.score", "type": "DOUBLE"}, "echo": "$.echo"},
            },
            {
                "endpoint": f"{api.url}/notes",
                "verb": "PUT",
                "request_pattern": "customer=%s",
                "request_variables": ["customer_id"],
                "output_mapping": {"stored": "$.stored", "content_type": "$.type"},
            },
        ]
    }
    running = run(make_dagger, start_dagger, kafka, topic, post)

    at = ["2023-11-14 22:13:20", "2023-11-14 22:13:21"]
    assert by_order(logged(running)) == [
        {
            "score": amount * 2,
            "echo": json.dumps({"customer": customer, "amount": amount, "at": at[index]}),
            "stored": f"customer={customer}",
            "content_type": None,
        }
        for index, (customer, amount) in enumerate([("c1", 1.5), ("c2", 4.0)])
    ]
    posts = sorted((r for r in api.requests if r.method == "POST"), key=lambda request: request.path)
    assert [(request.path, request.headers["content-type"], request.body) for request in posts] == [
        ("/orders/o0/score", "application/json", f'{{"customer": "c1", "amount": 1.5, "at": "{at[0]}"}}'),
        ("/orders/o1/score", "application/json", f'{{"customer": "c2", "amount": 4.0, "at": "{at[1]}"}}'),
    ]


def test_a_batch_keeps_its_order_with_at_most_capacity_calls_in_flight(
    kafka, registry, make_dagger, start_dagger, api_server
):
    count, capacity = 200, 8
    # Answers come back out of order: delays of 2 to 20 ms, varying with the customer.
    api = api_server(customers, delay_s=lambda request: 0.002 * (1 + int(request.segments[-1][1:]) % 10))
    topic = produce_orders(kafka, registry, [(f"o{index}", f"c{index}", 1.0) for index in range(count)])
    post = {
        "http": [
            {
                "endpoint": f"{api.url}/customers/%s",
                "endpoint_variables": ["customer_id"],
                "capacity": capacity,
                "output_mapping": {"name": "$.data.name"},
            }
        ],
        "internal": [{"output_field": "order_id", "type": "sql", "value": "order_id"}],
    }
    running = run(make_dagger, start_dagger, kafka, topic, post)

    assert logged(running) == [
        {"name": f"name of c{index}", "order_id": f"o{index}"} for index in range(count)
    ]
    assert len(api.requests) == count
    assert 1 < api.max_in_flight <= capacity


def test_failed_calls_are_retried_with_backoff_then_succeed(
    kafka, registry, make_dagger, start_dagger, api_server
):
    api = api_server(customers, fail_first=2)
    topic = produce_orders(kafka, registry, [("o0", "c1", 1.0), ("o1", "c2", 1.0)])
    post = {
        "http": [
            {
                "endpoint": f"{api.url}/customers/%s",
                "endpoint_variables": ["customer_id"],
                "max_retries": 2,
                "retry_backoff": "10ms",
                "fail_on_errors": True,
                "output_mapping": {"name": "$.data.name"},
            }
        ]
    }
    running = run(make_dagger, start_dagger, kafka, topic, post)

    assert by_order(logged(running)) == [{"name": "name of c1"}, {"name": "name of c2"}]
    assert api.paths() == {"/customers/c1": 3, "/customers/c2": 3}


def flaky(request: Request) -> tuple[int, Any]:
    """c-missing: 404; c-down: 503; anyone else: found."""
    customer = request.query.get("id", "")
    if customer == "c-missing":
        return 404, {"error": "no such customer"}
    if customer == "c-down":
        return 503, {"error": "down"}
    return 200, {"data": {"name": f"name of {customer}"}}


FLAKY_ROWS = [("o0", "c-ok", 1.0), ("o1", "c-missing", 1.0), ("o2", "c-down", 1.0), ("o3", "", 1.0)]


def test_without_fail_on_errors_failed_calls_timeouts_and_empty_variables_leave_nulls(
    kafka, registry, make_dagger, start_dagger, api_server
):
    api = api_server(flaky, delay_s=lambda request: 1.0 if request.query.get("id") == "c-slow" else 0.0)
    topic = produce_orders(kafka, registry, [*FLAKY_ROWS, ("o4", "c-eu", 1.0), ("o5", "c-slow", 1.0)])
    post = {
        "http": [
            {
                "endpoint": api.url,
                "request_pattern": "/customers?id=%s",
                "request_variables": ["customer_id"],
                "header_pattern": '{"X-Region": "%s"}',
                "header_variables": ["region"],
                "max_retries": 1,
                "retry_backoff": "10ms",
                "stream_timeout": "300ms",
                "output_mapping": {"name": "$.data.name"},
            }
        ],
        "internal": [{"output_field": "order_id", "type": "sql", "value": "order_id"}],
    }
    # o4's region is empty: Dagger skips a call whose header variables are all empty too.
    sql = "SELECT order_id, customer_id, IF(order_id = 'o4', '', 'eu') AS region FROM orders"
    running = run(make_dagger, start_dagger, kafka, topic, post, sql)

    assert by_order(logged(running)) == [
        {"name": "name of c-ok", "order_id": "o0"},
        {"name": None, "order_id": "o1"},
        {"name": None, "order_id": "o2"},
        {"name": None, "order_id": "o3"},
        {"name": None, "order_id": "o4"},
        {"name": None, "order_id": "o5"},
    ]
    # 404 is not retried, 503 and timeouts are (once); the empty rows make no call.
    assert api.paths() == {
        "/customers?id=c-ok": 1,
        "/customers?id=c-missing": 1,
        "/customers?id=c-down": 2,
        "/customers?id=c-slow": 2,
    }
    # The dagger's metrics count each row's outcome once, and the time of the calls made.
    metrics = running.run.metrics.registry
    processor = {"dagger": "test-dagger", "processor": "post_processors.http[0]"}
    outcomes = {
        outcome: metrics.get_sample_value("dagger_enrichment_calls_total", {**processor, "outcome": outcome})
        for outcome in ("success", "failure", "timeout", "no_answer", "empty_input")
    }
    assert outcomes == {"success": 1, "failure": 2, "timeout": 1, "no_answer": 0, "empty_input": 2}
    assert metrics.get_sample_value("dagger_enrichment_retries_total", processor) == 2
    assert metrics.get_sample_value("dagger_enrichment_call_seconds_count", processor) == 4
    # c-slow waited for two timeouts of 300 ms; the other three calls answered at once.
    assert metrics.get_sample_value("dagger_enrichment_call_seconds_bucket", {**processor, "le": "0.5"}) == 3
    assert metrics.get_sample_value("dagger_enrichment_timeout_seconds", processor) == 0.3


def test_with_fail_on_errors_a_failed_call_stops_the_dagger_naming_the_enrichment_and_variables(
    kafka, registry, make_dagger, start_dagger, api_server
):
    api = api_server(flaky)
    topic = produce_orders(kafka, registry, FLAKY_ROWS[:2])
    post = {
        "http": [
            {
                "endpoint": api.url,
                "request_pattern": "/customers?id=%s",
                "request_variables": ["customer_id"],
                "fail_on_errors": True,
                "output_mapping": {"name": "$.data.name"},
            }
        ]
    }
    spec = make_dagger(streams=[orders(kafka, topic)], sql=SQL, post_processors=post, sinks=LOG)
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError) as failure:
        running.process_available()
    message = str(failure.value)
    assert "post_processors.http[0]: call for ['c-missing'] failed" in message, message
    assert "answered HTTP 404" in message, message
    assert running.logged == []


def test_an_output_path_missing_from_the_answer_fails_the_batch_naming_field_and_path(
    kafka, registry, make_dagger, start_dagger, api_server
):
    api = api_server(customers)
    topic = produce_orders(kafka, registry, [("o0", "c1", 1.0)])
    post = {
        "http": [
            {
                "endpoint": f"{api.url}/customers/%s",
                "endpoint_variables": ["customer_id"],
                "output_mapping": {"name": "$.data.name", "nickname": "$.data.nickname"},
            }
        ]
    }
    spec = make_dagger(streams=[orders(kafka, topic)], sql=SQL, post_processors=post, sinks=LOG)
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError, match=r"post_processors\.http\[0\]: output field 'nickname': path "):
        running.process_available()
    assert "'$.data.nickname' not in the answer" in str(running.run.query.exception())


@pytest.mark.parametrize(
    ("enrichment", "message"),
    [
        (
            {"endpoint_variables": ["customer"]},
            r"post_processors\.http\[0\]: variable column\(s\) customer not in the result",
        ),
        (
            {"endpoint_variables": ["customer_id"], "output_mapping": {"name": "$.data[?"}},
            r"post_processors\.http\[0\]: output field 'name': invalid JSONPath '\$\.data\[\?'",
        ),
        (
            {
                "endpoint_variables": ["customer_id"],
                "header_pattern": "X-Id: %s",
                "header_variables": ["order_id"],
            },
            r"post_processors\.http\[0\]: header_pattern 'X-Id: %s' is not a JSON object template",
        ),
        (
            {"endpoint_variables": ["customer_id"], "output_mapping": {"order_id": "$.id"}},
            r"output field 'order_id' is already a column of the result",
        ),
    ],
)
def test_an_enrichment_that_cannot_apply_stops_the_dagger_before_start(
    kafka, make_dagger, spark, registry, enrichment, message
):
    from jobs.running.runner import build_dagger

    http = {"endpoint": "http://127.0.0.1:9/customers/%s", "output_mapping": {"name": "$.name"}, **enrichment}
    spec = make_dagger(
        streams=[orders(kafka, "unused")], sql=SQL, post_processors={"http": [http]}, sinks=LOG
    )
    with pytest.raises(DaggerBuildError, match=message):
        build_dagger(spark, spec, registry)


# --------------------------------------------------------------------------------------------------------
# Elasticsearch
# --------------------------------------------------------------------------------------------------------


@pytest.fixture
def customer_index(elasticsearch) -> str:
    """Customers that no refresh ever makes searchable: the lookups by id must see them all the same."""
    index = elasticsearch.unique_name("customers")
    elasticsearch.create_index(
        index,
        {"city": {"type": "keyword"}, "zone": {"properties": {"id": {"type": "long"}}}},
        refresh_interval="-1",
    )
    for customer, city, zone in [("c1", "Jakarta", 7), ("c 2", "Bandung", 9)]:
        elasticsearch.ok(
            "PUT", f"/{index}/_doc/{customer.replace(' ', '%20')}", {"city": city, "zone": {"id": zone}}
        )
    return index


def test_elasticsearch_looks_documents_up_by_id_with_failover_and_basic_auth(
    kafka, registry, make_dagger, start_dagger, api_server, elasticsearch, customer_index
):
    # The first host answers 503 (a node that is unavailable): requests go on to the next host.
    unavailable = api_server(lambda request: (503, {"error": "unavailable"}))
    topic = produce_orders(
        kafka, registry, [("o0", "c1", 1.0), ("o1", "c 2", 1.0), ("o2", "c-none", 1.0), ("o3", "", 1.0)]
    )
    post = {
        "elasticsearch": [
            {
                "hosts": [unavailable.url, elasticsearch.url],
                "username": "dagger",
                "password": "secret",
                "endpoint_pattern": f"/{customer_index}/_doc/%s",
                "endpoint_variables": ["customer_id"],
                "output_mapping": {
                    "city": "$._source.city",
                    "zone_id": {"path": "$._source.zone.id", "type": "BIGINT"},
                    "found": {"path": "$.found", "type": "BOOLEAN"},
                },
            }
        ],
        "internal": [{"output_field": "order_id", "type": "sql", "value": "order_id"}],
    }
    running = run(make_dagger, start_dagger, kafka, topic, post)

    assert by_order(logged(running)) == [
        {"city": "Bandung", "zone_id": 9, "found": True, "order_id": "o1"},
        {"city": "Jakarta", "zone_id": 7, "found": True, "order_id": "o0"},
        {"city": None, "zone_id": None, "found": None, "order_id": "o2"},  # 404: no such document
        {"city": None, "zone_id": None, "found": None, "order_id": "o3"},  # empty id: no call
    ]
    assert unavailable.requests, "round-robin should have tried the first host"
    assert {request.headers["authorization"] for request in unavailable.requests} == {
        "Basic " + base64.b64encode(b"dagger:secret").decode()
    }
    assert {request.path.rsplit("/", 1)[0] for request in unavailable.requests} == {f"/{customer_index}/_doc"}


def test_elasticsearch_with_fail_on_errors_fails_on_a_missing_document(
    kafka, registry, make_dagger, start_dagger, elasticsearch, customer_index
):
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connection refused, next host
    topic = produce_orders(kafka, registry, [("o0", "c1", 1.0), ("o1", "c-none", 1.0)])
    post = {
        "elasticsearch": [
            {
                "hosts": [dead, elasticsearch.url],
                "endpoint_pattern": f"/{customer_index}/_doc/%s",
                "endpoint_variables": ["customer_id"],
                "fail_on_errors": True,
                "output_mapping": {"city": "$._source.city"},
            }
        ]
    }
    spec = make_dagger(streams=[orders(kafka, topic)], sql=SQL, post_processors=post, sinks=LOG)
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError) as failure:
        running.process_available()
    message = str(failure.value)
    assert "post_processors.elasticsearch[0]: call for ['c-none'] failed" in message, message
    assert f"/{customer_index}/_doc/c-none answered HTTP 404" in message, message

"""Postgres and gRPC enrichment post-processors, end to end: real broker, real Spark, the local PostgreSQL
server and a gRPC server started here; exact enriched rows out for rows in."""

from __future__ import annotations

import collections
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from psycopg import sql

from jobs.running.runner import DaggerBuildError, DaggerQueryError
from jobs.tools.broker import free_port
from tests.conftest import kafka_stream, message_class
from tests.servers.postgres import PostgresServer

# --------------------------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------------------------


@pytest.fixture
def pg(postgres: PostgresServer) -> Iterator[psycopg.Connection]:
    with postgres.connect() as connection:
        yield connection


@pytest.fixture
def pg_table(pg: psycopg.Connection) -> Iterator[Callable[[str, list[tuple]], str]]:
    """Creates tables with unique names (`columns` DDL, then rows) and drops them after the test."""
    created: list[str] = []

    def create(columns: str, rows: list[tuple]) -> str:
        name = f"enrich_{uuid.uuid4().hex[:10]}"
        created.append(name)
        pg.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(name), sql.SQL(columns)))
        if rows:
            placeholders = sql.SQL(", ").join(sql.Placeholder() * len(rows[0]))
            with pg.cursor() as cursor:
                cursor.executemany(
                    sql.SQL("INSERT INTO {} VALUES ({})").format(sql.Identifier(name), placeholders), rows
                )
        return name

    yield create
    for name in created:
        pg.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))


def pg_source(
    postgres: PostgresServer, query: str, variables: list[str], outputs: dict, **fields: Any
) -> dict:
    return {
        "host": postgres.host,
        "port": postgres.port,
        "user": postgres.user,
        "password": postgres.password,
        "database": postgres.database,
        "query_pattern": query,
        "query_variables": variables,
        "output_mapping": outputs,
        "retry_backoff": "50ms",
        "idle_timeout": "10s",  # the workers' pools let their connections go soon after the test
        **fields,
    }


# --------------------------------------------------------------------------------------------------------
# Streams and daggers
# --------------------------------------------------------------------------------------------------------

LOG = [{"kind": "log", "max_rows_per_batch": 1000}]
ORDER_ID = {"output_field": "order_id", "type": "sql", "value": "order_id"}


def produce_orders(kafka, registry, orders: list[tuple[str, str, float]]) -> str:
    """A new topic with `dagger.testing.Order`s (order_id, customer_id, amount)."""
    order = message_class(registry, "dagger.testing.Order")
    payloads = []
    for index, (order_id, customer_id, amount) in enumerate(orders):
        message = order(order_id=order_id, customer_id=customer_id, amount=amount)
        message.created_at.FromSeconds(1_700_000_000 + index)
        payloads.append(message.SerializeToString())
    topic = kafka.new_topic("enrich")
    kafka.produce(topic, payloads)
    return topic


def order_dagger(make_dagger, kafka, topic: str, post: dict, tmp_path: Path, name: str = "test-dagger"):
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )
    return make_dagger(
        name=name,
        checkpoint_location=str(tmp_path / f"checkpoint-{name}"),
        streams=[stream],
        sql="SELECT order_id, customer_id, amount FROM orders",
        post_processors=post,
        sinks=LOG,
    )


def logged(running) -> list[dict]:
    rows = [json.loads(line.split(" | ", 1)[1]) for line in running.logged]
    return sorted(rows, key=lambda row: row["order_id"])


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------------------------------------
# Postgres enrichment
# --------------------------------------------------------------------------------------------------------

CUSTOMERS = (
    "customer_id text PRIMARY KEY, name text, tier int, balance numeric(10,2), since timestamptz, "
    "tags text[], profile jsonb, min_amount double precision"
)


def customers(pg_table) -> str:
    return pg_table(
        CUSTOMERS,
        [
            ("c1", "Ada", 1, "12.50", "2024-01-02 03:04:05+00", ["vip", "early"], '{"city": "Oslo"}', 1.0),
            ("c2", "Bob", 2, "0.10", "2023-06-30 23:59:59.5+02", [], "{}", 10.0),
        ],
    )


def test_postgres_enrichment_maps_result_columns_to_typed_output_fields(
    kafka, registry, make_dagger, start_dagger, postgres, pg_table, tmp_path
):
    table = customers(pg_table)
    topic = produce_orders(
        kafka, registry, [("o1", "c1", 5.0), ("o2", "c2", 7.0), ("o3", "c9", 1.0), ("o4", "", 1.0)]
    )
    post = {
        "postgres": [
            pg_source(
                postgres,
                f"SELECT name, tier, balance, since, tags, profile FROM {table} WHERE customer_id = %s",
                ["customer_id"],
                {
                    "customer_name": "name",
                    "tier": {"path": "tier", "type": "INT"},
                    "balance": {"path": "balance", "type": "DOUBLE"},
                    "since": "since",  # timestamptz as ISO 8601 text, in UTC
                    "tags": {"path": "tags", "type": "ARRAY<STRING>"},
                    "profile": "profile",
                },
                fail_on_errors=True,
            ),
            # Dagger's style: the value spliced into a quoted literal; bound as text here.
            pg_source(
                postgres,
                f"SELECT name || '!' AS shout, balance FROM {table} "
                "WHERE customer_id = '%s' AND min_amount <= %s AND name NOT LIKE '%%z%%'",
                ["customer_id", "amount"],
                {"shout": "shout", "balance_text": "balance"},
                fail_on_errors=True,
            ),
        ],
        "internal": [ORDER_ID],
    }
    running = start_dagger(order_dagger(make_dagger, kafka, topic, post, tmp_path))
    running.process_available()
    nulls = dict.fromkeys(["customer_name", "tier", "balance", "since", "tags", "profile", "shout"], None)
    assert logged(running) == [
        {
            "order_id": "o1",
            "customer_name": "Ada",
            "tier": 1,
            "balance": 12.5,
            "since": "2024-01-02T03:04:05+00:00",
            "tags": ["vip", "early"],
            "profile": '{"city":"Oslo"}',
            "shout": "Ada!",
            "balance_text": "12.50",
        },
        # min_amount 10 > 7: the second query finds no row
        {
            "order_id": "o2",
            "customer_name": "Bob",
            "tier": 2,
            "balance": 0.1,
            "since": "2023-06-30T21:59:59.500000+00:00",
            "tags": [],
            "profile": "{}",
            "shout": None,
            "balance_text": None,
        },
        {"order_id": "o3", **nulls, "balance_text": None},  # no such customer
        {"order_id": "o4", **nulls, "balance_text": None},  # empty variables: no query
    ]


def test_postgres_variables_are_bound_never_spliced_into_the_sql(
    kafka, registry, make_dagger, start_dagger, pg, postgres, pg_table, tmp_path
):
    table = customers(pg_table)
    drop = f"x'; DROP TABLE {table}; --"
    match_all = "' OR '1'='1"
    topic = produce_orders(
        kafka, registry, [("o1", drop, 1.0), ("o2", match_all, 1.0), ("o3", "c1", 1.0), ("o4", "c1", 1.0)]
    )
    post = {
        "postgres": [
            pg_source(
                postgres,
                f"SELECT name FROM {table} WHERE customer_id = %s",
                ["customer_id"],
                {"bare": "name"},
                fail_on_errors=True,
            ),
            pg_source(
                postgres,
                f"SELECT name FROM {table} WHERE customer_id = '%s'",
                ["customer_id"],
                {"quoted": "name"},
                fail_on_errors=True,
            ),
        ],
        "internal": [ORDER_ID],
    }
    running = start_dagger(order_dagger(make_dagger, kafka, topic, post, tmp_path))
    running.process_available()
    assert logged(running) == [
        {"bare": None, "quoted": None, "order_id": "o1"},
        {"bare": None, "quoted": None, "order_id": "o2"},  # spliced, it would have matched every row
        {"bare": "Ada", "quoted": "Ada", "order_id": "o3"},
        {"bare": "Ada", "quoted": "Ada", "order_id": "o4"},
    ]
    assert pg.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone() == (True,)
    assert pg.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone() == (2,)


def test_postgres_makes_one_query_per_row_with_non_empty_variables(
    kafka, registry, make_dagger, start_dagger, pg, postgres, pg_table, tmp_path
):
    """Each query goes through a function that records its argument: the server's own count of calls."""
    table = customers(pg_table)
    calls = pg_table("customer_id text", [])
    function = f"{calls}_lookup"
    pg.execute(
        sql.SQL(
            "CREATE FUNCTION {function}(wanted text) RETURNS TABLE (name text) LANGUAGE sql AS $$ "
            "INSERT INTO {calls} VALUES (wanted); "
            "SELECT c.name FROM {table} c WHERE c.customer_id = wanted $$"
        ).format(function=sql.Identifier(function), calls=sql.Identifier(calls), table=sql.Identifier(table))
    )
    orders = [("o1", "c1", 1.0), ("o2", "", 1.0), ("o3", "c2", 1.0), ("o4", "", 1.0), ("o5", "c1", 1.0)]
    topic = produce_orders(kafka, registry, orders)
    source = pg_source(postgres, f"SELECT name FROM {function}(%s)", ["customer_id"], {"name": "name"})
    try:
        running = start_dagger(order_dagger(make_dagger, kafka, topic, {"postgres": [source]}, tmp_path))
        running.process_available()
        assert sorted(json.loads(line.split(" | ", 1)[1])["name"] or "" for line in running.logged) == [
            "", "", "Ada", "Ada", "Bob",
        ]  # fmt: skip
        made = pg.execute(sql.SQL("SELECT customer_id FROM {}").format(sql.Identifier(calls))).fetchall()
        assert sorted(row[0] for row in made) == ["c1", "c1", "c2"]  # the two empty ids made no query
    finally:
        pg.execute(sql.SQL("DROP FUNCTION IF EXISTS {}").format(sql.Identifier(function)))


def test_postgres_more_than_one_row_is_invalid_configuration(
    kafka, registry, make_dagger, start_dagger, postgres, pg_table, tmp_path
):
    table = pg_table("customer_id text, name text", [("dup", "A"), ("dup", "B"), ("one", "C")])
    topic = produce_orders(kafka, registry, [("o1", "dup", 1.0), ("o2", "one", 1.0)])

    def post(fail_on_errors: bool) -> dict:
        query = f"SELECT name FROM {table} WHERE customer_id = %s"
        source = pg_source(postgres, query, ["customer_id"], {"name": "name"}, fail_on_errors=fail_on_errors)
        return {"postgres": [source], "internal": [ORDER_ID]}

    lenient = start_dagger(order_dagger(make_dagger, kafka, topic, post(False), tmp_path, unique_name("pg")))
    lenient.process_available()
    assert logged(lenient) == [{"name": None, "order_id": "o1"}, {"name": "C", "order_id": "o2"}]

    strict = start_dagger(order_dagger(make_dagger, kafka, topic, post(True), tmp_path, unique_name("pg")))
    with pytest.raises(
        DaggerQueryError,
        match=r"post_processors\.postgres\[0\]: call for \['dup'\] failed: invalid_configuration: "
        r"the query returned 2 rows for one input row",
    ):
        strict.process_available()


def test_postgres_connections_per_worker_are_bounded_by_capacity(
    kafka, registry, make_dagger, start_dagger, pg, postgres, pg_table, tmp_path
):
    table = customers(pg_table)
    topic = produce_orders(kafka, registry, [(f"o{index}", "c1", 1.0) for index in range(8)])
    # pg_sleep runs first, so `finished` is read when the 0.2 s query is done
    query = (
        "SELECT pg_backend_pid() AS pid, extract(epoch FROM clock_timestamp())::float8 AS finished "
        f"FROM {table}, pg_sleep(0.2) WHERE customer_id = %s"
    )
    outputs = {"pid": {"path": "pid", "type": "BIGINT"}, "finished": {"path": "finished", "type": "DOUBLE"}}
    source = pg_source(postgres, query, ["customer_id"], outputs, capacity=2)
    name = unique_name("pg-capacity")
    spec = order_dagger(
        make_dagger, kafka, topic, {"postgres": [source], "internal": [ORDER_ID]}, tmp_path, name
    )
    running = start_dagger(spec)
    running.process_available()
    rows = logged(running)
    assert [row["order_id"] for row in rows] == [f"o{index}" for index in range(8)]
    # One Kafka partition, one task, one worker: its pool ran the 8 queries on exactly 2 connections,
    # 2 at a time.
    assert len({row["pid"] for row in rows}) == 2
    intervals = [(row["finished"] - 0.2, row["finished"]) for row in rows]
    running_at = [sum(start <= moment < stop for start, stop in intervals) for moment, _ in intervals]
    assert max(running_at) == 2
    application = f"dagger {name} post_processors.postgres[0]"
    (connections,) = pg.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [application]
    ).fetchone()
    assert connections <= 2


# --------------------------------------------------------------------------------------------------------
# gRPC enrichment
# --------------------------------------------------------------------------------------------------------

SERVICE = "dagger.testing.EnrichmentService"


class ProfileService:
    """`dagger.testing.EnrichmentService/Lookup` over a few known customers; counts every attempt."""

    def __init__(self, registry) -> None:
        self.request_class = message_class(registry, "dagger.testing.CustomerLookup")
        self.response_class = message_class(registry, "dagger.testing.CustomerProfile")
        self.attempts: collections.Counter[str] = collections.Counter()
        self.fail: dict[str, tuple[grpc.StatusCode, int]] = {}
        """customer id -> (status, how many attempts fail; -1: all)."""
        self.lock = threading.Lock()

    def lookup(self, request, context: grpc.ServicerContext):
        with self.lock:
            self.attempts[request.customer_id] += 1
            attempt = self.attempts[request.customer_id]
        status, failing = self.fail.get(request.customer_id, (None, 0))
        if status is not None and (failing < 0 or attempt <= failing):
            context.abort(status, f"attempt {attempt} refused")
        caller = dict(context.invocation_metadata()).get("x-caller", "")
        profile = self.response_class(amount_seen=request.amount, caller=caller, colour_seen=request.colour)
        if request.customer_id == "c1":
            profile.name, profile.tier, profile.visits, profile.active = "Ada", 2, 12, True
            profile.address.city = "Oslo"
            profile.address.location.x, profile.address.location.y = 59.9, 10.75
            profile.address.location.label = "hq"
            profile.tags.extend(["vip", "early"])
        elif request.customer_id in ("c2", 'q"uo\\te'):
            profile.name = "Bob" if request.customer_id == "c2" else "Quoted"
            profile.address.location.SetInParent()  # present, every field at its default
        else:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no customer {request.customer_id!r}")
        return profile


@pytest.fixture
def grpc_server(registry) -> Iterator[tuple[str, ProfileService]]:
    service = ProfileService(registry)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handler = grpc.unary_unary_rpc_method_handler(
        service.lookup,
        request_deserializer=service.request_class.FromString,
        response_serializer=service.response_class.SerializeToString,
    )
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Lookup": handler})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", service
    server.stop(grace=None)


def grpc_source(endpoint: str, outputs: dict, **fields: Any) -> dict:
    return {
        "endpoint": endpoint,
        "method": f"{SERVICE}/Lookup",
        "request_message": "dagger.testing.CustomerLookup",
        "response_message": "dagger.testing.CustomerProfile",
        "request_pattern": "{'customer_id': '%s', 'amount': %s, 'colour': 'RED'}",
        "request_variables": ["customer_id", "amount"],
        "output_mapping": outputs,
        "retry_backoff": "50ms",
        **fields,
    }


def test_grpc_enrichment_maps_the_response_by_json_path(
    kafka, registry, make_dagger, start_dagger, grpc_server, descriptor_set, tmp_path
):
    endpoint, service = grpc_server
    topic = produce_orders(
        kafka, registry, [("o1", "c1", 5.0), ("o2", "c2", 7.5), ("o3", 'q"uo\\te', 1.0), ("o4", "c404", 2.0)]
    )
    outputs = {
        "name": "$.name",
        "tier": "$.tier",
        "city": "$.address.city",
        "x": {"path": "$.address.location.x", "type": "DOUBLE"},
        "location": "$.address.location",
        "tags": {"path": "$.tags", "type": "ARRAY<STRING>"},
        "visits": {"path": "$.visits", "type": "BIGINT"},
        "active": {"path": "$.active", "type": "BOOLEAN"},
        "amount_seen": {"path": "$.amount_seen", "type": "DOUBLE"},
        "caller": "$.caller",
        "colour_seen": "$.colour_seen",
    }
    source = grpc_source(
        endpoint,
        outputs,
        headers={"X-Caller": "dagger-test"},
        descriptor_sets=[str(descriptor_set)],
    )
    post = {"grpc": [source], "internal": [ORDER_ID]}
    running = start_dagger(order_dagger(make_dagger, kafka, topic, post, tmp_path))
    running.process_available()
    defaults = {
        "tier": "TIER_UNKNOWN",
        "city": "",
        "x": 0.0,
        "location": json.dumps({"x": 0.0, "y": 0.0, "label": ""}),
        "tags": [],
        "visits": 0,
        "active": False,
        "caller": "dagger-test",
        "colour_seen": "RED",
    }
    assert logged(running) == [
        {
            "name": "Ada",
            "tier": "GOLD",
            "city": "Oslo",
            "x": 59.9,
            "location": json.dumps({"x": 59.9, "y": 10.75, "label": "hq"}),
            "tags": ["vip", "early"],
            "visits": 12,
            "active": True,
            "amount_seen": 5.0,
            "caller": "dagger-test",
            "colour_seen": "RED",
            "order_id": "o1",
        },
        {**defaults, "name": "Bob", "amount_seen": 7.5, "order_id": "o2"},
        {**defaults, "name": "Quoted", "amount_seen": 1.0, "order_id": "o3"},  # the quote did not break out
        {**dict.fromkeys(outputs, None), "order_id": "o4"},  # NOT_FOUND: not retried, null fields
    ]
    assert service.attempts == {"c1": 1, "c2": 1, 'q"uo\\te': 1, "c404": 1}


def test_grpc_unavailable_is_retried_then_gives_nulls(
    kafka, registry, make_dagger, start_dagger, grpc_server, tmp_path
):
    endpoint, service = grpc_server
    service.fail = {"c1": (grpc.StatusCode.UNAVAILABLE, -1), "c2": (grpc.StatusCode.UNAVAILABLE, 1)}
    topic = produce_orders(kafka, registry, [("o1", "c1", 5.0), ("o2", "c2", 7.5)])
    source = grpc_source(endpoint, {"name": "$.name"}, max_retries=2)
    running = start_dagger(
        order_dagger(make_dagger, kafka, topic, {"grpc": [source], "internal": [ORDER_ID]}, tmp_path)
    )
    running.process_available()
    assert logged(running) == [{"name": None, "order_id": "o1"}, {"name": "Bob", "order_id": "o2"}]
    assert service.attempts == {"c1": 3, "c2": 2}  # c1: 1 + 2 retries; c2: failed once, then answered


def test_grpc_unreachable_server_fails_the_batch_with_fail_on_errors(
    kafka, registry, make_dagger, start_dagger, tmp_path
):
    topic = produce_orders(kafka, registry, [("o1", "c1", 5.0)])
    source = grpc_source(
        f"127.0.0.1:{free_port()}", {"name": "$.name"}, fail_on_errors=True, connect_timeout="1s"
    )
    running = start_dagger(
        order_dagger(make_dagger, kafka, topic, {"grpc": [source], "internal": [ORDER_ID]}, tmp_path)
    )
    with pytest.raises(
        DaggerQueryError,
        match=r"post_processors\.grpc\[0\]: call for \['c1', 5\.0\] failed: "
        rf"/{SERVICE}/Lookup at 127\.0\.0\.1:\d+: UNAVAILABLE",
    ):
        running.process_available()


# --------------------------------------------------------------------------------------------------------
# Configuration errors, before the dagger starts
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "changes", "message"),
    [
        (
            "postgres",
            {"query_pattern": "SELECT name FROM t WHERE customer_id LIKE 'a%s'"},
            r"post_processors\.postgres\[0\]: query_pattern: %s inside a string literal",
        ),
        (
            "postgres",
            {"query_pattern": "SELECT name FROM t WHERE customer_id = %s AND name LIKE 'a%'"},
            r"post_processors\.postgres\[0\]: query_pattern: a lone '%'",
        ),
        (
            "postgres",
            {"query_variables": ["nope"]},
            r"post_processors\.postgres\[0\]: variable column\(s\) nope not in the result",
        ),
        (
            "grpc",
            {"request_message": "dagger.testing.Nope"},
            r"post_processors\.grpc\[0\]: request_message: protobuf message 'dagger\.testing\.Nope'",
        ),
        (
            "grpc",
            {"request_pattern": "{'customer_id': '%s', 'amount': %s"},
            r"post_processors\.grpc\[0\]: request_pattern .* is not a JSON template",
        ),
        (
            "grpc",
            {"output_mapping": {"x": {"path": "$.name", "type": "NOPE"}}},
            r"post_processors\.grpc\[0\]: output field 'x': unknown type 'NOPE'",
        ),
    ],
)
def test_an_enrichment_that_cannot_apply_stops_the_dagger_before_start(
    kafka, registry, make_dagger, spark, tmp_path, kind, changes, message
):
    from jobs.running.runner import build_dagger

    if kind == "postgres":
        nowhere = PostgresServer("127.0.0.1", 1, "nobody", "unused", "none")  # never contacted
        query = "SELECT name FROM t WHERE customer_id = %s"
        source = pg_source(nowhere, query, ["customer_id"], {"n": "name"})
    else:
        source = grpc_source("127.0.0.1:1", {"name": "$.name"})
    spec = order_dagger(make_dagger, kafka, "unused", {kind: [{**source, **changes}]}, tmp_path)
    with pytest.raises(DaggerBuildError, match=message):
        build_dagger(spark, spec, registry)

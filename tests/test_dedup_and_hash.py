"""The `deduplicate` and `hash` transformers (Dagger's DeDuplicationTransformer and HashTransformer) on the
real broker and local Spark: exact rows out for rows in; hashes checked against values computed here."""

from __future__ import annotations

import hashlib
import json
import struct
import time
from datetime import UTC, datetime

import pytest

from jobs.processors.hashing import sha256_int, sha256_long, sha256_string
from jobs.running.runner import DaggerBuildError, build_dagger
from tests.conftest import kafka_sink, kafka_stream, message_class
from tests.test_kafka_pipeline import ALL_TYPE_COLUMNS, ALL_TYPES, all_types_message

START = 1_700_000_000  # order_payloads / orders_with: o<i> is created at START + i seconds
LOG = [{"kind": "log", "max_rows_per_batch": 1000}]


def orders(kafka, topic: str, **fields) -> dict:
    return kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic], **fields
    )


def orders_with(registry, customers: list[tuple[int, str]]) -> list[bytes]:
    """Orders o<i> of customer c, created at START + i seconds, with amount i."""
    order = message_class(registry, "dagger.testing.Order")
    payloads = []
    for index, customer in customers:
        message = order(order_id=f"o{index}", customer_id=customer, amount=float(index))
        message.created_at.FromSeconds(START + index)
        payloads.append(message.SerializeToString())
    return payloads


def rows(running, since: int = 0) -> list[dict]:
    """The rows the log sink printed (from the `since`-th on), in the order printed."""
    return [json.loads(line.split(" | ", 1)[1]) for line in running.logged[since:]]


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def dedup(key_column: str, ttl: str, clock: str = "processing_time") -> dict:
    return {"kind": "deduplicate", "key_column": key_column, "ttl": ttl, "clock": clock}


def batch_times_ms(running) -> list[int]:
    """Start time of each micro-batch that read rows (the time the state TTL is measured in)."""
    return [
        int(datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp() * 1000)
        for progress in running.run.query.recentProgress
        if progress["numInputRows"]
    ]


# --------------------------------------------------------------------------------------------------------
# deduplicate
# --------------------------------------------------------------------------------------------------------


def test_deduplicate_lets_the_first_row_of_a_key_through_within_and_across_batches(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("dedup")
    spec = make_dagger(
        streams=[orders(kafka, topic)],
        sql="SELECT order_id, customer_id, amount FROM orders",
        post_processors={"transformers": [dedup("customer_id", "1h")]},
        sinks=LOG,
    )
    kafka.produce(topic, orders_with(registry, [(0, "c1"), (1, "c2"), (2, "c1"), (3, "c1")]))
    running = start_dagger(spec)
    running.process_available()
    first = len(running.logged)
    assert sorted(rows(running), key=lambda row: row["order_id"]) == [
        {"order_id": "o0", "customer_id": "c1", "amount": 0.0},
        {"order_id": "o1", "customer_id": "c2", "amount": 1.0},
    ]
    kafka.produce(topic, orders_with(registry, [(4, "c2"), (5, "c3"), (6, "c3"), (7, "c1")]))
    running.process_available()
    assert rows(running, first) == [{"order_id": "o5", "customer_id": "c3", "amount": 5.0}]


def test_deduplicate_lets_a_key_through_again_once_the_ttl_has_passed_since_its_first_row(
    kafka, registry, make_dagger, start_dagger
):
    """As Dagger's state TTL (OnCreateAndWrite, processing time): duplicates do not extend it."""
    ttl_ms = 15_000  # two batches on a machine busy with the suite's other process can take 5 s and more
    topic = kafka.new_topic("dedup-ttl")
    spec = make_dagger(
        streams=[orders(kafka, topic, pre_processors=[dedup("customer_id", "15s")])],
        sql="SELECT order_id FROM orders",
        sinks=LOG,
    )
    running = start_dagger(spec)
    for customers in ([(0, "warm-up")], [(1, "c1")], [(2, "c1")]):  # the first batch is a slow one
        kafka.produce(topic, orders_with(registry, customers))
        running.process_available()
    _, first, duplicate = batch_times_ms(running)
    time.sleep(max(0.0, (first + ttl_ms + 300) / 1000 - time.time()))
    kafka.produce(topic, orders_with(registry, [(3, "c1"), (4, "c1")]))
    running.process_available()
    *_, again = batch_times_ms(running)
    # The decisions rest on these batch times (asserted, so that a very slow machine fails clearly).
    assert duplicate - first < ttl_ms <= again - first
    assert again - duplicate < ttl_ms, "the duplicate must be within the TTL of the row let through again"
    assert rows(running) == [{"order_id": "o0"}, {"order_id": "o1"}, {"order_id": "o3"}]


def test_deduplicate_forgets_keys_once_their_ttl_is_over_and_the_watermark_moves_on(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("dedup-cleanup")
    spec = make_dagger(
        streams=[orders(kafka, topic)],
        sql="SELECT order_id, customer_id FROM orders",
        post_processors={"transformers": [dedup("customer_id", "1s")]},
        sinks=LOG,
    )
    kafka.produce(topic, orders_with(registry, [(0, "a"), (1, "b"), (2, "c")]))
    running = start_dagger(spec)
    running.process_available()
    (first,) = batch_times_ms(running)
    time.sleep(max(0.0, (first + 1200) / 1000 - time.time()))
    kafka.produce(topic, orders_with(registry, [(100, "d")]))  # moves the watermark on by 98 s
    running.process_available()
    running.process_available()
    assert sorted(row["order_id"] for row in rows(running)) == ["o0", "o1", "o100", "o2"]
    removed = sum(
        progress["stateOperators"][0]["numRowsRemoved"] for progress in running.run.query.recentProgress
    )
    assert removed >= 3  # a, b and c are gone (d too, if a later batch ran a second after its own)
    # RocksDB does not count its rows by default (jobs/engine/spark.py), so no row count is exported.
    exported = {sample.name for family in running.run.metrics.registry.collect() for sample in family.samples}
    assert "dagger_state_memory_bytes" in exported and "dagger_state_rows" not in exported


def test_deduplicate_remembers_the_keys_it_has_seen_across_a_restart(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("dedup-restart")
    spec = make_dagger(
        streams=[orders(kafka, topic)],
        sql="SELECT order_id, customer_id FROM orders",
        post_processors={"transformers": [dedup("customer_id", "1h")]},
        sinks=LOG,
    )
    kafka.produce(topic, orders_with(registry, [(0, "c1"), (1, "c2")]))
    running = start_dagger(spec)
    running.process_available()
    assert sorted(row["order_id"] for row in rows(running)) == ["o0", "o1"]
    running.run.stop()

    kafka.produce(topic, orders_with(registry, [(2, "c1"), (3, "c3"), (4, "c2")]))
    restarted = start_dagger(spec)  # the same checkpoint
    restarted.process_available()
    assert rows(restarted) == [{"order_id": "o3", "customer_id": "c3"}]


def test_deduplicate_in_event_time_remembers_a_key_until_the_watermark_passes_its_first_row_plus_ttl(
    kafka, registry, make_dagger, start_dagger
):
    """ttl 60 s, watermark delay 10 s: a key's duplicates are dropped until the watermark (latest event
    time - 10 s) passes its first row's event time + 60 s, across a restart."""
    topic = kafka.new_topic("dedup-event-time")
    spec = make_dagger(
        streams=[orders(kafka, topic, pre_processors=[dedup("customer_id", "60s", "event_time")])],
        sql="SELECT order_id FROM orders",
        watermark_delay="10s",
        sinks=LOG,
    )
    running = start_dagger(spec)
    steps = [
        [(0, "a"), (1, "b"), (2, "a")],  # o2 repeats a within the batch
        [(30, "a"), (40, "c")],  # watermark -> START+30: a (first at START+0) is still remembered
        [(45, "a")],
        [(200, "d")],  # watermark -> START+190: a and b are forgotten (START+0/1 + 60 s)
    ]
    for customers in steps:
        kafka.produce(topic, orders_with(registry, customers))
        running.process_available()
    running.run.stop()

    kafka.produce(topic, orders_with(registry, [(195, "a"), (196, "d"), (197, "b")]))
    restarted = start_dagger(spec)  # same checkpoint: d (first at START+200) is still remembered
    restarted.process_available()
    passed = [row["order_id"] for row in rows(running) + rows(restarted)]
    assert sorted(passed) == sorted(["o0", "o1", "o40", "o200", "o195", "o197"])


@pytest.mark.parametrize("clock", ["processing_time", "event_time"])
def test_pre_processors_keep_the_watermark_for_windows_in_the_sql(
    kafka, registry, make_dagger, start_dagger, clock
):
    """deduplicate and hash as pre-processors: the windows after them still close on the watermark."""
    topic = kafka.new_topic("dedup-window")
    # o0..o5 at START+0..5 s, customers c0/c1; o1 and o4 sent twice (the second copy later, another amount).
    payloads = orders_with(registry, [(index, f"c{index % 2}") for index in range(6)])
    kafka.produce(topic, [*payloads, payloads[1], payloads[4]])
    pre = [dedup("order_id", "1h", clock), {"kind": "hash", "columns": ["customer_id"]}]
    spec = make_dagger(
        streams=[orders(kafka, topic, pre_processors=pre)],
        sql="""
            SELECT window.start AS window_start, customer_id, count(*) AS orders
            FROM orders GROUP BY window(rowtime, '2 seconds'), customer_id
        """,
        sinks=LOG,
    )
    running = start_dagger(spec)
    running.process_available()
    kafka.produce(topic, orders_with(registry, [(60, "late-marker")]))  # moves the watermark past the windows
    running.process_available()
    running.process_available()
    expected = [
        {"window_start": iso(START + start), "customer_id": hashlib.sha256(customer).hexdigest(), "orders": 1}
        for start in (0, 2, 4)
        for customer in (b"c0", b"c1")
    ]
    key = lambda row: (row["window_start"], row["customer_id"])  # noqa: E731
    assert sorted(rows(running), key=key) == sorted(expected, key=key)


def test_deduplicate_keeps_every_column_and_type_as_it_was(kafka, registry, make_dagger, start_dagger):
    source, sink = kafka.new_topic("dedup-types"), kafka.new_topic("dedup-types-out")
    sent = [all_types_message(registry, index) for index in range(8)]
    kafka.produce(source, [message.SerializeToString() for message in sent + sent[2:5]])
    spec = make_dagger(
        streams=[
            kafka_stream(
                kafka.bootstrap_servers,
                "things",
                ALL_TYPES,
                "event_time",
                topics=[source],
                pre_processors=[dedup("id", "1h")],
            )
        ],
        sql=f"SELECT {', '.join(ALL_TYPE_COLUMNS)} FROM things",
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, ALL_TYPES)],
    )
    start_dagger(spec).process_available()
    decode = message_class(registry, ALL_TYPES).FromString
    received = sorted((decode(record.value()) for record in kafka.read_all(sink)), key=lambda m: m.id)
    assert received == sorted(sent, key=lambda m: m.id)


# --------------------------------------------------------------------------------------------------------
# hash
# --------------------------------------------------------------------------------------------------------


def expected_string(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def expected_int(value: int) -> int:
    """Guava's Hashing.sha256().hashInt(value).asInt()."""
    return struct.unpack("<i", hashlib.sha256(struct.pack("<i", value)).digest()[:4])[0]


def expected_long(value: int) -> int:
    """Guava's Hashing.sha256().hashLong(value).asLong()."""
    return struct.unpack("<q", hashlib.sha256(struct.pack("<q", value)).digest()[:8])[0]


def test_the_hash_functions_give_guavas_values():
    """Printed by Guava 33.6 (Hashing.sha256(): hashInt(x).asInt(), hashLong(x).asLong(), hashString)."""
    assert [sha256_int(value) for value in (0, 1, -1, 42, 2**31 - 1, -(2**31))] == [
        -1738457121, 1927129959, 454268333, -290282264, 939902882, 644438125,
    ]  # fmt: skip
    assert [sha256_long(value) for value in (0, 1, -1, 2**40, 2**63 - 1, -(2**63))] == [
        8794265229978523055, -6467378160175308932, 6759447113877070610, -3300262717597460290,
        7179146226492139882, 6374347445474471398,
    ]  # fmt: skip
    assert sha256_string("héllo €") == "9cb52b6d1cfc1eae34c63c2b0ff0d49ed8ef2c82482b3c455747594c83754098"
    for value in (0, 7, -123456, 2**31 - 1):
        assert sha256_int(value) == expected_int(value)
    for value in (0, 7, -(2**50), 2**63 - 1):
        assert sha256_long(value) == expected_long(value)


def test_hash_masks_string_int_bigint_and_nested_columns_as_dagger(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("hash")
    sent = [all_types_message(registry, index) for index in range(1, 4)]
    bare = message_class(registry, ALL_TYPES)(id="bare")  # no point: the struct stays NULL
    kafka.produce(topic, [message.SerializeToString() for message in [*sent, bare]])
    spec = make_dagger(
        streams=[kafka_stream(kafka.bootstrap_servers, "things", ALL_TYPES, "event_time", topics=[topic])],
        sql="""
            SELECT id, int32_value, int64_value, sint64_value, point, point.label AS `copy.label`, words
            FROM things
        """,
        post_processors={
            "transformers": [
                {
                    "kind": "hash",
                    "columns": ["id", "int32_value", "int64_value", "point.label", "copy.label"],
                }
            ]
        },
        sinks=LOG,
    )
    running = start_dagger(spec)
    running.process_available()
    expected = [
        {
            "id": expected_string(message.id),
            "int32_value": expected_int(message.int32_value),
            "int64_value": expected_long(message.int64_value),
            "sint64_value": message.sint64_value,
            "point": {
                "x": message.point.x,
                "y": message.point.y,
                "label": expected_string(message.point.label),
            },
            "copy.label": expected_string(message.point.label),
            "words": list(message.words),
        }
        for message in sent
    ]
    expected.append(
        {
            "id": expected_string("bare"),
            "int32_value": expected_int(0),
            "int64_value": expected_long(0),
            "sint64_value": 0,
            "point": None,
            "copy.label": None,
            "words": [],
        }
    )
    assert sorted(rows(running), key=lambda row: row["id"]) == sorted(expected, key=lambda row: row["id"])
    assert list(rows(running)[0]) == [
        "id", "int32_value", "int64_value", "sint64_value", "point", "copy.label", "words",
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pre", "post", "message"),
    [
        (
            [dedup("nope", "1m")],
            {},
            r"streams\[0\]\.pre_processors\[0\]: deduplicate: no key column 'nope' "
            r"\(columns: order_id, customer_id, amount, created_at, kafka_topic, .*rowtime\)",
        ),
        (
            [],
            {"transformers": [{"kind": "clear_column", "column": "amount"}, dedup("order", "1m")]},
            r"post_processors\.transformers\[1\]: deduplicate: no key column 'order' "
            r"\(columns: order_id, amount, created_at\)",
        ),
        (
            [],
            {"transformers": [{"kind": "hash", "columns": ["order_id", "nope"]}]},
            r"post_processors\.transformers\[0\]: hash: no column 'nope' "
            r"\(columns: order_id, amount, created_at\)",
        ),
        (
            [],
            {"transformers": [dedup("order_id", "1m", "event_time")]},
            r"post_processors\.transformers\[0\]: deduplicate: clock 'event_time' needs the stream's "
            r"event-time column among the columns \(columns: order_id, amount, created_at\)",
        ),
        (
            [],
            {"transformers": [{"kind": "hash", "columns": ["amount"]}]},
            r"post_processors\.transformers\[0\]: hash: column 'amount' is double; "
            r"only string, int and bigint columns can be hashed",
        ),
        (
            [{"kind": "hash", "columns": ["created_at.seconds"]}],
            {},
            r"streams\[0\]\.pre_processors\[0\]: hash: 'created_at' is timestamp, not a struct",
        ),
        (
            [],
            {"transformers": [{"kind": "hash", "columns": ["order_id", "order_id"]}]},
            r"post_processors\.transformers\[0\]: hash: column 'order_id' is listed twice",
        ),
    ],
)
def test_a_transformer_that_cannot_apply_stops_the_dagger_before_start_naming_its_key(
    kafka, make_dagger, spark, registry, pre, post, message
):
    spec = make_dagger(
        streams=[orders(kafka, "unused", pre_processors=pre)],
        sql="SELECT order_id, amount, created_at FROM orders",
        post_processors=post,
        sinks=LOG,
    )
    with pytest.raises(DaggerBuildError, match=message):
        build_dagger(spark, spec, registry)


def test_hash_names_the_struct_and_its_fields_for_a_missing_nested_path(kafka, make_dagger, spark, registry):
    spec = make_dagger(
        streams=[kafka_stream(kafka.bootstrap_servers, "things", ALL_TYPES, "event_time", topics=["unused"])],
        sql="SELECT id, point FROM things",
        post_processors={"transformers": [{"kind": "hash", "columns": ["point.z"]}]},
        sinks=LOG,
    )
    with pytest.raises(
        DaggerBuildError,
        match=r"post_processors\.transformers\[0\]: hash: no field 'z' in 'point' for 'point.z' "
        r"\(fields: x, y, label\)",
    ):
        build_dagger(spark, spec, registry)

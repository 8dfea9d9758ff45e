"""Only the fields a query reads are decoded: the projection must never change a result."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from jobs.codec.protobuf import ProtoDecoder
from jobs.model.sql import referenced_fields
from tests.conftest import kafka_stream, message_class, order_payloads

FIELDS = ["order_id", "customer_id", "amount", "created_at"]


def test_fields_named_anywhere_in_the_query_are_kept():
    sql = "SELECT Order_ID, sum(amount) AS total FROM orders GROUP BY order_id HAVING count(*) > 1"
    assert referenced_fields(sql, FIELDS) == ["order_id", "amount"]


def test_a_star_keeps_every_field():
    assert referenced_fields("SELECT * FROM orders", FIELDS) is None
    assert referenced_fields("SELECT o.* FROM orders o", FIELDS) is None
    # The query's tree tells a multiplication from a star.
    assert referenced_fields("SELECT amount * 2 FROM orders", FIELDS) == ["amount"]


def test_a_query_sqlglot_cannot_read_keeps_every_field():
    assert referenced_fields("SELECT amount FROM orders WHERE (", FIELDS) is None


def test_a_projection_decodes_the_kept_fields_exactly(registry):
    full = registry.message("dagger.testing.AllTypes")
    projection = registry.projection("dagger.testing.AllTypes", ["id", "labels", "points_by_id", "segments"])
    assert [field.name for field in projection.fields] == ["id", "segments", "labels", "points_by_id"]
    assert registry.projection("dagger.testing.AllTypes", [field.name for field in full.fields]) is full

    message = message_class(registry, "dagger.testing.AllTypes")(id="x", int64_value=7, words=["a"])
    message.labels["k"] = "v"
    message.points_by_id[3].label = "p"
    message.segments.add().travel_time.seconds = 4
    message.attributes.update({"skipped": True})
    projected, invalid = ProtoDecoder(projection).decode([message.SerializeToString()])
    complete, _ = ProtoDecoder(full).decode([message.SerializeToString()])
    assert invalid == {}
    [row], [full_row] = projected.to_pylist(), complete.to_pylist()
    assert row == {name: full_row[name] for name in ("id", "segments", "labels", "points_by_id")}


def test_pre_processors_add_the_columns_they_read_and_user_code_keeps_every_column(registry):
    from jobs.codec.formats import column_names, record_format
    from jobs.model.plan import columns_read
    from jobs.model.schema_registry import encode_descriptor_sets
    from jobs.sources.kafka.config import KafkaStream

    def read(pre_processors: list[dict], sql: str = "SELECT order_id FROM orders") -> tuple:
        stream = KafkaStream.model_validate(
            {
                "kind": "kafka",
                "table": "orders",
                "proto_message": "dagger.testing.Order",
                "event_time_field": "created_at",
                "topics": ["t"],
                "invalid_records": {"action": "drop"},
                "pre_processors": pre_processors,
            }
        )
        descriptor_sets = encode_descriptor_sets(registry.serialized_descriptor_sets)
        fields, metadata = columns_read(stream, column_names(record_format(stream), descriptor_sets), sql)
        return tuple(None if names is None else list(names) for names in (fields, metadata))

    assert read([]) == (["order_id", "created_at"], [])
    assert read(
        [
            {"kind": "invalid_record_filter"},
            {"kind": "deduplicate", "key_column": "customer_id", "ttl": "1h"},
        ]
    ) == (["order_id", "customer_id", "created_at"], [])
    assert read([{"kind": "deduplicate", "key_column": "kafka_key", "ttl": "1h"}]) == (
        ["order_id", "created_at"], ["kafka_key"],
    )  # fmt: skip
    assert read([{"kind": "hash", "columns": ["amount"]}]) == (["order_id", "amount", "created_at"], [])
    assert read([{"kind": "sql", "sql": "SELECT *, amount FROM orders WHERE amount > 1"}]) == (None, None)
    assert read([{"kind": "sql", "sql": "SELECT order_id FROM orders WHERE amount > 1"}]) == (
        ["order_id", "amount", "created_at"], [],
    )  # fmt: skip
    assert read([{"kind": "custom", "transformer": "tests.custom_transformer:label_rows"}]) == (None, None)
    assert read([], "SELECT order_id, KAFKA_OFFSET FROM orders WHERE kafka_topic = 't'") == (
        ["order_id", "created_at"], ["kafka_topic", "kafka_offset"],
    )  # fmt: skip
    assert read([], "SELECT * FROM orders") == (None, None)


def test_metadata_columns_reach_the_query_exactly_and_only_when_it_names_them(
    kafka, registry, spark, make_dagger, start_dagger
):
    topic = kafka.new_topic("metadata")
    timestamps_ms = [1_700_000_000_123, 1_700_000_001_456, 1_700_000_002_789]
    kafka.produce(
        topic, order_payloads(registry, 0, 3), timestamps_ms=timestamps_ms, keys=[b"k0", None, b"k2"]
    )
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )
    log = [{"kind": "log", "max_rows_per_batch": 100}]

    named = make_dagger(
        streams=[stream],
        sql="SELECT order_id, kafka_topic, kafka_partition, kafka_offset, kafka_timestamp, kafka_key "
        "FROM orders",
        sinks=log,
    )
    running = start_dagger(named)
    running.process_available()
    rows = sorted(
        (json.loads(line.split(" | ", 1)[1]) for line in running.logged), key=lambda row: row["order_id"]
    )
    assert rows == [
        {
            "order_id": f"o{index}",
            "kafka_topic": topic,
            "kafka_partition": 0,
            "kafka_offset": index,
            # The log sink prints timestamps in UTC with their offset, bytes as hex.
            "kafka_timestamp": datetime.fromtimestamp(millis / 1000, UTC).isoformat(timespec="microseconds"),
            "kafka_key": key,
        }
        for index, (millis, key) in enumerate(zip(timestamps_ms, ["6b30", None, "6b32"], strict=True))
    ]

    running.run.stop()
    start_dagger(make_dagger(streams=[stream], sql="SELECT order_id FROM orders", sinks=log))
    assert spark.table("orders").columns == ["order_id", "created_at", "rowtime"]

"""Only the fields a query reads are decoded: the projection must never change a result."""

from __future__ import annotations

from jobs.codec.protobuf import ProtoDecoder
from jobs.sql import referenced_fields
from tests.conftest import message_class

FIELDS = ["order_id", "customer_id", "amount", "created_at"]


def test_fields_named_anywhere_in_the_query_are_kept():
    sql = "SELECT Order_ID, sum(amount) AS total FROM orders GROUP BY order_id HAVING count(*) > 1"
    assert referenced_fields(sql, FIELDS) == ["order_id", "amount"]


def test_a_star_keeps_every_field():
    assert referenced_fields("SELECT * FROM orders", FIELDS) is None
    assert referenced_fields("SELECT o.* FROM orders o", FIELDS) is None
    assert referenced_fields("SELECT amount * 2 FROM orders", FIELDS) is None


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


def test_pre_processors_add_the_fields_they_read_and_user_code_keeps_every_field(registry):
    from jobs.runner import _fields_to_decode
    from jobs.spec import KafkaStream

    def decoded(pre_processors: list[dict]) -> list[str] | None:
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
        return _fields_to_decode(registry, "SELECT order_id FROM orders", stream)

    assert decoded([]) == ["order_id", "created_at"]
    assert decoded(
        [
            {"kind": "invalid_record_filter"},
            {"kind": "deduplicate", "key_column": "customer_id", "ttl": "1h"},
        ]
    ) == ["order_id", "customer_id", "created_at"]
    assert decoded([{"kind": "hash", "columns": ["amount"]}]) == ["order_id", "amount", "created_at"]
    assert decoded([{"kind": "sql", "sql": "SELECT *, amount FROM orders WHERE amount > 1"}]) is None
    assert decoded([{"kind": "sql", "sql": "SELECT order_id FROM orders WHERE amount > 1"}]) == [
        "order_id", "amount", "created_at",
    ]  # fmt: skip
    assert decoded([{"kind": "custom", "transformer": "tests.custom_transformer:label_rows"}]) is None

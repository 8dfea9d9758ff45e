"""Daggers that feed daggers: a stream reading another dagger's output depends on that sink's asset, and
what no dagger writes is an external source asset."""

from __future__ import annotations

from pathlib import Path

from dagster import AssetKey

from dagger_assets.definitions import build_definitions
from dagger_assets.lineage import EXTERNAL_GROUP, external_key
from tests.dagster_deployment import write_orders_dagger

CLUSTER = "localhost:9"  # never contacted: building definitions reads the dagger files only


def kafka_sink(topic: str) -> dict:
    return {"kind": "kafka", "topic": topic, "proto_message": "dagger.testing.Order"}


def test_three_chained_daggers_and_a_backfill_show_their_lineage(tmp_path: Path, descriptor_set):
    lake = tmp_path / "lake"
    write_orders_dagger(
        tmp_path, "clean", CLUSTER, descriptor_set, {"topics": ["raw-orders"]},
        sinks=[kafka_sink("orders.clean"), {"kind": "parquet", "path": str(lake)}],
    )  # fmt: skip
    write_orders_dagger(
        tmp_path, "enrich", CLUSTER, descriptor_set, {"topics": ["orders.clean"]},
        sinks=[kafka_sink("orders.enriched")],
    )  # fmt: skip
    write_orders_dagger(
        tmp_path, "report", CLUSTER, descriptor_set, {"topic_pattern": r"orders\.(enriched|late)"}
    )
    write_orders_dagger(
        tmp_path, "backfill", CLUSTER, descriptor_set, {},
        streams=[
            {
                "kind": "parquet", "table": "orders", "proto_message": "dagger.testing.Order",
                "event_time_field": "created_at", "paths": [str(lake / "dt=2026-11-25")],
            }
        ],
    )  # fmt: skip
    # A dagger that reads its own output is no edge (it would be a cycle), and its topic no external source.
    write_orders_dagger(
        tmp_path, "loop", CLUSTER, descriptor_set, {"topics": ["loop"]}, sinks=[kafka_sink("loop")]
    )
    graph = build_definitions(tmp_path).resolve_asset_graph()

    def parents(dagger: str) -> set[AssetKey]:
        return graph.get(AssetKey([dagger, "stream", "orders"])).parent_keys

    assert parents("clean") == {AssetKey([EXTERNAL_GROUP, "kafka", "raw_orders"])}
    assert parents("enrich") == {AssetKey(["clean", "sink", "0_kafka"])}
    # A pattern may match topics no dagger writes too: it stays an external source besides the edge.
    assert parents("report") == {
        AssetKey(["enrich", "sink", "0_kafka"]),
        AssetKey([EXTERNAL_GROUP, "kafka", "orders_enriched_late"]),
    }
    # A folder inside a lake another dagger writes.
    assert parents("backfill") == {
        AssetKey(["clean", "sink", "1_parquet"]),
        external_key(f"parquet:{lake / 'dt=2026-11-25'}"),
    }
    assert parents("loop") == {AssetKey([EXTERNAL_GROUP, "kafka", "loop"])}

    external = {key for key in graph.get_all_asset_keys() if key.path[0] == EXTERNAL_GROUP}
    assert len(external) == 4
    raw = graph.get(AssetKey([EXTERNAL_GROUP, "kafka", "raw_orders"]))
    assert raw.metadata["address"] == "kafka:raw-orders"
    assert not raw.is_materializable


def test_an_external_source_never_shows_the_credentials_of_its_url(tmp_path: Path, descriptor_set):
    write_orders_dagger(
        tmp_path, "remote", CLUSTER, descriptor_set, {},
        streams=[
            {
                "kind": "parquet", "table": "orders", "proto_message": "dagger.testing.Order",
                "event_time_field": "created_at", "paths": ["s3://reader:hunter2@bucket/orders"],
            }
        ],
    )  # fmt: skip
    graph = build_definitions(tmp_path).resolve_asset_graph()
    [source] = graph.get(AssetKey(["remote", "stream", "orders"])).parent_keys
    assert source == AssetKey([EXTERNAL_GROUP, "parquet", "s3_bucket_orders"])
    assert graph.get(source).metadata["address"] == "parquet:s3://bucket/orders"
    assert graph.get(AssetKey(["remote", "stream", "orders"])).metadata["paths"] == "s3://bucket/orders"


def test_a_collection_is_an_asset_with_its_schema_upstream_of_the_daggers_reading_it(
    tmp_path: Path, descriptor_set, collector, monkeypatch
):
    project, write_key = collector.new_project("lineage")
    collector.collect(write_key, "signup", [{"user_id": "u1", "at": "2026-11-26T10:00:00Z"}])
    collector.collect(write_key, "signup", [{"user_id": "u2", "plan": "pro", "seats": 3}])
    topic = f"{project}.signup"
    avro = {"topics": [topic], "format": "avro", "proto_message": None, "schema_registry_url": "http://r"}
    write_orders_dagger(tmp_path, "signups", CLUSTER, descriptor_set, {**avro, "event_time_field": "at"})
    monkeypatch.setenv("DAGGER_COLLECTOR_DATABASE", collector.database_url)
    graph = build_definitions(tmp_path).resolve_asset_graph()

    collection_key = AssetKey(["collections", project, "signup"])
    assert graph.get(AssetKey(["signups", "stream", "orders"])).parent_keys == {collection_key}
    metadata = graph.get(collection_key).metadata
    assert (metadata["topic"], metadata["schema_version"]) == (topic, 2)
    assert [(column.name, column.type) for column in metadata["dagster/column_schema"].columns] == [
        ("user_id", "string"), ("at", "timestamp"), ("plan", "string"), ("seats", "long")
    ]  # fmt: skip


def test_an_unreachable_collection_database_leaves_the_daggers_loading(
    tmp_path: Path, descriptor_set, monkeypatch
):
    write_orders_dagger(tmp_path, "orders", CLUSTER, descriptor_set, {"topics": ["raw-orders"]})
    monkeypatch.setenv("DAGGER_COLLECTOR_DATABASE", "postgresql://nobody@127.0.0.1:9/meta?connect_timeout=2")
    graph = build_definitions(tmp_path).resolve_asset_graph()
    assert graph.get(AssetKey(["orders", "stream", "orders"])).parent_keys == {
        AssetKey([EXTERNAL_GROUP, "kafka", "raw_orders"])
    }
    assert not [key for key in graph.get_all_asset_keys() if key.path[0] == "collections"]

"""The code location loads every dagger file as an asset, and a bounded materialization runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import materialize

from dagger_assets.definitions import build_definitions
from jobs.protoc import PROJECT_ROOT
from jobs.spec import DaggerConfigError
from resources.spark import SparkResource
from tests.conftest import kafka_stream, message_class


def test_the_repository_daggers_load_as_assets():
    definitions = build_definitions(PROJECT_ROOT / "daggers")
    keys = {key.to_user_string() for key in definitions.resolve_asset_graph().get_all_asset_keys()}
    assert keys == {"booking_filter"}


def test_a_broken_dagger_file_names_file_and_key(tmp_path: Path):
    (tmp_path / "broken.yaml").write_text("name: broken\nstreamz: []\n")
    with pytest.raises(DaggerConfigError, match=r"(?s)broken.yaml: .*streamz: unknown key"):
        build_definitions(tmp_path)


def test_materializing_a_dagger_processes_what_is_available_and_stops(
    tmp_path: Path, kafka, registry, descriptor_set, spark
):
    topic = kafka.new_topic("materialize")
    order = message_class(registry, "dagger.testing.Order")
    payloads = []
    for index in range(25):
        message = order(order_id=f"o{index}", amount=float(index))
        message.created_at.FromSeconds(1_700_000_000 + index)
        payloads.append(message.SerializeToString())
    kafka.produce(topic, payloads)
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )
    import yaml

    (tmp_path / "orders.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "orders-copy",
                "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
                "streams": [stream],
                "sql": "SELECT order_id FROM orders WHERE amount >= 5",
                "checkpoint_location": str(tmp_path / "checkpoint"),
                "sinks": [{"kind": "log"}],
            }
        )
    )
    definitions = build_definitions(tmp_path)
    result = materialize(
        [definitions.get_assets_def("orders_copy")], resources={"spark": SparkResource(master="local[2]")}
    )
    assert result.success
    [materialization] = result.asset_materializations_for_node("orders_copy")
    assert materialization.metadata["input_rows"].value == 25
    assert materialization.metadata["invalid_records"].value == 0

"""Rewinds as an operator action: a new checkpoint generation that starts at an instant or at offsets,
the old generation kept and restorable; from the CLI's functions and from Dagster's run config."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, materialize

from dagger_assets.definitions import build_definitions
from dagger_assets.restarts import rerun_request
from jobs.cli.main import main
from jobs.model.spec import DaggerConfigError, load_dagger
from jobs.running.checkpoints import INITIAL, CheckpointGenerations, parse_rewind
from resources import SparkResource, default_resources
from tests.conftest import order_payloads
from tests.dagster_deployment import write_orders_dagger

START_MS = (int(time.time()) - 3600) * 1000  # one record a second from an hour ago (older ones: retention)


@pytest.fixture
def orders(tmp_path: Path, kafka, registry, descriptor_set) -> tuple[Path, str]:
    topic = kafka.new_topic("rewound")
    kafka.produce(
        topic, order_payloads(registry, 0, 10), timestamps_ms=[START_MS + 1000 * i for i in range(10)]
    )
    path = write_orders_dagger(
        tmp_path, "rewound", kafka.bootstrap_servers, descriptor_set,
        {"topics": [topic], "auto_offset_reset": "earliest"},
    )  # fmt: skip
    return path, topic


def order_ids(running) -> list[str]:
    return [json.loads(line.split(" | ", 1)[1])["order_id"] for line in running.logged]


def ids(numbers: range) -> list[str]:
    return [f"o{number}" for number in numbers]


def test_rewinds_to_an_instant_and_to_offsets_then_the_first_generation_is_restored(
    orders, start_dagger, kafka, registry, capsys
):
    path, topic = orders
    generations = CheckpointGenerations(load_dagger(path))
    first = start_dagger(generations.apply())
    first.process_available()
    assert order_ids(first) == ids(range(10))
    first.run.stop()

    instant = datetime.fromtimestamp((START_MS + 6000) / 1000, UTC)
    by_time = generations.rewind(parse_rewind({"to_timestamp": instant.isoformat()}))
    rewound = start_dagger(generations.apply())
    rewound.process_available()
    assert order_ids(rewound) == ids(range(6, 10))  # again, from the instant on
    assert rewound.run.checkpoint_location == by_time.path
    rewound.run.stop()

    by_offsets = generations.rewind(parse_rewind({"to_offsets": {topic: {"0": 3}}}))
    from_offset = start_dagger(generations.apply())
    from_offset.process_available()
    assert order_ids(from_offset) == ids(range(3, 10))
    from_offset.run.stop()

    assert [g.name for g in generations.list()] == [INITIAL, by_time.name, by_offsets.name]
    assert generations.current().name == by_offsets.name
    assert main(["checkpoints", str(path)]) == 0  # `dagger checkpoints` lists them, the current one marked
    listed = capsys.readouterr().out.splitlines()
    assert [line[:2] + line.split(":")[0][2:] for line in listed] == [
        f"  {INITIAL}",
        f"  {by_time.name}",
        f"* {by_offsets.name}",
    ]
    assert f'rewound to {{"to_offsets":{{"{topic}":{{"0":3}}}}}}' in listed[2]
    assert main(["checkpoints", str(path), "--restore", INITIAL]) == 0
    kafka.produce(topic, order_payloads(registry, 10, 2))
    resumed = start_dagger(generations.apply())
    resumed.process_available()
    assert order_ids(resumed) == ids(range(10, 12))  # where the first generation stopped: no gap, no repeat


def test_a_rewind_is_refused_while_the_dagger_runs_and_a_bad_point_names_the_key(orders, start_dagger):
    path, _ = orders
    generations = CheckpointGenerations(load_dagger(path))
    running = start_dagger(generations.apply())
    with pytest.raises(DaggerConfigError, match=r"cannot rewind: dagger rewound: checkpoint .* is in use"):
        generations.rewind(parse_rewind({"to_timestamp": "2026-11-25T00:00:00Z"}))
    running.run.stop()
    assert [g.name for g in generations.list()] == [INITIAL]

    with pytest.raises(DaggerConfigError, match="rewind: set exactly one of 'to_timestamp' and 'to_offsets'"):
        parse_rewind({})
    with pytest.raises(DaggerConfigError, match=r"rewind: to_timestamp: Input should be a valid datetime"):
        parse_rewind({"to_timestamp": "yesterday"})
    with pytest.raises(DaggerConfigError, match="no checkpoint generation 'nope' \\(there are: initial\\)"):
        generations.restore("nope")


def test_a_rewind_from_dagsters_run_config_and_its_restart_does_not_rewind_again(orders):
    path, topic = orders
    definitions = build_definitions(path.parent)
    resources = {**default_resources(), "spark": SparkResource(master="local[2]")}
    sql = definitions.get_assets_def(AssetKey(["rewound", "sql"]))

    def launch(**config) -> list[str]:
        instance = DagsterInstance.ephemeral()
        run_config = {"ops": {"rewound_query": {"config": {"bounded": True, **config}}}}
        result = materialize([sql], resources=resources, run_config=run_config, instance=instance)
        assert result.success
        logged = [
            e.user_message for e in instance.all_logs(result.run_id) if e.user_message.startswith("batch ")
        ]
        restart = rerun_request(load_dagger(path), instance.get_run_by_id(result.run_id), "k", {})
        assert restart.run_config == {"ops": {"rewound_query": {"config": {"bounded": True}}}}
        return [json.loads(message.split(" | ", 1)[1])["order_id"] for message in logged]

    assert launch() == ids(range(10))
    assert launch(rewind={"to_offsets": {topic: {"0": 8}}}) == ids(range(8, 10))
    assert launch() == []  # the rewound generation stays current and is at the end
    assert launch(restore_generation=INITIAL) == []
    assert CheckpointGenerations(load_dagger(path)).current().name == INITIAL

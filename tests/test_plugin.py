"""JSON-RPC plugins: the example Node.js plugin (`plugins/node/enrich_orders.mjs`) as a pre- and a
post-processor on the real broker and local Spark; chunking by `batch_size`; every value type there and
back; a crash, garbage, an error answer and a timeout failing the batch with an error naming the plugin,
without losing a record."""

from __future__ import annotations

import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from jobs.model.spec import parse_dagger
from jobs.processors.plugin import plugin_name
from jobs.running.runner import DaggerBuildError, DaggerQueryError, build_dagger
from tests.conftest import kafka_stream, order_payloads
from tests.test_kafka_pipeline import ALL_TYPE_COLUMNS, ALL_TYPES, all_types_message

ROOT = Path(__file__).resolve().parents[1]
ENRICH_ORDERS = str(ROOT / "plugins" / "node" / "enrich_orders.mjs")
LOG = [{"kind": "log", "max_rows_per_batch": 1000}]
START = 1_700_000_000  # order_payloads: o<i> is created at START + i seconds, with amount i


def orders(kafka, topic: str, **fields) -> dict:
    return kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic], **fields
    )


def enrich_orders(*flags: str, **fields) -> dict:
    return {"kind": "plugin", "command": ["node", ENRICH_ORDERS, *flags], **fields}


def logged(running) -> list[dict]:
    rows = [json.loads(line.split(" | ", 1)[1]) for line in running.logged]
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def test_a_node_plugin_as_pre_processor_filters_and_enriches_the_stream(
    kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("plugin-pre")
    kafka.produce(topic, order_payloads(registry, 0, 6))
    plugin = enrich_orders(
        output_schema="*, amount_cents BIGINT, tier STRING",
        arguments={"min_amount": 2, "large_amount": 4},
    )
    spec = make_dagger(
        streams=[orders(kafka, topic, pre_processors=[plugin])],
        sql="SELECT order_id, amount, amount_cents, tier, created_at, rowtime, kafka_offset FROM orders",
        sinks=LOG,
    )
    running = start_dagger(spec)
    running.process_available()
    assert logged(running) == [
        {
            "order_id": f"o{index}",
            "amount": float(index),
            "amount_cents": index * 100,
            "tier": "large" if index >= 4 else "small",
            "created_at": iso(START + index),
            "rowtime": iso(START + index),
            "kafka_offset": index,
        }
        for index in (2, 3, 4, 5)
    ]


def test_the_stream_watermark_survives_a_pre_processor_plugin(kafka, registry, make_dagger, start_dagger):
    topic = kafka.new_topic("plugin-window")
    kafka.produce(topic, order_payloads(registry, 0, 6))  # events at START+0..5 s
    spec = make_dagger(
        streams=[orders(kafka, topic, pre_processors=[enrich_orders(output_schema="*, tier STRING")])],
        sql="""
            SELECT window.start AS window_start, tier, count(*) AS orders
            FROM orders GROUP BY window(rowtime, '2 seconds'), tier
        """,
        sinks=LOG,
    )
    running = start_dagger(spec)
    running.process_available()
    kafka.produce(topic, order_payloads(registry, 60, 1))  # moves the watermark past every window
    running.process_available()
    running.process_available()  # the watermark advanced at the end of the last batch
    assert logged(running) == [
        {"window_start": iso(START + start), "tier": "small", "orders": 2} for start in (0, 2, 4)
    ]


def test_a_node_plugin_as_post_processor_reshapes_the_result(kafka, registry, make_dagger, start_dagger):
    topic = kafka.new_topic("plugin-post")
    kafka.produce(topic, order_payloads(registry, 0, 4))
    post = {
        "transformers": [
            enrich_orders(
                name="orders-enricher",
                output_schema="order_id STRING, amount_cents BIGINT, tier STRING",
                arguments={"min_amount": 1, "large_amount": 3},
            ),
            {"kind": "sql", "sql": "SELECT *, upper(tier) AS tier_upper FROM data_stream"},
        ]
    }
    spec = make_dagger(
        streams=[orders(kafka, topic)],
        sql="SELECT order_id, customer_id, amount FROM orders",
        post_processors=post,
        sinks=LOG,
    )
    running = start_dagger(spec)
    running.process_available()
    assert logged(running) == [
        {"order_id": "o1", "amount_cents": 100, "tier": "small", "tier_upper": "SMALL"},
        {"order_id": "o2", "amount_cents": 200, "tier": "small", "tier_upper": "SMALL"},
        {"order_id": "o3", "amount_cents": 300, "tier": "large", "tier_upper": "LARGE"},
    ]


def test_rows_reach_the_plugin_in_chunks_of_batch_size(kafka, registry, make_dagger, start_dagger):
    topic = kafka.new_topic("plugin-chunks")
    kafka.produce(topic, order_payloads(registry, 0, 7))
    plugin = enrich_orders(
        output_schema="order_id STRING, call_id STRING, call_size INT",
        arguments={"trace": True},
        batch_size=3,
    )
    spec = make_dagger(
        streams=[orders(kafka, topic)],
        sql="SELECT order_id, amount FROM orders",
        post_processors={"transformers": [plugin]},
        sinks=LOG,
    )
    running = start_dagger(spec)
    running.process_available()
    rows = logged(running)
    assert sorted(row["order_id"] for row in rows) == sorted(f"o{index}" for index in range(7))
    calls = Counter(row["call_id"] for row in rows)
    assert sorted(calls.values()) == [1, 3, 3]  # one partition, one Arrow batch: three process calls
    assert all(row["call_size"] == calls[row["call_id"]] for row in rows)  # what each call carried


def test_every_value_type_crosses_the_protocol_and_comes_back_unchanged(
    kafka, registry, make_dagger, start_dagger, tmp_path
):
    topic = kafka.new_topic("plugin-types")
    kafka.produce(topic, [all_types_message(registry, index).SerializeToString() for index in range(5)])
    stream = kafka_stream(kafka.bootstrap_servers, "things", ALL_TYPES, "event_time", topics=[topic])
    sql = f"""
        SELECT {", ".join(ALL_TYPE_COLUMNS)}, id AS order_id, double_value AS amount,
               CAST(int32_value AS DECIMAL(12, 3)) / 8 AS ratio, DATE '2024-05-01' AS day,
               CAST('2024-05-01 12:00:00.5' AS TIMESTAMP_NTZ) AS local_time,
               CAST(NULL AS STRING) AS nothing, CAST('-Infinity' AS DOUBLE) AS low, rowtime
        FROM things
    """
    plain = start_dagger(make_dagger(streams=[stream], sql=sql, sinks=LOG))
    plain.process_available()
    plain.run.stop()
    through_plugin = start_dagger(
        make_dagger(
            streams=[stream],
            sql=sql,
            post_processors={"transformers": [enrich_orders(output_schema="*, tier STRING")]},
            sinks=LOG,
            checkpoint_location=str(tmp_path / "through-plugin"),
        )
    )
    through_plugin.process_available()
    expected = logged(plain)
    assert len(expected) == 5
    actual = logged(through_plugin)
    assert [row.pop("tier") for row in actual] == ["small"] * 5
    assert actual == expected


def lake_rows(lake: Path) -> list[dict]:
    table = ds.dataset(lake, format="parquet", partitioning="hive").to_table()
    rows = [{key: row[key] for key in ("order_id", "amount_cents", "tier")} for row in table.to_pylist()]
    return sorted(rows, key=lambda row: int(row["order_id"][1:]))


def test_a_crash_fails_the_batch_naming_the_plugin_and_no_record_is_lost(
    kafka, registry, make_dagger, start_dagger, tmp_path
):
    topic = kafka.new_topic("plugin-crash")
    lake = tmp_path / "lake"

    def lake_dagger(*flags: str):
        plugin = enrich_orders(*flags, output_schema="*, amount_cents BIGINT, tier STRING", batch_size=2)
        return make_dagger(
            streams=[orders(kafka, topic)],
            sql="SELECT order_id, amount, created_at FROM orders",
            post_processors={"transformers": [plugin]},
            sinks=[{"kind": "parquet", "path": str(lake), "time_column": "created_at"}],
        )

    kafka.produce(topic, order_payloads(registry, 0, 4))
    crashing = start_dagger(lake_dagger("--crash-on", "o6"))
    crashing.process_available()
    assert [row["order_id"] for row in lake_rows(lake)] == ["o0", "o1", "o2", "o3"]

    kafka.produce(topic, order_payloads(registry, 4, 4))  # o4, o5 answered, then o6 kills the plugin
    with pytest.raises(DaggerQueryError) as failure:
        crashing.process_available()
    message = str(failure.value)
    assert (
        "plugin enrich_orders.mjs (post_processors.transformers[0]): exited with code 3 "
        "during process (2 records); stderr: " in message
    ), message
    assert "enrich_orders: crashing on purpose at order o6" in message
    assert [row["order_id"] for row in lake_rows(lake)] == ["o0", "o1", "o2", "o3"]
    crashing.run.stop()

    fixed = start_dagger(lake_dagger())  # the same checkpoint: the failed batch is replayed
    fixed.process_available()
    assert lake_rows(lake) == [
        {"order_id": f"o{index}", "amount_cents": index * 100, "tier": "small"} for index in range(8)
    ]


@pytest.mark.parametrize(
    ("flags", "fields", "message"),
    [
        (
            ["--garbage-on", "o1"],
            {},
            r"answered garbage to process \(3 records\): not JSON: 'this is not JSON \(order o1\)'",
        ),
        (
            ["--fail-on", "o1"],
            {},
            r"process \(3 records\) failed: error -32001: cannot enrich order o1: refused on purpose$",
        ),
        (
            ["--hang-on", "o1"],
            {"timeout": "1s"},
            r"did not answer within 1s \(process \(3 records\)\): timed out, killed; "
            r"stderr: .*enrich_orders: hanging on purpose at order o1$",
        ),
        (
            ["--bad-value-on", "o2"],
            {},
            r"the answer to process \(3 records\): record 2: column 'amount_cents': expected an integer "
            r"\(bigint: a JSON integer or a string of digits\), got \"a lot\"",
        ),
    ],
    ids=["garbage", "error-answer", "timeout", "wrong-type"],
)
def test_a_misbehaving_plugin_fails_the_batch_with_a_clear_error(
    kafka, registry, make_dagger, start_dagger, flags, fields, message
):
    topic = kafka.new_topic("plugin-broken")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    plugin = enrich_orders(*flags, output_schema="*, amount_cents BIGINT", **fields)
    spec = make_dagger(
        streams=[orders(kafka, topic)],
        sql="SELECT order_id, amount FROM orders",
        post_processors={"transformers": [plugin]},
        sinks=LOG,
    )
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError, match=r"plugin enrich_orders\.mjs \(post_processors") as failure:
        running.process_available()
    assert failure.match(message)
    assert running.logged == []


# A plugin in Python, to answer what the Node example never does: EXTRA keys, ids shifted by SHIFT.
PYTHON_PLUGIN = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    if request["method"] == "initialize":
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": {}}
    else:
        records = [dict(record, **EXTRA) for record in request["params"]["records"]]
        answer = {"jsonrpc": "2.0", "id": request["id"] + SHIFT, "result": {"records": records}}
    print(json.dumps(answer), flush=True)
"""


@pytest.mark.parametrize(
    ("extra", "id_shift", "message"),
    [
        (
            {"surprise": 1},
            0,
            r"record 0: 'surprise' is not an output column \(columns: order_id, amount\); "
            r"declare it in output_schema",
        ),
        ({}, 5, r"answered garbage to process \(2 records\): the id is 7, expected 2: \{"),
    ],
    ids=["unknown-column", "wrong-id"],
)
def test_a_plugin_answering_outside_the_protocol_fails_the_batch(
    kafka, registry, make_dagger, start_dagger, extra, id_shift, message
):
    topic = kafka.new_topic("plugin-protocol")
    kafka.produce(topic, order_payloads(registry, 0, 2))
    script = PYTHON_PLUGIN.replace("EXTRA", repr(extra)).replace("SHIFT", str(id_shift))
    plugin = {"kind": "plugin", "command": [sys.executable, "-c", script], "name": "py-plugin"}
    spec = make_dagger(
        streams=[orders(kafka, topic)],
        sql="SELECT order_id, amount FROM orders",
        post_processors={"transformers": [plugin]},
        sinks=LOG,
    )
    running = start_dagger(spec)
    with pytest.raises(DaggerQueryError, match=message) as failure:
        running.process_available()
    assert "plugin py-plugin (post_processors.transformers[0]): " in str(failure.value)


@pytest.mark.parametrize(
    ("plugin", "sql", "message"),
    [
        (
            {"kind": "plugin", "command": ["/nonexistent/plugin"]},
            "SELECT order_id, amount FROM orders",
            r"post_processors\.transformers\[0\]: plugin plugin: cannot start '/nonexistent/plugin': "
            r"No such file or directory",
        ),
        (
            enrich_orders(),
            "SELECT order_id FROM orders",
            r"post_processors\.transformers\[0\]: plugin enrich_orders\.mjs: initialize failed: "
            r"error -32602: enrich_orders needs the column\(s\) amount; got order_id",
        ),
        (
            enrich_orders(output_schema="*, amount_cents BIGNUM"),
            "SELECT order_id, amount FROM orders",
            r"plugin enrich_orders\.mjs: output_schema: not a Spark DDL schema",
        ),
        (
            enrich_orders(output_schema="*, amount STRING"),
            "SELECT order_id, amount FROM orders",
            r"plugin enrich_orders\.mjs: output_schema: column 'amount' appears twice",
        ),
    ],
    ids=["missing-program", "initialize-error", "bad-output-schema", "duplicate-column"],
)
def test_a_plugin_that_cannot_start_stops_the_dagger_before_it_runs(
    kafka, spark, registry, make_dagger, plugin, sql, message
):
    spec = make_dagger(
        streams=[orders(kafka, "unused")],
        sql=sql,
        post_processors={"transformers": [plugin]},
        sinks=LOG,
    )
    with pytest.raises(DaggerBuildError, match=message):
        build_dagger(spark, spec, registry)


def test_a_command_file_is_found_relative_to_the_dagger_file(descriptor_set):
    document = {
        "name": "relative-plugin",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "streams": [
            {
                "kind": "parquet",
                "table": "orders",
                "proto_message": "dagger.testing.Order",
                "event_time_field": "created_at",
                "paths": ["lake"],
                "pre_processors": [{"kind": "plugin", "command": ["node", "node/enrich_orders.mjs", "-v"]}],
            }
        ],
        "sql": "SELECT * FROM orders",
        "sinks": [{"kind": "log"}],
    }
    spec = parse_dagger(document, "relative.yaml", base_dir=ROOT / "plugins")
    plugin = spec.streams[0].pre_processors[0]
    assert plugin.command == ["node", ENRICH_ORDERS, "-v"]
    assert plugin_name(plugin) == "enrich_orders.mjs"

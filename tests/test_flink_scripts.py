"""Flink SQL scripts (`CREATE TABLE ... WITH`, `CREATE VIEW`, `INSERT INTO`) run as daggers: what each
statement becomes, what is refused and where, and a Nexmark-shaped script on Kafka and Spark."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from jobs.model.spec import DaggerConfigError, load_dagger

# Nexmark's shape, in the project's own words: one topic of events, each a person, an auction or a bid
# (nested rows), the event time computed from whichever is there.
EVENTS_TABLE = """
-- the events, as the generator writes them
CREATE TABLE events (
    event_type INT,
    person ROW<id BIGINT, name VARCHAR, `dateTime` TIMESTAMP(3)>,
    bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3)>,
    `dateTime` AS CASE WHEN event_type = 0 THEN person.`dateTime` ELSE bid.`dateTime` END,
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'kafka',
    'topic' = '${EVENTS_TOPIC}',
    'properties.bootstrap.servers' = '${BOOTSTRAP_SERVERS}',
    'scan.startup.mode' = 'earliest-offset',
    'sink.partitioner' = 'round-robin',
    'format' = 'json'
);
"""

BID_VIEW = """
CREATE VIEW bid AS
SELECT bid.auction, bid.bidder, bid.price, `dateTime` FROM ${EVENTS_TABLE} WHERE event_type = 1;
"""

PRICED_BIDS = """
CREATE TABLE priced (
  auction BIGINT,
  bidder BIGINT,
  euros BIGINT,
  `dateTime` TIMESTAMP(3)
) WITH (
  'connector' = 'kafka',
  'topic' = '${OUTPUT_TOPIC}',
  'properties.bootstrap.servers' = '${BOOTSTRAP_SERVERS}',
  'format' = 'json'
);

INSERT INTO priced
SELECT auction, bidder, price * 2 AS euros, `dateTime` FROM bid WHERE price > 10;
"""


def write_dagger(folder: Path, scripts: dict[str, str], **keys: object) -> Path:
    """A dagger file running `scripts` (file name -> text) in order, with `keys` added."""
    for name, text in scripts.items():
        (folder / name).write_text(text)
    dagger = folder / "script.yaml"
    document = {
        "name": "script-dagger",
        "script": list(scripts),
        "checkpoint_location": str(folder / "checkpoint"),
        **keys,
    }
    dagger.write_text(yaml.safe_dump(document))
    return dagger


VARIABLES = {
    "BOOTSTRAP_SERVERS": "127.0.0.1:9092",
    "EVENTS_TOPIC": "events",
    "EVENTS_TABLE": "events",
    "OUTPUT_TOPIC": "priced",
}


def load(tmp_path: Path, scripts: dict[str, str], variables: dict[str, str] = VARIABLES, **keys: object):
    return load_dagger(write_dagger(tmp_path, scripts, variables=variables, **keys))


def test_a_script_s_tables_view_and_insert_become_the_dagger_s_stream_query_and_sink(tmp_path):
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": PRICED_BIDS})
    assert [stream.model_dump(exclude_defaults=True) for stream in spec.streams] == [
        {
            "kind": "kafka",
            "table": "events",
            "format": "json",
            "record_schema": {
                "type": "record",
                "name": "events",
                "fields": [
                    {"name": "event_type", "type": ["null", "int"]},
                    {
                        "name": "person",
                        "type": [
                            "null",
                            {
                                "type": "record",
                                "name": "person",
                                "fields": [
                                    {"name": "id", "type": ["null", "long"]},
                                    {"name": "name", "type": ["null", "string"]},
                                    {
                                        "name": "dateTime",
                                        "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
                                    },
                                ],
                            },
                        ],
                    },
                    {
                        "name": "bid",
                        "type": [
                            "null",
                            {
                                "type": "record",
                                "name": "bid",
                                "fields": [
                                    {"name": "auction", "type": ["null", "long"]},
                                    {"name": "bidder", "type": ["null", "long"]},
                                    {"name": "price", "type": ["null", "long"]},
                                    {
                                        "name": "dateTime",
                                        "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
                                    },
                                ],
                            },
                        ],
                    },
                ],
            },
            "computed_columns": {
                "dateTime": "CASE WHEN event_type = 0 THEN person.`dateTime` ELSE bid.`dateTime` END"
            },
            "metadata_columns": False,
            "event_time_field": "dateTime",
            "topics": ["events"],
            "bootstrap_servers": "127.0.0.1:9092",
            "auto_offset_reset": "earliest",
        }
    ]
    assert [sink.model_dump(exclude_defaults=True) for sink in spec.sinks] == [
        {"kind": "kafka", "topic": "priced", "bootstrap_servers": "127.0.0.1:9092", "format": "json"}
    ]
    assert spec.sql_dialect == "flink"
    assert spec.rowtime_column == "dateTime"
    assert spec.watermark_delay.total_seconds() == 4
    assert spec.output_mode == "append"
    assert spec.spark_sql == (
        "WITH `bid` AS (SELECT bid.auction, bid.bidder, bid.price, `dateTime` FROM events "
        "WHERE event_type = 1) SELECT CAST(`auction` AS BIGINT) AS `auction`, CAST(`bidder` AS BIGINT) "
        "AS `bidder`, CAST(`euros` AS BIGINT) AS `euros`, CAST(`dateTime` AS TIMESTAMP) AS `dateTime` "
        "FROM (SELECT auction, bidder, price * 2 AS euros, `dateTime` FROM bid WHERE price > 10) "
        "AS `priced`(`auction`, `bidder`, `euros`, `dateTime`)"
    )


def test_print_blackhole_and_filesystem_tables_are_the_log_blackhole_and_parquet_sinks(tmp_path):
    def sink_of(connector_options: str, columns: str = "auction BIGINT") -> dict:
        script = f"CREATE TABLE outcome ({columns}) WITH ({connector_options});\n{INSERT_AUCTIONS}"
        spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": script})
        return spec.sinks[0].model_dump(exclude_defaults=True)

    assert sink_of("'connector' = 'print'") == {"kind": "log"}
    assert sink_of("'connector' = 'blackhole'") == {"kind": "blackhole"}
    assert sink_of(
        f"'connector' = 'filesystem', 'path' = 'file://{tmp_path}/lake', 'format' = 'parquet'"
    ) == {
        "kind": "parquet",
        "path": f"{tmp_path}/lake",
    }


def test_a_query_whose_results_update_gets_the_update_output_mode(tmp_path):
    counts = (
        "CREATE TABLE counts (auction BIGINT, bids BIGINT) WITH ('connector' = 'blackhole');\n"
        "INSERT INTO counts SELECT auction, COUNT(*) AS bids FROM bid GROUP BY auction"
    )
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": counts})
    assert spec.output_mode == "update"
    assert spec.resolved_bounded_end == "flush"  # Flink SQL: a bounded run ends as Flink's


def _refusal(tmp_path: Path, query_script: str, variables: dict[str, str] = VARIABLES, **keys: object) -> str:
    with pytest.raises(DaggerConfigError) as raised:
        load(
            tmp_path,
            {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": query_script},
            variables,
            **keys,
        )
    return str(raised.value)


INSERT_AUCTIONS = "INSERT INTO outcome SELECT auction FROM bid"
BLACKHOLE = "CREATE TABLE outcome (auction BIGINT) WITH ('connector' = 'blackhole');\n"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            BLACKHOLE + "\nINSERT INTO outcome SELECT auction FROM (SELECT *, PROCTIME(1) AS p FROM bid)",
            "q.sql, line 3, INSERT INTO outcome: at line 4, column 32: PROCTIME() takes no arguments",
        ),
        (
            "CREATE TABLE outcome (auction BIGINT) WITH ('connector' = 'blackhole', 'rows' = '5');\n"
            "INSERT INTO outcome SELECT auction FROM bid",
            "q.sql, line 1, CREATE TABLE outcome: option(s) 'rows' of a 'blackhole' table written as a sink "
            "have no counterpart in a dagger",
        ),
        (
            f"CREATE TABLE outcome (auction BIGINT) WITH ('connector' = 'jdbc');\n{INSERT_AUCTIONS}",
            "q.sql, line 1, CREATE TABLE outcome: 'connector' = 'jdbc' has no sink here",
        ),
        (
            "CREATE TABLE outcome (auction BIGINT) PARTITIONED BY (auction) WITH ('connector' = 'print');\n"
            + INSERT_AUCTIONS,
            "q.sql, line 1, CREATE TABLE outcome: PARTITIONED BY: a 'print' table is not partitioned",
        ),
        (
            "CREATE TABLE outcome (auction BIGINT) PARTITIONED BY (auction) WITH ('connector' = "
            "'filesystem', 'path' = '/lake', 'format' = 'parquet', 'partition.default-name' = 'none');\n"
            + INSERT_AUCTIONS,
            "q.sql, line 1, CREATE TABLE outcome: option(s) 'partition.default-name' of a 'filesystem' table",
        ),
        (
            BLACKHOLE
            + "INSERT INTO outcome SELECT auction FROM bid;\nINSERT INTO outcome SELECT bidder FROM bid",
            "a script runs one INSERT INTO statement (found: INSERT INTO outcome, INSERT INTO outcome)",
        ),
        (
            BLACKHOLE + "INSERT INTO outcome SELECT auction FROM ${NOWHERE}",
            "q.sql, line 2: ${NOWHERE} is not one of the dagger's variables",
        ),
    ],
    ids=[
        "proctime",
        "unknown-option",
        "unknown-connector",
        "partitioned-print",
        "partition-default-name",
        "two-inserts",
        "variable",
    ],
)
def test_what_has_no_counterpart_is_refused_naming_the_file_line_and_statement(tmp_path, script, message):
    assert message in _refusal(tmp_path, script)


def test_a_source_option_or_format_without_a_counterpart_is_refused_naming_it(tmp_path):
    avro = EVENTS_TABLE.replace("'format' = 'json'", "'format' = 'raw'")
    with pytest.raises(
        DaggerConfigError, match=re.escape("ddl.sql, line 3, CREATE TABLE events: 'format' = 'raw'")
    ):
        load(tmp_path, {"ddl.sql": avro, "views.sql": BID_VIEW, "q.sql": PRICED_BIDS})
    odd = EVENTS_TABLE.replace(
        "'format' = 'json'", "'format' = 'json', 'scan.topic-partition-discovery.interval' = '1s'"
    )
    with pytest.raises(
        DaggerConfigError, match=re.escape("option(s) 'scan.topic-partition-discovery.interval'")
    ):
        load(tmp_path, {"ddl.sql": odd, "views.sql": BID_VIEW, "q.sql": PRICED_BIDS})


def test_the_query_s_columns_are_written_to_the_table_s_by_position_as_in_flink(tmp_path):
    script = BLACKHOLE + "INSERT INTO outcome SELECT bidder FROM bid"
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": script})
    assert spec.spark_sql.endswith(
        "SELECT CAST(`auction` AS BIGINT) AS `auction` FROM (SELECT bidder FROM bid) AS `outcome`(`auction`)"
    )


def test_the_query_s_columns_take_the_sink_table_s_declared_types(tmp_path, kafka, start_dagger):
    events = kafka.new_topic("events")
    kafka.produce(events, [_event(1, 1_000, auction=1, bidder=7, price=1_234_567)])
    priced = (  # Nexmark q1's price: Spark's product is DECIMAL(24, 3), the table's DECIMAL(23, 3)
        "CREATE TABLE priced (auction BIGINT, price DECIMAL(23, 3), bidder DOUBLE, `dateTime` TIMESTAMP(3))\n"
        "WITH ('connector' = 'print');\n"
        "INSERT INTO priced SELECT auction, 0.908 * price, bidder, `dateTime` FROM bid"
    )
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": priced}, variables)
    running = start_dagger(spec)
    assert [(field.name, field.dataType.simpleString()) for field in running.run.built.result.schema] == [
        ("auction", "bigint"),
        ("price", "decimal(23,3)"),
        ("bidder", "double"),  # a BIGINT widened, as Flink casts it implicitly
        ("dateTime", "timestamp"),
    ]
    running.process_available()
    assert [json.loads(line.split(" | ", 1)[1]) for line in running.logged] == [
        {"auction": 1, "price": "1120986.836", "bidder": 7.0, "dateTime": "2026-12-01T10:00:01+00:00"}
    ]


def test_keys_the_script_gives_are_not_given_twice(tmp_path):
    message = _refusal(tmp_path, PRICED_BIDS, sql="SELECT 1")
    assert "'sql': given by the script, not by the dagger file" in message


def _event(event_type: int, millis: int, **row: int | str) -> bytes:
    at = (datetime(2026, 12, 1, 10) + timedelta(milliseconds=millis)).isoformat(" ", "milliseconds")
    name = "person" if event_type == 0 else "bid"
    return json.dumps({"event_type": event_type, name: {**row, "dateTime": at}}).encode()


def test_a_nexmark_shaped_script_runs_on_kafka_with_its_computed_event_time(tmp_path, kafka, start_dagger):
    events, output = kafka.new_topic("events"), kafka.new_topic("priced")
    kafka.produce(
        events,
        [
            _event(0, 0, id=7),
            _event(1, 1_000, auction=1, bidder=7, price=5),
            _event(1, 2_500, auction=1, bidder=8, price=11),
            _event(1, 3_000, auction=2, bidder=7, price=40),
        ],
    )
    variables = {
        **VARIABLES,
        "BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "EVENTS_TOPIC": events,
        "OUTPUT_TOPIC": output,
    }
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": PRICED_BIDS}, variables)
    start_dagger(spec).process_available()
    assert [json.loads(record.value()) for record in kafka.read_all(output)] == [
        {"auction": 1, "bidder": 8, "euros": 22, "dateTime": "2026-12-01T10:00:02.500Z"},
        {"auction": 2, "bidder": 7, "euros": 80, "dateTime": "2026-12-01T10:00:03.000Z"},
    ]


def test_a_script_s_window_closes_on_the_watermark_of_its_computed_event_time(tmp_path, kafka, start_dagger):
    events = kafka.new_topic("events")
    windows = (
        "CREATE TABLE counts (auction BIGINT, bids BIGINT, window_start TIMESTAMP(3)) "
        "WITH ('connector' = 'print');\n"
        "INSERT INTO counts SELECT auction, COUNT(*) AS bids, window_start\n"
        "FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))\n"
        "GROUP BY auction, window_start, window_end"
    )
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": windows}, variables)
    running = start_dagger(spec)
    rounds = [  # processed before the next is produced: the watermark moves between them
        [
            _event(1, 1_000, auction=1, bidder=7, price=5),
            _event(1, 9_000, auction=1, bidder=8, price=11),
            _event(1, 12_000, auction=1, bidder=9, price=12),
        ],
        [_event(0, 30_000, id=7)],  # a person's time moves the watermark too: to 26 s, past both windows
        [_event(1, 31_000, auction=2, bidder=7, price=5)],
    ]
    for events_of_round in rounds:
        kafka.produce(events, events_of_round)
        running.process_available()
    rows = [json.loads(line.split(" | ", 1)[1]) for line in running.logged]
    assert sorted(rows, key=lambda row: row["window_start"]) == [
        {"auction": 1, "bids": 2, "window_start": "2026-12-01T10:00:00+00:00"},
        {"auction": 1, "bids": 1, "window_start": "2026-12-01T10:00:10+00:00"},
    ]


def test_a_bounded_run_of_a_script_on_kafka_writes_every_window_as_flinks_does(tmp_path, kafka, start_dagger):
    # Nexmark's shape through Spark's Kafka connector: JSON, a computed event time, a view's WHERE.
    events = kafka.new_topic("events")
    windows = (
        "CREATE TABLE counts (auction BIGINT, bids BIGINT, window_start TIMESTAMP(3)) "
        "WITH ('connector' = 'print');\n"
        "INSERT INTO counts SELECT auction, COUNT(*) AS bids, window_start\n"
        "FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))\n"
        "GROUP BY auction, window_start, window_end"
    )
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": windows}, variables)
    kafka.produce(
        events,
        [
            _event(1, 1_000, auction=1, bidder=7, price=5),
            _event(1, 9_000, auction=1, bidder=8, price=11),
            _event(1, 12_000, auction=1, bidder=9, price=12),
            _event(0, 30_000, id=7),
            _event(1, 31_000, auction=2, bidder=7, price=5),
        ],
    )
    running = start_dagger(spec, bounded=True)
    assert running.run.wait(timeout_s=300) is True

    # The input's last watermark (31 s - 4 s) closes the first two windows; its end, as Flink's, the third.
    rows = [json.loads(line.split(" | ", 1)[1]) for line in running.logged]
    assert sorted(rows, key=lambda row: row["window_start"]) == [
        {"auction": 1, "bids": 2, "window_start": "2026-12-01T10:00:00+00:00"},
        {"auction": 1, "bids": 1, "window_start": "2026-12-01T10:00:10+00:00"},
        {"auction": 2, "bids": 1, "window_start": "2026-12-01T10:00:30+00:00"},
    ]


def test_an_aggregation_over_a_window_s_bounds_joined_back_closes_on_the_watermark(
    tmp_path, kafka, start_dagger
):
    # Nexmark q5's shape: each HOP window's counts joined with the window's largest count, grouped by its
    # bounds (Flink: a regular aggregation and join); its final rows come out as the watermark closes each
    # window, in an unbounded run.
    events = kafka.new_topic("events")
    hot = (
        "CREATE TABLE hot (auction BIGINT, num BIGINT, starttime TIMESTAMP(3))\n"
        "WITH ('connector' = 'print');\n"
        "INSERT INTO hot SELECT c.auction, c.num, c.starttime FROM (\n"
        "  SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime\n"
        "  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '5' SECOND, INTERVAL '10' SECOND))\n"
        "  GROUP BY auction, window_start, window_end) AS c\n"
        "JOIN (\n"
        "  SELECT MAX(p.num) AS maxn, p.starttime, p.endtime FROM (\n"
        "    SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime\n"
        "    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '5' SECOND, INTERVAL '10' SECOND))\n"
        "    GROUP BY auction, window_start, window_end) AS p\n"
        "  GROUP BY p.starttime, p.endtime) AS m\n"
        "ON c.starttime = m.starttime AND c.endtime = m.endtime AND c.num >= m.maxn"
    )
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": hot}, variables)
    assert spec.output_mode == "append"
    running = start_dagger(spec)
    bids = [(1, 1), (1, 2), (2, 3), (2, 4), (3, 7), (3, 8), (3, 9), (2, 12)]  # (auction, second)
    rounds = [  # processed before the next is produced: the watermark moves between them
        [_event(1, second * 1_000, auction=auction, bidder=7, price=5) for auction, second in bids],
        [_event(0, 30_000, id=7)],  # the watermark to 26 s, past the four windows of the bids
        [_event(1, 31_000, auction=4, bidder=7, price=5)],  # in windows still open
    ]
    for events_of_round in rounds:
        kafka.produce(events, events_of_round)
        running.process_available()
    rows = [json.loads(line.split(" | ", 1)[1]) for line in running.logged]
    at = "2026-12-01T{}+00:00".format
    assert sorted(rows, key=lambda row: (row["starttime"], row["auction"])) == [
        {"auction": 1, "num": 2, "starttime": at("09:59:55")},  # a tie: both rows
        {"auction": 2, "num": 2, "starttime": at("09:59:55")},
        {"auction": 3, "num": 3, "starttime": at("10:00:00")},
        {"auction": 3, "num": 3, "starttime": at("10:00:05")},
        {"auction": 2, "num": 1, "starttime": at("10:00:10")},
    ]


def test_select_star_of_a_script_s_table_gives_its_declared_columns_only(tmp_path, kafka, start_dagger):
    events = kafka.new_topic("events")
    kafka.produce(
        events, [_event(0, 1_500, id=7, name="Ann"), _event(1, 2_000, auction=1, bidder=7, price=5)]
    )
    everything = (
        "CREATE TABLE seen (event_type INT, person ROW<id BIGINT, name VARCHAR, `dateTime` TIMESTAMP(3)>,\n"
        "  bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3)>,\n"
        "  `dateTime` TIMESTAMP(3)) WITH ('connector' = 'print');\n"
        "INSERT INTO seen SELECT * FROM events WHERE event_type = 0"
    )
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    spec = load(tmp_path, {"ddl.sql": EVENTS_TABLE, "q.sql": everything}, variables)
    running = start_dagger(spec)
    running.process_available()
    at = "2026-12-01T10:00:01.500000+00:00"
    assert [json.loads(line.split(" | ", 1)[1]) for line in running.logged] == [
        {
            "event_type": 0,  # no kafka_topic, kafka_partition... after the declared columns
            "person": {"id": 7, "name": "Ann", "dateTime": at},
            "bid": None,
            "dateTime": at,
        }
    ]


LOGGED_BIDS = """
CREATE TABLE logged (auction BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), dt STRING, hm STRING)
PARTITIONED BY (dt, hm) WITH (
  'connector' = 'filesystem',
  'path' = 'file://${LAKE}',
  'format' = 'parquet',
  'sink.partition-commit.trigger' = 'partition-time',
  'sink.partition-commit.delay' = '1 min',
  'sink.partition-commit.policy.kind' = 'success-file',
  'partition.time-extractor.timestamp-pattern' = '$dt $hm:00',
  'sink.rolling-policy.rollover-interval' = '1min',
  'sink.rolling-policy.check-interval' = '1min'
);
INSERT INTO logged
SELECT auction, price, `dateTime`, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd'), DATE_FORMAT(`dateTime`, 'HH:mm')
FROM bid
"""


def test_a_partitioned_filesystem_table_is_written_in_flink_s_folders(tmp_path, kafka, start_dagger):
    events, lake = kafka.new_topic("events"), tmp_path / "lake"
    kafka.produce(
        events,
        [
            _event(1, 1_000, auction=1, bidder=7, price=15),
            _event(1, 2_500, auction=2, bidder=8, price=25),
            _event(1, 63_000, auction=1, bidder=9, price=35),
        ],
    )
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    spec = load(
        tmp_path,
        {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": LOGGED_BIDS},
        {**variables, "LAKE": str(lake)},
    )
    assert spec.sinks[0].model_dump(exclude_defaults=True) == {
        "kind": "parquet",
        "path": str(lake),
        "partition_columns": ["dt", "hm"],
    }
    start_dagger(spec).process_available()
    folders = {
        str(file.parent.relative_to(lake)): pq.read_table(file).to_pylist()
        for file in lake.rglob("part-*.parquet")
    }
    at = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert folders == {  # ':' escaped as Flink names the folder; dt and hm in the folders, not the files
        "dt=2026-12-01/hm=10%3A00": [
            {"auction": 1, "price": 15, "dateTime": at.replace(second=1)},
            {"auction": 2, "price": 25, "dateTime": at.replace(second=2, microsecond=500_000)},
        ],
        "dt=2026-12-01/hm=10%3A01": [{"auction": 1, "price": 35, "dateTime": at.replace(minute=1, second=3)}],
    }


def test_a_partitioned_csv_table_is_written_as_flink_s_csv_text(tmp_path, kafka, start_dagger):
    events, lake = kafka.new_topic("events"), tmp_path / "lake"
    kafka.produce(
        events,
        [_event(1, 1_000, auction=1, bidder=7, price=15), _event(1, 62_500, auction=2, bidder=8, price=25)],
    )
    variables = {**VARIABLES, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "EVENTS_TOPIC": events}
    csv = LOGGED_BIDS.replace("'format' = 'parquet'", "'format' = 'csv'")  # as Nexmark's q10 writes
    spec = load(
        tmp_path,
        {"ddl.sql": EVENTS_TABLE, "views.sql": BID_VIEW, "q.sql": csv},
        {**variables, "LAKE": str(lake)},
    )
    start_dagger(spec).process_available()
    # Flink 2.3 writes these lines: a timestamp quoted (its space), its fraction without trailing zeros.
    assert {str(file.relative_to(lake)): file.read_text() for file in lake.rglob("part-*.csv")} == {
        "dt=2026-12-01/hm=10%3A00/part-b0000000000-t00000.csv": '1,15,"2026-12-01 10:00:01"\n',
        "dt=2026-12-01/hm=10%3A01/part-b0000000000-t00000.csv": '2,25,"2026-12-01 10:01:02.5"\n',
    }

"""The Nexmark oracle: each Nexmark query on Apache Flink and as a dagger, over the same generated events in
one Apache Kafka topic, and whether their rows are the same.

    python -m jobs.tools.nexmark.oracle --events 3000 [--kafka BOOTSTRAP] [--queries DIR] [--only q0,q7]

The pieces, which the tests (tests/test_nexmark_oracle.py) and the benchmarks use one by one:

- `generate` writes the generator's events (`jobs.tools.nexmark`) into one topic of one partition, as
  Nexmark's Kafka set-up has them;
- `FlinkNexmark` runs the queries on Apache Flink 2.3 (PyFlink in build/flink-venv, with Flink's Kafka SQL
  connector that `make test` resolves into build/flink-bench/libs), one process for all of them
  (`flink_job.py`): each reads the topic to the records there when it starts and ends with Flink's final
  watermark;
- `NexmarkScripts` makes each query's dagger file (`script:` the DDL, the views and `qN.sql`), and
  `dagger_rows` runs it bounded, on a given Spark session, through the dagger's own Kafka source, with its
  sink swapped for a log sink whose rows it keeps;
- `comparable` puts both sides' rows in one form: a sorted multiset, each value tagged with its type.

A query whose rows update (an aggregation without a window, a Top-N) is compared as its final table: on
Flink the changelog applied, on the dagger the last row of each key of `UPSERT_KEYS`, or, where the dagger's
rows are a changelog (their change kind in the column `__change`: q6's OVER over a Top-N), that changelog
applied. The query files are
the project's own (`queries/`, the same queries as Nexmark's `nexmark-flink/src/main/resources/queries`,
written anew); `--queries DIR` runs Nexmark's own files instead (its `ddl_kafka.sql` reads the topic
`nexmark`, the default here).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from jobs.model.errors import DaggerBuildError, DaggerQueryError
from jobs.model.spec import DaggerConfigError, DaggerSpec, load_dagger
from jobs.project import BUILD_DIR
from jobs.raystack.flink_sql.changelog import CHANGE_COLUMN
from jobs.running.runner import DaggerRun, build_dagger
from jobs.sinks.log.config import LogSink
from jobs.tools.flink_process import FlinkResults
from jobs.tools.flink_rows import spark_tagged
from jobs.tools.nexmark.config import NexmarkConfig
from jobs.tools.nexmark.generator import NexmarkGenerator
from jobs.tools.nexmark.kafka_writer import KafkaEventWriter

QUERIES_DIR = Path(__file__).resolve().parent / "queries"
QUERY_IDS = tuple(f"q{number}" for number in range(24))
DDL_FILES = ("ddl_kafka.sql", "ddl_views.sql")
TABLE = "kafka"
"""The table over the topic, as Nexmark's DDL names it (its views read `${NEXMARK_TABLE}`)."""
FLINK_JOB = Path(__file__).resolve().parent / "flink_job.py"
FLINK_KAFKA_LIBS = BUILD_DIR / "flink-bench" / "libs"
"""Flink's Kafka SQL connector (flink-sql-connector-kafka 5.0.0-2.2, built for Flink 2.2, runs on 2.3)."""

SIDE_INPUT_FILE = "side_input.txt"
SIDE_INPUT_KEYS = 10_000
"""q13's side table (`${NEXMARK_DIR}/side_input.txt`): a key and a value per line, keys 0 to 9,999."""

UPSERT_KEYS: dict[str, tuple[str, ...]] = {
    "q4": ("id",),
    "q9": ("id",),
    "q15": ("day",),
    "q16": ("channel", "day"),
    "q17": ("auction", "day"),
    "q18": ("auction", "bidder"),
    "q19": ("auction", "rank_number"),
}
"""The key of each query whose rows update: its final table holds the last row of each key."""


BATCHES = 3
"""Micro-batches the dagger reads the topic in, by default: as a running dagger reads it, so that state an
operator drops between batches shows (one batch hides it)."""


def batch_size(num_events: int, batches: int = BATCHES) -> int:
    """Records per micro-batch that read `num_events` in `batches` batches."""
    return -(-num_events // batches)


def script_files(queries_dir: Path, query_id: str) -> list[Path]:
    """A query's script in `queries_dir`: the DDL, the views, then `qN.sql`."""
    return [queries_dir / name for name in (*DDL_FILES, f"{query_id}.sql")]


@dataclass(frozen=True)
class NexmarkScripts:
    """Where the queries' files are, the topic they read, the folder their dagger files go to, and the jars
    of the functions the scripts declare (q14's `count_char`), which both engines are given."""

    bootstrap_servers: str
    topic: str
    work_dir: Path
    queries_dir: Path = QUERIES_DIR
    function_jars: tuple[Path, ...] = ()
    """The jars a script's `CREATE FUNCTION` classes load from: Flink's `pipeline.jars`, the dagger's
    `functions.java_udfs.jars`. A class written as Flink's ScalarFunction needs Flink's flink-table-common
    and flink-core jars among them for the dagger (Flink has its own)."""
    max_records_per_batch: int | None = None
    """The dagger reads the topic in micro-batches of at most this many records (unset: one batch; the
    tests and the command read the events in `BATCHES`, `batch_size`). Several batches are how a dagger
    runs in production, and they show what one batch hides: state a later batch still needs, dropped by
    an earlier one."""

    def __post_init__(self) -> None:
        # q13's side table, a CSV file both engines look up: one row per auction id modulo 10,000.
        self.work_dir.mkdir(parents=True, exist_ok=True)
        lines = (f"{key},side-{key}\n" for key in range(SIDE_INPUT_KEYS))
        (self.work_dir / SIDE_INPUT_FILE).write_text("".join(lines), encoding="utf-8")

    @property
    def variables(self) -> dict[str, str]:
        """The scripts' `${NAME}` values (Nexmark's own files use the first two, and `NEXMARK_DIR` in q10
        and q13 for the files they write and read)."""
        return {
            "BOOTSTRAP_SERVERS": self.bootstrap_servers,
            "NEXMARK_TABLE": TABLE,
            "NEXMARK_TOPIC": self.topic,
            "NEXMARK_DIR": str(self.work_dir),
        }

    def files(self, query_id: str) -> list[Path]:
        """The query's script: the DDL, the views, then `qN.sql`."""
        return script_files(self.queries_dir, query_id)

    def dagger_file(self, query_id: str) -> Path:
        """The query's dagger file (written here), as a user would keep it: its script and variables."""
        path = self.work_dir / f"nexmark-{query_id}.yaml"
        document = {
            "name": f"nexmark-{query_id}",
            "script": [str(file) for file in self.files(query_id)],
            "variables": self.variables,
            "checkpoint_location": str(self.work_dir / "checkpoints" / query_id),
        }
        if self.function_jars:
            document["functions"] = {"java_udfs": {"jars": [str(jar) for jar in self.function_jars]}}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    def dagger(self, query_id: str) -> DaggerSpec:
        """The query as a dagger whose rows can be read back: its sink a log sink that keeps every row.
        Raises `DaggerConfigError` when the dagger refuses the script (the reason names file and line)."""
        spec = load_dagger(self.dagger_file(query_id))
        streams = [
            stream.model_copy(update={"max_records_per_batch": self.max_records_per_batch})
            for stream in spec.streams
        ]
        sink = LogSink(kind="log", max_rows_per_batch=1_000_000)
        return spec.model_copy(update={"streams": streams, "sinks": [sink]})


def generate(bootstrap_servers: str, topic: str, config: NexmarkConfig) -> int:
    """Writes `config`'s events into `topic`, made here, of one partition (in generation order); returns
    how many. The topic keeps its records whatever their time: they carry their event times as Kafka
    timestamps, 2015's with the generator's default base time, which a broker's retention by time (7 days
    by default) would delete within a minute."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 3})
    if topic in admin.list_topics(timeout=30).topics:
        raise ValueError(f"topic {topic} exists: the oracle writes its events into a topic of its own")
    for future in admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "-1"})]).values():
        future.result(timeout=30)
    writer = KafkaEventWriter(bootstrap_servers, topic, partitions=1)
    for event in NexmarkGenerator(config).events():
        writer.write(event)
    writer.close()
    return writer.written


class FlinkNexmark(FlinkResults):
    """The queries running on Flink in a process of their own, started at once: `result` waits for one
    query's result, which Flink may still be computing. `quick_compiler`: as `FlinkResults`'s."""

    def __init__(
        self,
        scripts: NexmarkScripts,
        query_ids: Iterable[str],
        timeout_s: float = 1800,
        quick_compiler: bool = True,
    ) -> None:
        jars = sorted(FLINK_KAFKA_LIBS.glob("flink-sql-connector-kafka-*.jar"))
        if not jars:
            raise FileNotFoundError(
                f"Flink's Kafka connector is not in {FLINK_KAFKA_LIBS}: `make test` puts it"
            )
        job = {
            "jars": [str(jar) for jar in scripts.function_jars],
            "table": TABLE,
            "scripts": [
                {
                    "id": query,
                    "files": [str(path) for path in scripts.files(query)],
                    "variables": scripts.variables,
                }
                for query in query_ids
            ],
        }
        super().__init__(
            FLINK_JOB,
            job,
            scripts.work_dir / "flink",
            timeout_s,
            lib_jars=jars,
            quick_compiler=quick_compiler,
        )


def comparable(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    """Rows as a sorted multiset, with their column names."""
    return {"columns": list(columns), "rows": [json.loads(row) for row in sorted(map(json.dumps, rows))]}


def dagger_rows(
    spark: SparkSession,
    spec: DaggerSpec,
    upsert_key: Sequence[str] = (),
    timeout_s: float = 600,
    on_row: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """The dagger's rows out of a bounded run (its final table by `upsert_key` when it has one), or
    `{"error": ...}` when it cannot be built or its query fails. `on_row` is called as each row reaches the
    sink (the Nexmark benchmark times the first and the last)."""
    logged: list[str] = []

    def emit(line: str) -> None:
        logged.append(line)
        if on_row is not None:
            on_row()

    try:
        run = DaggerRun(spark, build_dagger(spark, spec, log_emit=emit), bounded=True)
    except DaggerBuildError as error:
        return {"error": f"refused before the start: {error}"}
    run.start()
    try:
        if not run.wait(timeout_s=timeout_s):
            return {"error": f"the bounded run did not end in {timeout_s} s"}
    except DaggerQueryError as error:
        return {"error": f"failed while running: {error}"}
    finally:
        run.stop()
    fields = [field for field in run.built.result.schema.fields if field.name != CHANGE_COLUMN]
    rows, last_of_key, table = [], {}, Counter()
    for line in logged:
        values = json.loads(line.split(" | ", 1)[1])
        rows.append([spark_tagged(values[field.name], field.dataType) for field in fields])
        last_of_key[tuple(values[name] for name in upsert_key)] = rows[-1]
        if CHANGE_COLUMN in values:
            table[json.dumps(rows[-1])] += 1 if values[CHANGE_COLUMN] in ("+I", "+U") else -1
    if any(count < 0 for count in table.values()):
        return {"error": "the changelog retracts a row it never added"}
    if table:
        rows = [json.loads(row) for row, count in table.items() for _ in range(count)]
    return comparable([field.name for field in fields], last_of_key.values() if upsert_key else rows)


def flink_rows(result: dict[str, Any], upsert_key: tuple[str, ...] = ()) -> dict[str, Any]:
    """Flink's result in `comparable`'s form (its error as it is); with an `upsert_key`, the last row of
    each key: Flink sends a Top-N that leaves its row number out as updates of its partition key alone
    (UPDATE_AFTER without UPDATE_BEFORE), which replace the key's earlier row."""
    if "error" in result:
        return result
    rows = result["rows"]
    if upsert_key:
        positions = [result["columns"].index(name) for name in upsert_key]
        last_of_key = {json.dumps([row[position] for position in positions]): row for row in rows}
        rows = list(last_of_key.values())
    return comparable(result["columns"], rows)


def verdict(flink: dict[str, Any], dagger: dict[str, Any]) -> str:
    """`identical`, `different`, or which side could not run the query and why."""
    if "error" in dagger:
        return f"dagger: {' '.join(dagger['error'].split())[:400]}"
    if "error" in flink:
        return f"Flink: {' '.join(flink['error'].split())[:400]}"
    if not flink["rows"]:
        return "compares nothing: no rows on Flink"
    return "identical" if flink == dagger else "different"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.tools.nexmark.oracle", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=3000, help="events to generate (default 3000)")
    parser.add_argument("--rate", type=int, default=100, help="events per second of event time (default 100)")
    parser.add_argument(
        "--kafka", metavar="BOOTSTRAP", help="a Kafka cluster (default: a local node started here)"
    )
    parser.add_argument("--topic", default="nexmark", help="the topic (default nexmark, as Nexmark's DDL)")
    parser.add_argument(
        "--queries", type=Path, default=QUERIES_DIR, help="a folder of ddl_kafka.sql, ddl_views.sql, qN.sql"
    )
    parser.add_argument(
        "--config", type=Path, help="YAML or JSON file of NexmarkConfig fields (the flags win)"
    )
    parser.add_argument("--only", help="comma-separated query ids (default: all 24)")
    parser.add_argument(
        "--function-jar",
        type=Path,
        action="append",
        default=[],
        help="a jar of the scripts' CREATE FUNCTION classes, given to both engines (repeatable; q14's "
        "count_char, with Flink's flink-table-common and flink-core jars for a ScalarFunction)",
    )
    parser.add_argument(
        "--max-records-per-batch",
        type=int,
        help=f"the dagger reads the topic in micro-batches of at most this many records (default: the events "
        f"in {BATCHES} batches)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=BUILD_DIR / "nexmark-oracle",
        help="dagger files, checkpoints, Flink's results",
    )
    arguments = parser.parse_args(argv)
    query_ids = arguments.only.split(",") if arguments.only else list(QUERY_IDS)
    missing = [
        str(path)
        for query in query_ids
        for path in script_files(arguments.queries, query)
        if not path.exists()
    ] + [str(jar) for jar in arguments.function_jar if not jar.is_file()]
    if missing:
        parser.error(f"no such query or jar file(s): {', '.join(missing)}")
    from jobs.engine.spark import spark_session
    from jobs.tools.broker import LocalKafka

    broker = None if arguments.kafka else LocalKafka().start()
    try:
        bootstrap = arguments.kafka or broker.bootstrap_servers
        fields = yaml.safe_load(arguments.config.read_text(encoding="utf-8")) if arguments.config else {}
        config = NexmarkConfig.model_validate(
            {
                **fields,
                "num_events": arguments.events,
                "first_event_rate": arguments.rate,
                "next_event_rate": arguments.rate,
            }
        )
        print(f"{generate(bootstrap, arguments.topic, config)} events in {arguments.topic}", flush=True)
        scripts = NexmarkScripts(
            bootstrap,
            arguments.topic,
            arguments.work_dir.resolve(),
            arguments.queries.resolve(),
            tuple(jar.resolve() for jar in arguments.function_jar),
            arguments.max_records_per_batch or batch_size(config.num_events),
        )
        flink = FlinkNexmark(scripts, query_ids)
        spark = spark_session(
            "local[2]", app_name="nexmark-oracle", extra_conf={"spark.sql.shuffle.partitions": "2"}
        )
        outcomes: dict[str, Any] = {}
        try:
            for query in query_ids:
                try:
                    ours = dagger_rows(spark, scripts.dagger(query), UPSERT_KEYS.get(query, ()))
                except DaggerConfigError as error:
                    ours = {"error": f"refused: {error}"}
                theirs = flink_rows(flink.result(query), UPSERT_KEYS.get(query, ()))
                rows = f"{len(theirs.get('rows', []))} rows on Flink, {len(ours.get('rows', []))} as a dagger"
                outcomes[query] = {"verdict": verdict(theirs, ours), "flink": theirs, "dagger": ours}
                print(f"{query}: {outcomes[query]['verdict']} ({rows})", flush=True)
            (scripts.work_dir / "results.json").write_text(json.dumps(outcomes, indent=1))
            print(f"both sides' rows: {scripts.work_dir / 'results.json'}")
        finally:
            flink.stop()
            spark.stop()
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

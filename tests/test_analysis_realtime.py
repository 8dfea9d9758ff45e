"""Real-time analytics end to end: events sent to the Collection API are counted by a running dagger into a
continuous table, and the Analysis API answers with exact counts within the dagger's trigger interval plus
one micro-batch (PostgreSQL, Apache Kafka, Spark; no stand-ins).

"Within" is observed, not timed: when the collector acknowledges the events, the table's ledger says which
micro-batch was applied last (B). The batch running then may have fixed its offsets before the events
arrived; the next one reads them. So the counts must be exact once batch B + 2 is applied, at the latest.
"""

from __future__ import annotations

import collections

import psycopg
import yaml

from jobs.analysis.engine import AnalysisEngine
from jobs.analysis.project import load_projects
from jobs.collection.delivery import topic_of

TRIGGER = "1s"
PAGES = ["/", "/cart", "/help", "/pay"]


def clicks(first: int, count: int) -> list[dict]:
    return [
        {"page": PAGES[index % len(PAGES) if index % 3 else 0], "at": f"2026-11-26T10:{index % 60:02d}:00Z"}
        for index in range(first, first + count)
    ]


def last_applied_batch(database_url: str, table: str) -> int:
    with psycopg.connect(database_url) as connection:
        row = connection.execute(
            "SELECT max(batch_id) FROM continuous_tables.applied_batches WHERE table_name = %s", (table,)
        ).fetchone()
    return -1 if row is None or row[0] is None else row[0]


def test_collected_events_are_counted_exactly_within_one_micro_batch(
    collector, kafka, make_dagger, start_dagger, spark, tmp_path
):
    project, write_key = collector.new_project("live")
    spec = make_dagger(
        trigger_interval=TRIGGER,
        output_mode="update",
        streams=[
            {
                "kind": "kafka",
                "table": "clicks",
                "topics": [topic_of(project, "click")],
                "format": "avro",
                "schema_registry_url": collector.database_url,
                "event_time_field": "at",
                "bootstrap_servers": kafka.bootstrap_servers,
                "auto_offset_reset": "earliest",
            }
        ],
        sql="SELECT page, count(*) AS clicks FROM clicks GROUP BY page",
        sinks=[
            {
                "kind": "continuous_table",
                "project": project,
                "name": "clicks_per_page",
                "key": ["page"],
                "database": collector.database_url,
            }
        ],
    )
    folder = tmp_path / "analysis"
    folder.mkdir()
    document = {"project": project, "lake": str(tmp_path / "lake"), "tables": str(tmp_path / "tables")}
    (folder / f"{project}.yaml").write_text(yaml.safe_dump({**document, "database": collector.database_url}))
    engine = AnalysisEngine(spark, load_projects(folder))
    table = f"{project}.clicks_per_page"

    sent = clicks(0, 40)
    collector.collect(write_key, "click", sent)  # the collection's schema exists before the dagger starts
    running = start_dagger(spec)
    for round_number, count in enumerate((25, 60, 7), start=1):
        acknowledged_after = last_applied_batch(collector.database_url, table)
        new = clicks(len(sent), count)
        collector.collect(write_key, "click", new)
        sent += new
        expected = sorted(collections.Counter(click["page"] for click in sent).items())
        while True:
            applied = last_applied_batch(collector.database_url, table)
            answer = engine.execute(project, "SELECT * FROM continuous.clicks_per_page ORDER BY page")
            counted = [(row["page"], row["clicks"]) for row in answer.rows.to_pylist()]
            if counted == expected:
                break
            assert applied <= acknowledged_after + 2, (
                f"round {round_number}: batch {applied} applied, {acknowledged_after} when the collector "
                f"acknowledged, and the counts are still {counted}, not {expected}"
            )
            running.assert_still_running(poll_s=0.2)
        # Exactly the counts, and by batch B + 2 at the latest (checked on every read above).
        assert counted == expected

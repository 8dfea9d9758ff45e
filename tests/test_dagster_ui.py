"""The Dagster UI in a real browser (Debian's Chromium, driven by playwright-core): a user opens the
example dagger's asset graph, clicks "Materialize all", watches the streaming run in progress, sees its
live invalid-records check fail (the topic holds an undecodable record and the threshold is 0) while the
run goes on, terminates it and sees it stopped, then rewinds the dagger to the start of its topic from the
job's launchpad. What the browser showed is checked against the instance: the run ended SUCCESS after a
graceful stop, saying where it stopped, the dagger delivered its rows, and the rewind made a new
checkpoint generation that delivered them again. Screenshots land in `test-artifacts/ui/`."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC
from pathlib import Path

import numpy
import pytest
import yaml
from dagster import AssetKey, DagsterRunStatus

from dagger_assets.stages import STOPPED_TAG
from jobs.model.schema_registry import SchemaRegistry
from jobs.model.spec import load_dagger
from jobs.project import PROJECT_ROOT
from jobs.running.checkpoints import INITIAL, CheckpointGenerations
from jobs.tools.generator import BookingProducer, booking_batch

UI_DRIVER = PROJECT_ROOT / "tests" / "ui" / "dagster_flow.mjs"
ARTIFACTS = PROJECT_ROOT / "test-artifacts" / "ui"
BOOKINGS = 30  # every third booking is a GO_RIDE, which the example dagger keeps
FAILING_CHECK = "invalid_records_below_threshold"
DRIVER_TIMEOUT_S = 600  # beyond the sum of the driver's own step timeouts, so its message names the step


@pytest.fixture
def dagster_env(kafka) -> dict[str, str]:
    return {"KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}


def install_example_dagger(
    folder: Path, descriptor_set: Path, checkpoint: Path, topics: dict[str, str]
) -> None:
    """The example dagger as shipped, on this test's topics, descriptor set and checkpoint."""
    document = yaml.safe_load((PROJECT_ROOT / "daggers" / "booking_filter.yaml").read_text())
    document["schema_registry"]["descriptor_sets"] = [str(descriptor_set)]
    document["streams"][0]["topics"] = [topics["input"]]
    document["sinks"][1]["topic"] = topics["output"]
    document["checkpoint_location"] = str(checkpoint)
    document["checks"] = {"live_interval": "2s", "max_invalid_ratio": 0}
    (folder / "booking_filter.yaml").write_text(yaml.safe_dump(document, sort_keys=False))


@pytest.mark.slow
def test_a_user_launches_watches_and_terminates_a_dagger_in_the_ui(
    dagster, kafka, registry: SchemaRegistry, descriptor_set: Path, tmp_path: Path
):
    topics = {"input": kafka.new_topic("ui-bookings"), "output": kafka.new_topic("ui-summaries")}
    install_example_dagger(dagster.daggers, descriptor_set, tmp_path / "checkpoint", topics)
    producer = BookingProducer(kafka.bootstrap_servers, topics["input"], registry)
    bookings = booking_batch(0, BOOKINGS)
    producer.produce(bookings)
    producer.flush()
    producer.close()
    kafka.produce(topics["input"], [b"\xff\xff\xff"])  # undecodable: dropped, counted, and over the threshold
    dagster.wait_until_up()

    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # a screenshot left by an earlier run would mislead
    # Back to offset 0 of the input, as a bounded run: it completes once it has caught up.
    rewind = {"rewind": {"to_offsets": {topics["input"]: {"0": 0}}}, "bounded": True}
    run_config = json.dumps({"ops": {"booking_filter_query": {"config": rewind}}})  # JSON is flow YAML
    driven = subprocess.run(
        ["node", str(UI_DRIVER), f"http://127.0.0.1:{dagster.port}", "booking_filter", str(ARTIFACTS),
         FAILING_CHECK, "booking_filter_job", run_config],
        cwd=UI_DRIVER.parent, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S,
    )  # fmt: skip
    assert driven.returncode == 0, f"{driven.stderr}\n(screenshots in {ARTIFACTS})"
    seen = json.loads(driven.stdout.strip().splitlines()[-1])

    run = dagster.instance.get_run_by_id(seen["run_id"])
    assert dagster.stopped(run.run_id)
    assert seen["stopped_line"].endswith(run.tags[STOPPED_TAG])
    messages = [entry.user_message for entry in dagster.instance.all_logs(run.run_id)]
    assert any("finishing the current micro-batch" in message for message in messages)
    # A stop, not an error: the step succeeded.
    entries = dagster.instance.all_logs(run.run_id)
    events = [entry.dagster_event.event_type_value for entry in entries if entry.dagster_event]
    assert "STEP_SUCCESS" in events and "STEP_FAILURE" not in events
    observed = dagster.instance.fetch_observations(AssetKey(["booking_filter", "sql"]), limit=100).records
    invalid = [
        record.asset_observation.metadata["invalid_records"].value
        for record in observed
        if record.run_id == run.run_id  # the rewind's run read the record again
    ]
    assert sum(sum(counts.values()) for counts in invalid) == 1  # what turned the live check red
    first_batch = [message for message in messages if message.startswith("batch 0 | ")]
    assert len(first_batch) == 3  # the example dagger's log sink shows max_rows_per_batch rows
    # As the browser showed it: a FLOAT as protobuf prints it, an instant with its zone.
    shown = json.loads(seen["first_log_line"].split(" | ", 1)[1])
    booking = next(row for row in bookings.to_pylist() if row["order_number"] == shown["order_number"])
    assert str(shown["amount_paid_by_cash"]) == str(numpy.float32(booking["amount_paid_by_cash"]))
    assert shown["event_timestamp"] == booking["event_timestamp"].astimezone(UTC).isoformat()  # +00:00
    rewound = dagster.instance.get_run_by_id(seen["launched_run_id"])
    assert rewound.status == DagsterRunStatus.SUCCESS
    assert rewound.run_config["ops"]["booking_filter_query"]["config"]["rewind"] == rewind["rewind"]
    generations = CheckpointGenerations(load_dagger(dagster.daggers / "booking_filter.yaml")).list()
    assert len(generations) == 2 and generations[0].name == INITIAL
    # The Kafka sink is at-least-once: a rewind delivers the rewound records again.
    assert len(kafka.read_all(topics["output"])) == 2 * (BOOKINGS // 3)
    # graph, run in progress, failing check, run stopped, launchpad, rewind succeeded
    assert len(seen["screenshots"]) == 6
    for screenshot in map(Path, seen["screenshots"]):
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert screenshot.stat().st_size > 20_000  # a rendered page, not a blank one

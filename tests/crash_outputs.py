"""What a crash run leaves behind, read back: the Kafka sink's topic as read_committed readers see it and
against the sink's own markers (`read_kafka_output`), the Parquet lake's committed files
(`read_lake_output`), each sink's rows tallied against the expected ones (`Tally`), and where the query's
checkpoint stands (`CheckpointState`, `committed_end_offsets`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from jobs.model.schema_registry import SchemaRegistry
from tests.conftest import KafkaHelper, message_class
from tests.crash_orders import ORDER, OutputRow
from tests.test_kafka_exactly_once import headers, marked, markers


@dataclass(frozen=True)
class Tally:
    """A sink's committed output against the expected output."""

    sink: str
    kills: str
    """What the sink went through, e.g. `20 kills (3 mid-batch, 2 in recovery, 9 with workers)`."""
    missing: int
    duplicated: int
    unexpected: int
    rows: int

    @classmethod
    def of(cls, sink: str, kills: str, expected: Counter[OutputRow], actual: list[OutputRow]) -> Tally:
        seen = Counter(actual)
        return cls(
            sink=sink,
            kills=kills,
            missing=sum(1 for row in expected if row not in seen),
            duplicated=sum(count - 1 for row, count in seen.items() if row in expected and count > 1),
            unexpected=sum(count for row, count in seen.items() if row not in expected),
            rows=len(actual),
        )

    @property
    def exact(self) -> bool:
        return self.missing == self.duplicated == self.unexpected == 0

    def line(self) -> str:
        extra = f", {self.unexpected} unexpected" if self.unexpected else ""
        return (
            f"{self.sink}: {self.kills}, {self.missing} missing, {self.duplicated} duplicated"
            f"{extra} ({self.rows} committed rows)"
        )


@dataclass(frozen=True)
class KafkaOutput:
    committed: list[OutputRow]
    """The rows a read_committed consumer sees."""
    attempts: int
    """Attempts that wrote rows."""
    cut_short: int
    """Attempts whose rows are there but whose marker is not: aborted or killed transactions."""
    incomplete_markers: list[str]
    """Markers whose attempt has fewer or more rows than the marker counts (a loss, or a bug)."""
    markers: list[dict]
    """The markers, in the order the marker topic holds them."""
    hidden: int
    """Rows of attempts with a marker that read_committed consumers do not see (must be 0)."""
    uncommitted_visible: int
    """Rows of attempts without a marker that read_committed consumers see (must be 0)."""

    def where_missing(self, missing: Iterable[OutputRow], lake: LakeOutput) -> list[str]:
        """For rows the Kafka sink lacks: the lake file that holds each, and the Kafka markers of that
        batch, so that a failure tells a skipped task from a short one."""
        by_file = Counter(lake.files.get(row, "no lake file") for row in missing)
        lines = []
        for name, count in sorted(by_file.items()):
            batch = lake_batch_id(name) if name.startswith("part-b") else None
            batch_markers = [
                f"p{marker['partition']} {marker['records']} rows (attempt {marker['attempt'][:8]})"
                for marker in self.markers
                if marker["batch"] == batch
            ]
            lines.append(
                f"{count} missing in lake file {name}; kafka markers of that batch: "
                f"{', '.join(batch_markers) or 'none'}"
            )
        return lines


def read_kafka_output(kafka: KafkaHelper, registry: SchemaRegistry, topic: str) -> KafkaOutput:
    """The sink's topic as a read_committed consumer sees it, and everything written to it (aborted and
    killed transactions included) read_uncommitted, compared through the sink's markers."""
    visible = kafka.read_all(topic, isolation_level="read_committed")
    everything = kafka.read_all(topic)
    marker_list = markers(kafka, topic)
    decode = message_class(registry, ORDER).FromString
    committed = []
    for record in visible:
        order = decode(record.value())
        committed.append((order.order_id, order.customer_id, order.amount, order.created_at.seconds))
    rows_per_attempt = Counter(headers(record)["dagger.attempt"] for record in everything)
    visible_per_attempt = Counter(headers(record)["dagger.attempt"] for record in visible)
    marked_attempts = {marker["attempt"] for marker in marker_list}
    incomplete = [
        f"batch {marker['batch']} partition {marker['partition']}: marker counts {marker['records']}, "
        f"{rows_per_attempt[marker['attempt']]} rows carry its attempt"
        for marker in marker_list
        if rows_per_attempt[marker["attempt"]] != marker["records"]
    ]
    return KafkaOutput(
        committed=committed,
        attempts=len(rows_per_attempt),
        cut_short=len(rows_per_attempt.keys() - marked_attempts),
        incomplete_markers=incomplete,
        markers=marker_list,
        hidden=len(marked(everything, marker_list)) - len(marked(visible, marker_list)),
        uncommitted_visible=sum(
            count for attempt, count in visible_per_attempt.items() if attempt not in marked_attempts
        ),
    )


@dataclass(frozen=True)
class LakeOutput:
    committed: list[OutputRow]
    uncommitted_files: int
    """Visible files of batches without a committed marker (a crashed batch not yet replayed)."""
    files: dict[OutputRow, str] = field(default_factory=dict)
    """The committed file each row is in (its name tells the batch and the task)."""


def lake_batch_id(path: str) -> int:
    """The batch id in a lake file's name: `part-b0000000042-t00001.parquet` -> 42."""
    name = Path(path).name
    return int(name.removeprefix("part-b").split("-", 1)[0])


def numbered_files(folder: Path) -> set[int]:
    """The batch ids named by the files of a marker or checkpoint folder (`42`, not `.42.crc`)."""
    return {int(path.name) for path in folder.iterdir() if path.name.isdigit()} if folder.is_dir() else set()


def read_lake_output(lake: Path) -> LakeOutput:
    started = numbered_files(lake / "_dagger" / "started")
    committed = numbered_files(lake / "_dagger" / "committed")
    latest = max(committed, default=-1)

    def is_committed(batch: int) -> bool:
        # A batch older than the newest committed one whose markers are gone was pruned after its commit.
        return batch in committed or (batch < latest and batch not in started)

    rows: list[OutputRow] = []
    files: dict[OutputRow, str] = {}
    uncommitted = 0
    dataset = ds.dataset(lake, format="parquet", partitioning="hive")  # skips `_` and `.` entries
    for fragment in dataset.get_fragments():
        if not is_committed(lake_batch_id(fragment.path)):
            uncommitted += 1
            continue
        table = fragment.to_table(columns=["order_id", "customer_id", "amount", "created_at"])
        epoch_seconds = table["created_at"].cast(pa.timestamp("s")).cast(pa.int64())
        fragment_rows = list(
            zip(
                table["order_id"].to_pylist(),
                table["customer_id"].to_pylist(),
                table["amount"].to_pylist(),
                epoch_seconds.to_pylist(),
                strict=True,
            )
        )
        rows += fragment_rows
        files.update(dict.fromkeys(fragment_rows, Path(fragment.path).name))
    return LakeOutput(committed=rows, uncommitted_files=uncommitted, files=files)


@dataclass(frozen=True)
class CheckpointState:
    planned: int
    """Latest batch whose offsets are logged (-1: none)."""
    committed: int
    """Latest batch the checkpoint recorded as done (-1: none)."""

    @property
    def mid_batch(self) -> bool:
        return self.planned > self.committed

    @classmethod
    def read(cls, checkpoint: Path) -> CheckpointState:
        planned, committed = numbered_files(checkpoint / "offsets"), numbered_files(checkpoint / "commits")
        return cls(max(planned, default=-1), max(committed, default=-1))


def committed_end_offsets(checkpoint: Path) -> int:
    """Records the query has read to the end of its latest committed batch (all partitions)."""
    state = CheckpointState.read(checkpoint)
    if state.committed < 0:
        return 0
    lines = (checkpoint / "offsets" / str(state.committed)).read_text().splitlines()
    source_offsets = json.loads(lines[2])  # version, batch metadata, then the one source's offsets
    return sum(offset for partitions in source_offsets.values() for offset in partitions.values())

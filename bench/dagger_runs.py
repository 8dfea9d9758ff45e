"""The dagger side of a benchmark: `run_to_end` runs a dagger over a backlog and keeps Spark's progress of
every micro-batch, so `PipelineResult` can say where the time went (`durationMs`), measured per batch, and
which processes used the CPU meanwhile (`bench.processes.CpuMeter`: driver, JVM, Python workers, broker);
`KafkaDagger` is a throughput benchmark's dagger, and `run_fresh_and_warm` runs one twice, in a fresh and
in a warmed-up Spark session. `sink_only_dagger` is the sink benchmarks' dagger."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench.common import PARTITIONS
from bench.hand_loop import BaselineResult
from bench.processes import CpuMeter
from bench.report import ThroughputTargets, batch_breakdown, time_shares
from jobs.engine.spark import spark_session
from jobs.model.schema_registry import SchemaRegistry
from jobs.model.spec import DaggerSpec, parse_dagger
from jobs.running.progress import ProgressReport
from jobs.running.runner import DaggerRun, build_dagger
from jobs.tools.generator import BOOKING_MESSAGE, ensure_topic


@dataclass
class PipelineResult:
    wall_seconds: float
    progress: list[dict[str, Any]]
    """The query's progress events (StreamingQueryProgress JSON) of the micro-batches that read rows."""
    cpu: dict[str, Any]
    """CPU used by this process tree (driver, JVM, Python workers, broker) over the whole run."""

    @property
    def batches(self) -> list[ProgressReport]:
        return [ProgressReport.from_progress(progress) for progress in self.progress]

    @property
    def events(self) -> int:
        return sum(report.input_rows for report in self.batches)

    @property
    def breakdown(self) -> list[dict[str, Any]]:
        return batch_breakdown(self.progress)

    @property
    def records_by_partition(self) -> dict[str, int]:
        """Input records per topic partition: the larger one sets the pace of each micro-batch."""
        counts: dict[str, int] = {}
        for source in self.progress[-1]["sources"] if self.progress else []:
            ends = source["endOffset"]
            if isinstance(ends, str):  # how Spark reports a Python source's offsets
                ends = json.loads(ends)
            for topic, partitions in ends.items():
                counts.update({f"{topic}[{p}]": end for p, end in partitions.items()})
        return counts

    @property
    def overall_events_per_s(self) -> float:
        return self.events / self.wall_seconds

    @property
    def steady_events_per_s(self) -> float:
        """Input rows over trigger time of every micro-batch but the first (Python worker start-up)."""
        steady = self.batches[1:]
        if not steady:
            raise RuntimeError(
                "only one micro-batch ran: lower --max-records-per-batch to measure steady state"
            )
        rows = sum(report.input_rows for report in steady)
        return rows / (sum(report.duration_ms for report in steady) / 1000)

    def summary(self, baseline: BaselineResult, targets: ThroughputTargets) -> dict[str, Any]:
        steady = self.steady_events_per_s
        share = steady / baseline.events_per_s
        return {
            "steady_state_events_per_s": round(steady),
            "overall_events_per_s": round(self.overall_events_per_s),
            "wall_seconds": round(self.wall_seconds, 3),
            "steady_state_vs_baseline": round(share, 3),
            "targets_met": targets.met(steady, share),
            "steady_state_time_shares": time_shares(self.progress[1:]),
            "cpu": self.cpu,
            "input_records_by_partition": self.records_by_partition,
            "micro_batches": self.breakdown,
        }


def dagger_spec(name: str, descriptor_set: Path, **settings: Any) -> DaggerSpec:
    return parse_dagger(
        {"name": name, "schema_registry": {"descriptor_sets": [str(descriptor_set)]}, **settings}, name
    )


def kafka_stream(
    table: str, topic: str, bootstrap_servers: str, max_records_per_batch: int | None, **settings: Any
) -> dict[str, Any]:
    return {
        "kind": "kafka",
        "table": table,
        "proto_message": BOOKING_MESSAGE,
        "event_time_field": "event_timestamp",
        "topics": [topic],
        "bootstrap_servers": bootstrap_servers,
        "auto_offset_reset": "earliest",
        "max_records_per_batch": max_records_per_batch,
        **settings,
    }


def run_to_end(
    spark: SparkSession,
    spec: DaggerSpec,
    registry: SchemaRegistry,
    records: int,
) -> PipelineResult:
    """The dagger over every record of its topics, from a fresh checkpoint; stops once all are written.

    `processAllAvailable` returns only after a trigger that found nothing to run, so the batches that
    only advance the watermark (and emit the windows it closes) have run too.
    """
    checkpoint = tempfile.mkdtemp(prefix="dagger-bench-")
    try:
        spec = spec.model_copy(update={"checkpoint_location": checkpoint})
        run = DaggerRun(spark, build_dagger(spark, spec, registry))
        meter = CpuMeter()
        started = time.perf_counter()
        query = run.start()
        try:
            run.process_available()
            wall_seconds = time.perf_counter() - started
            cpu = meter.stop()
            # Read from the query itself: listener events (DaggerRun.reports) may still be in flight.
            progress = [json.loads(item.json) for item in query.recentProgress if item.numInputRows > 0]
        finally:
            run.stop()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    result = PipelineResult(wall_seconds, progress, cpu)
    if result.events != records:
        raise RuntimeError(f"the dagger read {result.events} records, expected {records}")
    return result


def kafka_sink(bootstrap_servers: str, topic: str, proto_message: str) -> dict[str, Any]:
    return {
        "kind": "kafka",
        "bootstrap_servers": bootstrap_servers,
        "topic": topic,
        "proto_message": proto_message,
    }


@dataclass(frozen=True)
class KafkaDagger:
    """A throughput benchmark's dagger: its `settings` (streams, SQL, ...) and a Kafka sink writing
    `output_message` records."""

    name: str
    descriptor_set: Path
    bootstrap_servers: str
    output_message: str
    settings: dict[str, Any]

    def run(
        self,
        spark: SparkSession,
        registry: SchemaRegistry,
        records: int,
        output_topic: str,
        connector: str = "spark",
    ) -> PipelineResult:
        """`run_to_end` into `output_topic` (created here), its Kafka streams and sink on `connector`."""
        ensure_topic(self.bootstrap_servers, output_topic, PARTITIONS)
        sink = {
            **kafka_sink(self.bootstrap_servers, output_topic, self.output_message),
            "connector": connector,
        }
        streams = [{**stream, "connector": connector} for stream in self.settings["streams"]]
        settings = {**self.settings, "streams": streams}
        spec = dagger_spec(self.name, self.descriptor_set, sinks=[sink], **settings)
        return run_to_end(spark, spec, registry, records)


def run_fresh_and_warm(
    dagger: KafkaDagger,
    registry: SchemaRegistry,
    records: int,
    output_topics: Mapping[str, str],
    master: str,
    spark_conf: Mapping[str, str],
    connector: str = "spark",
) -> dict[str, PipelineResult]:
    """The dagger over its whole input in each of `output_topics`' sessions in turn, into that topic:
    first in a fresh Spark session, its JVM still compiling (JIT) through the whole run; then again in the
    now warmed-up one, as a long-running dagger."""
    spark = spark_session(master, app_name=dagger.name, extra_conf=spark_conf)
    runs: dict[str, PipelineResult] = {}
    try:
        for session, topic in output_topics.items():
            print(f"dagger pipeline, {session} ...", flush=True)
            runs[session] = dagger.run(spark, registry, records, topic, connector)
            for report in runs[session].batches:
                print(f"  {report.summary()}", flush=True)
    finally:
        spark.stop()
    return runs


def sink_only_dagger(name: str, sink: dict[str, Any]) -> DaggerSpec:
    """A dagger whose stream and SQL are never run: the benchmark hands its sink static micro-batches."""
    placeholder_stream = {
        "kind": "parquet", "table": "unused", "proto_message": "unused.Message", "event_time_field": "t",
        "paths": ["unused"],
    }  # fmt: skip
    return parse_dagger(
        {
            "name": name,
            "schema_registry": {"descriptor_sets": ["unused.pb"]},
            "streams": [placeholder_stream],
            "sql": "SELECT 1",
            "checkpoint_location": tempfile.mkdtemp(prefix=f"{name}-"),
            "sinks": [sink],
        },
        name,
    )

"""Metrics of a running dagger, per stage, for Prometheus (pulled from an endpoint) and StatsD (pushed).

Every number comes from one of two places that count each micro-batch once, whatever Spark retried:

* the query's progress report, on the driver, after the batch has committed: records in, invalid and
  late records per stream (observed metrics, counted by the tasks that succeeded), batch duration and its
  phases, consumer lag per partition, watermark, state rows and memory, rows dropped behind the watermark;
* enrichment calls: each enrichment's observation (`jobs/processors/enrichment/engine.py`) sums its calls
  by outcome, their time (as histogram buckets) and retries, also delivered with the progress report;
* the sinks' writes, on the driver, in `foreachBatch`: rows each sink wrote and the requests it sent and
  retried (summed from the partitions' task results), how long the write took, and the errors that
  failed it.

Series carry the labels `dagger`, and `stream`, `processor` (`post_processors.http[0]`) or `sink`
(`<index>_<kind>`, as the sink's asset); a dagger's series live in a registry of its own, served on
`metrics.prometheus_port`.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import HistogramMetricFamily

from jobs.expectations.config import CHECKED_ROWS, EXPECTATIONS_METRIC
from jobs.metrics.config import MetricsConfig
from jobs.metrics.stages import INVALID_RECORDS_METRIC, stage_rows
from jobs.processors.enrichment.engine import CALL_SECONDS_BUCKETS, ENRICHMENT_METRIC, OUTCOMES
from jobs.sinks.base import Written
from jobs.sources.stream_batches import FINAL_MARK

log = logging.getLogger(__name__)

_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class StatsdClient:
    """Fire-and-forget UDP datagrams in the StatsD line format with DogStatsD tags (`|#key:value`)."""

    def __init__(self, host: str, port: int, prefix: str) -> None:
        self._address = (host, port)
        self._prefix = f"{prefix}." if prefix else ""
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(self, name: str, value: float, kind: str, tags: dict[str, str]) -> None:
        tag_text = ",".join(f"{key}:{tag}" for key, tag in tags.items())
        line = f"{self._prefix}{name}:{value:g}|{kind}" + (f"|#{tag_text}" if tag_text else "")
        try:
            self._socket.sendto(line.encode(), self._address)
        except OSError as error:  # a metrics daemon that is down never stops the dagger
            log.debug("statsd %s:%s: %s", *self._address, error)

    def close(self) -> None:
        self._socket.close()


class _CallTimes:
    """`dagger_enrichment_call_seconds`: a histogram built from the buckets the tasks counted (a
    `prometheus_client.Histogram` only takes single observations)."""

    def __init__(self, dagger: str) -> None:
        self.dagger = dagger
        self._by_processor: dict[str, tuple[list[float], float, float]] = {}
        self._lock = threading.Lock()

    def add(self, processor: str, observed: dict[str, Any]) -> None:
        calls = sum(int(observed.get(outcome, 0)) for outcome in OUTCOMES if outcome != "empty_input")
        with self._lock:
            buckets, seconds, count = self._by_processor.get(
                processor, ([0.0] * len(CALL_SECONDS_BUCKETS), 0.0, 0.0)
            )
            for index, bound in enumerate(CALL_SECONDS_BUCKETS):
                buckets[index] += int(observed.get(f"le_{bound}", 0))
            self._by_processor[processor] = (
                buckets,
                seconds + float(observed.get("seconds", 0.0)),
                count + calls,
            )

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = self._family()
        with self._lock:
            for processor, (buckets, seconds, count) in self._by_processor.items():
                pairs = zip(CALL_SECONDS_BUCKETS, buckets, strict=True)
                bounds = [(str(bound), total) for bound, total in pairs]
                family.add_metric([self.dagger, processor], [*bounds, ("+Inf", count)], seconds)
        yield family

    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield self._family()

    @staticmethod
    def _family() -> HistogramMetricFamily:
        return HistogramMetricFamily(
            "dagger_enrichment_call_seconds", "Time of an enrichment's call, retries included",
            labels=["dagger", "processor"],
        )  # fmt: skip


class DaggerMetrics:
    """The metrics of one running dagger, updated from its progress reports and its sinks' writes.
    `enrichment_timeouts` are the timeouts of its enrichments by key, exported for alerts on call time;
    without `state_rows_counted` (`jobs.engine.spark.state_rows_counted`) the state-rows gauge is left out."""

    def __init__(
        self,
        dagger: str,
        config: MetricsConfig | None = None,
        enrichment_timeouts: dict[str, float] | None = None,
        state_rows_counted: bool = True,
    ) -> None:
        self.dagger = dagger
        self.state_rows_counted = state_rows_counted
        """Whether the state stores count their rows; Spark reports 0 rows for those that do not."""
        self.config = config or MetricsConfig()
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry

        def counter(name: str, text: str, *labels: str) -> Counter:
            return Counter(name, text, ["dagger", *labels], registry=registry)

        def gauge(name: str, text: str, *labels: str) -> Gauge:
            return Gauge(name, text, ["dagger", *labels], registry=registry)

        self.batches = counter("dagger_batches", "Micro-batches finished")
        self.records_in = counter("dagger_records_in", "Records read, per stream", "stream")
        self.records_invalid = counter(
            "dagger_records_invalid", "Records that did not decode (dropped or dead-lettered)", "stream"
        )
        self.records_late = counter(
            "dagger_records_late",
            "Records skipped before the SQL as behind the watermark (dropped or dead-lettered)",
            "stream",
        )
        self.rows_late = counter(
            "dagger_rows_late_dropped", "Rows dropped by stateful operators as behind the watermark"
        )
        self.stage_rows_in = counter(
            "dagger_stage_rows_in", "Rows into a stage between the streams and the sinks", "stage"
        )
        self.stage_rows_out = counter(
            "dagger_stage_rows_out", "Rows out of a stage between the streams and the sinks", "stage"
        )
        self.expectation_rows = counter(
            "dagger_expectation_rows_checked", "Rows checked against a stage's expectations", "stage"
        )
        self.expectation_unmet = counter(
            "dagger_expectation_rows_unmet",
            "Rows that did not meet an expectation (warned, dropped or failing the run)",
            "stage",
            "expectation",
        )
        self.batch_seconds = Histogram(
            "dagger_batch_duration_seconds", "Duration of a micro-batch", ["dagger"],
            buckets=_SECONDS_BUCKETS, registry=registry,
        )  # fmt: skip
        self.batch_phase_seconds = gauge(
            "dagger_batch_phase_seconds",
            "The latest micro-batch's time per phase, as Spark reports it",
            "phase",
        )
        self.consumer_lag = gauge(
            "dagger_consumer_lag", "Records behind the end of a partition", "topic", "partition"
        )
        self.watermark = gauge("dagger_watermark_timestamp_seconds", "The query's event-time watermark")
        self.event_time_delay = gauge(
            "dagger_event_time_delay_seconds", "How far the watermark is behind the wall clock"
        )
        self.state_rows = gauge("dagger_state_rows", "Rows held in state, per stateful operator", "operator")
        self.state_memory = gauge(
            "dagger_state_memory_bytes", "Memory of state, per stateful operator", "operator"
        )
        self.last_progress = gauge(
            "dagger_last_progress_timestamp_seconds", "When the latest micro-batch ended"
        )
        self.sink_rows = counter("dagger_sink_rows", "Rows a sink wrote", "sink")
        self.sink_writes = counter("dagger_sink_writes", "Micro-batch writes of a sink", "sink")
        self.sink_errors = counter(
            "dagger_sink_errors", "Micro-batch writes that failed, by error", "sink", "error"
        )
        self.sink_requests = counter(
            "dagger_sink_requests", "Requests a sink sent (HTTP and BigQuery sinks), retries included", "sink"
        )
        self.sink_retries = counter(
            "dagger_sink_retries", "Requests of a sink that failed and were sent again", "sink"
        )
        self.sink_seconds = Histogram(
            "dagger_sink_write_seconds", "Time a sink took to write a micro-batch", ["dagger", "sink"],
            buckets=_SECONDS_BUCKETS, registry=registry,
        )  # fmt: skip
        self.enrichment_calls = counter(
            "dagger_enrichment_calls", "Rows an enrichment handled, by outcome", "processor", "outcome"
        )
        self.enrichment_retries = counter(
            "dagger_enrichment_retries", "Retried calls of an enrichment", "processor"
        )
        self.enrichment_timeout = gauge(
            "dagger_enrichment_timeout_seconds", "An enrichment's timeout per call", "processor"
        )
        for processor, timeout_s in (enrichment_timeouts or {}).items():
            self.enrichment_timeout.labels(dagger, processor).set(timeout_s)
        self._call_times = _CallTimes(dagger)
        registry.register(self._call_times)
        self._written: dict[int, dict[str, Written]] = {}
        """What each sink wrote, by micro-batch, until the batch's progress report takes it."""
        self._lock = threading.Lock()
        self._server: Any = None
        config = self.config
        self._statsd = (
            StatsdClient(config.statsd_host, config.statsd_port, config.statsd_prefix)
            if config.statsd_host
            else None
        )

    # -- export -------------------------------------------------------------------------------------------

    def serve(self) -> int | None:
        """Start the Prometheus endpoint if configured; the port it listens on."""
        if self.config.prometheus_port is None:
            return None
        self._server, _ = start_http_server(
            self.config.prometheus_port, self.config.prometheus_address, registry=self.registry
        )
        port = int(self._server.server_address[1])
        log.info("dagger %s: Prometheus metrics on port %d (/metrics)", self.dagger, port)
        return port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._statsd is not None:
            self._statsd.close()

    # -- recording ----------------------------------------------------------------------------------------

    def record_progress(self, progress: dict[str, Any]) -> None:
        """One finished micro-batch's progress (`StreamingQueryProgress` as JSON)."""
        dagger = self.dagger
        self.batches.labels(dagger).inc()
        late = dropped_by_watermark(progress)
        for name, row in (progress.get("observedMetrics") or {}).items():
            if name.startswith(f"{INVALID_RECORDS_METRIC}."):
                stream = name.removeprefix(f"{INVALID_RECORDS_METRIC}.")
                records, invalid = int(row.get("records", 0)), int(row.get("count", 0))
                self.records_in.labels(dagger, stream).inc(records)
                self.records_invalid.labels(dagger, stream).inc(invalid)
                self.records_late.labels(dagger, stream).inc(int(row.get("late", 0)))
                late += int(row.get("late", 0))
                self._push("records_in", records, "c", stream=stream)
                self._push("filtered_invalid_records", invalid, "c", table=stream)  # raystack Dagger's name
            elif name.startswith(f"{ENRICHMENT_METRIC}."):
                self._record_calls(name.removeprefix(f"{ENRICHMENT_METRIC}."), row)
            elif name.startswith(f"{EXPECTATIONS_METRIC}."):
                self._record_expectations(name.removeprefix(f"{EXPECTATIONS_METRIC}."), row)
        for stage, rows in stage_rows(progress.get("observedMetrics") or {}).items():
            self.stage_rows_in.labels(dagger, stage).inc(rows["in"])
            self.stage_rows_out.labels(dagger, stage).inc(rows["out"])
            self._push("stage.rows_in", rows["in"], "c", stage=stage)
            self._push("stage.rows_out", rows["out"], "c", stage=stage)
        durations = progress.get("durationMs") or {}
        total_s = float(durations.get("triggerExecution", 0)) / 1000
        self.batch_seconds.labels(dagger).observe(total_s)
        self._push("batch_duration", total_s * 1000, "ms")
        for phase, milliseconds in durations.items():
            self.batch_phase_seconds.labels(dagger, phase).set(float(milliseconds) / 1000)
        for topic, partition, lag in partition_lags(progress.get("sources") or []):
            self.consumer_lag.labels(dagger, topic, partition).set(lag)
            self._push("consumer_lag", lag, "g", topic=topic, partition=partition)
        watermark = (progress.get("eventTime") or {}).get("watermark")
        if watermark:
            seconds = datetime.fromisoformat(watermark.replace("Z", "+00:00")).timestamp()
            if seconds > 0:
                self.watermark.labels(dagger).set(seconds)
                self.event_time_delay.labels(dagger).set(time.time() - seconds)
                self._push("event_time_delay", time.time() - seconds, "g")
        for index, operator in enumerate(progress.get("stateOperators") or []):
            name = f"{index}_{operator.get('operatorName', 'state')}"
            if self.state_rows_counted:
                self.state_rows.labels(dagger, name).set(int(operator.get("numRowsTotal", 0)))
            self.state_memory.labels(dagger, name).set(int(operator.get("memoryUsedBytes", 0)))
        self.rows_late.labels(dagger).inc(dropped_by_watermark(progress))
        self._push("late.records.dropped", late, "c")  # raystack Dagger's name, for both kinds of drop
        self.last_progress.labels(dagger).set(time.time())

    def take_written(self, batch_id: int) -> dict[str, Written]:
        """What each sink wrote in `batch_id`, forgotten once taken."""
        with self._lock:
            return self._written.pop(batch_id, {})

    def _record_expectations(self, stage: str, observed: dict[str, Any]) -> None:
        self.expectation_rows.labels(self.dagger, stage).inc(int(observed.get(CHECKED_ROWS, 0)))
        for expectation, count in observed.items():
            if expectation != CHECKED_ROWS:
                self.expectation_unmet.labels(self.dagger, stage, expectation).inc(int(count))
                self._push("expectation.unmet", int(count), "c", stage=stage, expectation=expectation)

    def _record_calls(self, processor: str, observed: dict[str, Any]) -> None:
        for outcome in OUTCOMES:
            count = int(observed.get(outcome, 0))
            self.enrichment_calls.labels(self.dagger, processor, outcome).inc(count)
            self._push(_RAYSTACK_CALL_NAMES[outcome], count, "c", processor=processor)
        self.enrichment_retries.labels(self.dagger, processor).inc(int(observed.get("retries", 0)))
        self._call_times.add(processor, observed)

    def record_sink_write(
        self,
        sink: str,
        batch_id: int,
        seconds: float,
        written: Written | None = None,
        error: BaseException | None = None,
    ) -> None:
        """Micro-batch `batch_id` written by `sink` (or failed with `error`)."""
        self.sink_writes.labels(self.dagger, sink).inc()
        self.sink_seconds.labels(self.dagger, sink).observe(seconds)
        self._push("sink.write_time", seconds * 1000, "ms", sink=sink)
        if error is not None:
            self.sink_errors.labels(self.dagger, sink, type(error).__name__).inc()
            self._push("sink.errors", 1, "c", sink=sink, error=type(error).__name__)
            return
        written = written or Written(0)
        with self._lock:
            self._written.setdefault(batch_id, {})[sink] = written
        self.sink_rows.labels(self.dagger, sink).inc(written.rows)
        self.sink_requests.labels(self.dagger, sink).inc(written.requests)
        self.sink_retries.labels(self.dagger, sink).inc(written.retries)
        self._push("sink.rows", written.rows, "c", sink=sink)
        self._push("sink.retries", written.retries, "c", sink=sink)

    def _push(self, name: str, value: float, kind: str, **tags: str) -> None:
        if self._statsd is not None:
            self._statsd.send(name, value, kind, {"dagger": self.dagger, **tags})


_RAYSTACK_CALL_NAMES = {
    "success": "success_response",
    "failure": "total_failures",
    "timeout": "timeouts",
    "no_answer": "no_answer",
    "empty_input": "empty_input",
}
"""The StatsD name of each call outcome: raystack Dagger's external post-processor meters where it has one."""


def dropped_by_watermark(progress: dict[str, Any]) -> int:
    """Rows the batch's stateful operators dropped as behind the watermark."""
    operators = progress.get("stateOperators") or []
    return sum(int(operator.get("numRowsDroppedByWatermark", 0)) for operator in operators)


def partition_lags(sources: Iterable[dict[str, Any]]) -> Iterable[tuple[str, str, int]]:
    """(topic, partition, records behind) of every Kafka partition in a progress report's sources."""
    for source in sources:
        end, latest = source_offsets(source, "endOffset"), source_offsets(source, "latestOffset")
        if not isinstance(end, dict) or not isinstance(latest, dict):
            continue
        for topic, partitions in latest.items():
            if not isinstance(partitions, dict):
                continue
            for partition, latest_offset in partitions.items():
                consumed = end.get(topic, {}).get(partition, 0)
                yield topic, str(partition), max(0, int(latest_offset) - int(consumed))


def source_offsets(source: dict[str, Any], key: str) -> object:
    """A source's `startOffset`/`endOffset`/`latestOffset`: JSON text in a progress report, parsed, without
    the mark of a bounded run's end (no topic's offsets)."""
    value = source.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, dict) and FINAL_MARK in value:
        return {name: offsets for name, offsets in value.items() if name != FINAL_MARK}
    return value

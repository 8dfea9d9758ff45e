"""Benchmark: a one-minute tumbling-window aggregate Kafka -> Kafka, against a hand-written loop.

    .venv/bin/python bench/window_aggregate.py [--records 1000000] [--minutes 10]

1. `--records` bookings on a 2-partition topic of the project's local Apache Kafka node
   (jobs/tools/broker.py), their event time advancing evenly over `--minutes` minutes in one-second
   steps, each step's records up to 5 s out of order (so none is late for the 10 s watermark delay).
2. The dagger: per service type and one-minute window (`window(rowtime, '1 minute')`), `count(*)` and
   `sum(amount_paid_by_cash)`, in append mode: a window is written once the watermark (latest event time
   seen minus the 10 s `watermark_delay`) passes its end, as `dagger.bench.ServiceTypeWindowTotals`. Run
   twice, like bench/kafka_filter.py: in a fresh Spark session, then in the warmed one.
3. The baseline, one Python process: consume, decode the three fields, bucket by minute
   (`pyarrow.compute.floor_temporal`), `group_by` and merge into the open windows, and write every window
   its watermark closes (encode, produce), then flush. Its consumer reads the two partitions unevenly,
   one up to two minutes of event time ahead of the other, so its watermark is kept per partition, as a
   correct Kafka consumer keeps it (`bench.hand_loop.PartitionWatermark`): the earliest of the partitions'
   latest event times, minus 10 s. Once both partitions are read to their end, it closes the windows
   that the latest event time of all, minus 10 s, passes.

Both write the same windows: all those that end at or before the last watermark, the latest event time of
the whole input minus 10 s (the windows still open then are never written, by either). The outputs are
read back and must hold exactly those windows of the input produced (`expected_windows`, computed with
NumPy from the generated bookings), once each, the count equal and the cash total to 1e-9
(`bench.checking.check_records`); Flink's, whose bounded input's end closes every window, all of them.
Events/s are input records over time: the suite's cut for every engine runs from the first window written
to the last, over the input each run read in between (`first_to_last_window`, `bench.figures.window_cut`);
the target is 100,000 events/s and Flink's rate.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import flink
from bench.bookings import booking_decoder, event_time_chunk, produce_bookings
from bench.common import (
    FRESH_SESSION,
    HAND_LOOP,
    PARTITIONS,
    WARMED_SESSION,
    add_run_arguments,
    bench_broker,
    local_parallelism,
    machine_description,
    spark_conf,
    write_summary,
)
from bench.dagger_runs import KafkaDagger, kafka_stream, run_fresh_and_warm
from bench.figures import InputRead, WindowCut, dagger_reads, window_cut
from bench.hand_loop import BaselineResult, PartitionWatermark, TopicChunk, run_baseline
from bench.kafka_io import check_topic, read_messages
from bench.report import ThroughputTargets, print_throughput_summary, throughput_summary
from jobs.codec.protobuf import ProtoDecoder
from jobs.model.schema_registry import SchemaRegistry
from jobs.tools.generator import BOOKING_MESSAGE
from jobs.tools.protoc import compile_descriptor_set

INPUT_TOPIC = "bookings-windowed"
BASELINE_TOPIC = "window-baseline-out"
PIPELINE_TOPICS = {FRESH_SESSION: "window-out", WARMED_SESSION: "window-out-warm"}
TOTALS_MESSAGE = "dagger.bench.ServiceTypeWindowTotals"
FIRST_EVENT_TIME = datetime(2026, 1, 1, tzinfo=UTC)
WATERMARK_DELAY = timedelta(seconds=10)
WINDOW = timedelta(minutes=1)
SQL = """
SELECT service_type, window.start AS window_timestamp,
       count(*) AS booking_count, sum(amount_paid_by_cash) AS cash_total
FROM bookings
GROUP BY service_type, window(rowtime, '1 minute')
"""
KEYS = ["service_type", "window_timestamp"]
TARGETS = ThroughputTargets(events_per_s=100_000, at_least_flink=True)
RESULTS = Path(__file__).resolve().parent / "results" / "window_aggregate.json"


def window_totals(decoded: pa.RecordBatch | pa.Table) -> pa.Table:
    """One chunk's bookings per service type and minute: count and cash total (a double, as Spark sums)."""
    chunk = pa.table(
        {
            "service_type": decoded.column("service_type"),
            "window_timestamp": pc.floor_temporal(decoded.column("event_timestamp"), 1, "minute"),
            "cash": pc.cast(decoded.column("amount_paid_by_cash"), pa.float64()),
        }
    )
    totals = chunk.group_by(KEYS).aggregate([("cash", "count", pc.CountOptions("all")), ("cash", "sum")])
    return totals.rename_columns({"cash_count": "booking_count", "cash_sum": "cash_total"})


def merge(open_windows: pa.Table, totals: pa.Table) -> pa.Table:
    merged = pa.concat_tables([open_windows, totals]).group_by(KEYS)
    merged = merged.aggregate([("booking_count", "sum"), ("cash_total", "sum")])
    return merged.rename_columns({"booking_count_sum": "booking_count", "cash_total_sum": "cash_total"})


class OpenWindows:
    """The hand-written loop's window state: the totals of the windows its watermark has not closed.

    A window is closed, written and forgotten once the watermark reaches its end, as Spark's append mode
    does: no booking still to come can fall into it then.
    """

    def __init__(self, decoded: pa.Schema) -> None:
        self.totals = window_totals(decoded.empty_table())
        self.watermark = PartitionWatermark(
            [(INPUT_TOPIC, partition) for partition in range(PARTITIONS)], WATERMARK_DELAY, "event_timestamp"
        )

    def add(self, chunk: TopicChunk) -> pa.Table:
        """Merges one chunk's bookings in; returns the windows the watermark closes now, and forgets them."""
        self.totals = merge(self.totals, window_totals(chunk.decoded))
        self.watermark.observe(chunk)
        return self._close(self.watermark.current())

    def flush(self) -> pa.Table:
        """Once every partition is read to its end: the windows the final watermark closes."""
        return self._close(self.watermark.final())

    def _close(self, watermark: datetime | None) -> pa.Table:
        if watermark is None:
            return self.totals.slice(0, 0)
        last_start = pa.scalar(watermark - WINDOW, pa.timestamp("us", "UTC"))
        closing = pc.less_equal(self.totals.column("window_timestamp"), last_start)
        closed = self.totals.filter(closing)
        if closed.num_rows:
            self.totals = self.totals.filter(pc.invert(closing))
        return closed


def run_window_baseline(
    bootstrap_servers: str, registry: SchemaRegistry, records: int, read_chunk: int
) -> BaselineResult:
    """Consume -> decode -> bucket -> aggregate -> write the windows the watermark closes; at the end of
    the input, the windows the final watermark closes; flush."""
    decoder = booking_decoder(registry, ["service_type", "event_timestamp", "amount_paid_by_cash"])
    windows = OpenWindows(decoder.schema)
    return run_baseline(
        bootstrap_servers,
        registry,
        records,
        read_chunk,
        decoders={INPUT_TOPIC: decoder},
        output_topic=BASELINE_TOPIC,
        output_message=TOTALS_MESSAGE,
        work=lambda chunk: windows.add(chunk[INPUT_TOPIC]),
        finish=windows.flush,
    )


def window_dagger(bootstrap_servers: str, descriptor_set: Path, max_records_per_batch: int) -> KafkaDagger:
    stream = kafka_stream("bookings", INPUT_TOPIC, bootstrap_servers, max_records_per_batch)
    settings = {"streams": [stream], "sql": SQL, "watermark_delay": f"{WATERMARK_DELAY.total_seconds()}s"}
    return KafkaDagger("bench-window-aggregate", descriptor_set, bootstrap_servers, TOTALS_MESSAGE, settings)


def expected_windows(bookings: pa.Table, closed_only: bool = True) -> pa.Table:
    """The windows the input makes, computed apart from the loop's code: each booking's minute by integer
    division of its microseconds, then count and cash total (float32 summed as double, as Spark sums it)
    per service type and minute; with `closed_only`, only the windows the final watermark (the latest
    event time minus the delay) passes the end of."""
    micros = bookings.column("event_timestamp").cast(pa.int64()).to_numpy()
    minute_us = int(WINDOW.total_seconds()) * 1_000_000
    starts = micros // minute_us * minute_us
    table = pa.table(
        {
            "service_type": bookings.column("service_type"),
            "window_timestamp": pa.array(starts, pa.timestamp("us", "UTC")),
            "cash": pc.cast(bookings.column("amount_paid_by_cash"), pa.float64()),
        }
    )
    totals = table.group_by(KEYS).aggregate([([], "count_all"), ("cash", "sum")])
    totals = totals.rename_columns(["service_type", "window_timestamp", "booking_count", "cash_total"])
    if closed_only:
        watermark_us = int(micros.max()) - int(WATERMARK_DELAY.total_seconds()) * 1_000_000
        ends = totals.column("window_timestamp").cast(pa.int64()).to_numpy() + minute_us
        totals = totals.filter(pa.array(ends <= watermark_us))
    return totals.select(["service_type", "window_timestamp", "booking_count", "cash_total"])


def verify_windows(
    servers: str, system: str, topic: str, registry: SchemaRegistry, expected: pa.Table
) -> None:
    """`topic` holds the `expected` windows, each once: counts equal, cash totals up to summation order."""
    count = check_topic(
        system, servers, topic, registry, TOTALS_MESSAGE, expected, KEYS, rel_tol={"cash_total": 1e-9}
    )
    print(f"verified {system} ({topic}): {count:,} windows, each once, every field", flush=True)


FLINK_TOPIC = "window-flink-out"


def window_writes(
    bootstrap_servers: str, registry: SchemaRegistry, topics: dict[str, str]
) -> dict[str, dict[int, list[int]]]:
    """Each run's window writes (`topics`: run -> its output topic): window start (us) -> the Kafka
    timestamps (ms) of its records."""
    writes: dict[str, dict[int, list[int]]] = {}
    for run, topic in topics.items():
        messages = read_messages(bootstrap_servers, topic)
        decoded, invalid = ProtoDecoder(registry.message(TOTALS_MESSAGE)).decode(
            [m.value() for m in messages]
        )
        if invalid:
            raise RuntimeError(f"{topic}: {len(invalid)} record(s) are not {TOTALS_MESSAGE}")
        starts = decoded.column("window_timestamp").cast(pa.int64()).to_pylist()
        writes[run] = {}
        for start, message in zip(starts, messages, strict=True):
            writes[run].setdefault(start, []).append(message.timestamp()[1])
    return writes


def first_to_last_window(
    writes: dict[str, dict[int, list[int]]],
    reads: dict[str, list[InputRead]],
    records: int,
    minutes: float,
) -> dict[str, WindowCut]:
    """The one cut for every engine (`bench.figures.window_cut`): input events per second from each run's
    first window written to its last, counting the input it read in between (`reads`: the dagger's
    micro-batches, the loop's chunks). Flink's reads are not observed: its input is the one between the
    two windows' ends in event time, with the event time advancing evenly their distance over the input's
    whole span of event time, times `records`."""

    def implied_events(first: int, last: int) -> float:
        return records * (last - first) / 1e6 / (minutes * 60)

    return window_cut(writes, reads, implied_events)


def flink_window_statements(bootstrap_servers: str, source: str, sink: str) -> list[str]:
    """The window as Flink SQL: a tumbling-window TVF over the rowtime made from `event_timestamp`, with the
    dagger's watermark delay, writing ServiceTypeWindowTotals as the dagger does."""
    bookings = f"""CREATE TABLE bookings (
        service_type STRING, amount_paid_by_cash FLOAT, event_timestamp {flink.PROTOBUF_TIMESTAMP},
        {flink.rowtime_columns(WATERMARK_DELAY)}
    ) WITH ({flink.source_options(bootstrap_servers, source, BOOKING_MESSAGE)})"""
    totals = f"""CREATE TABLE totals (
        service_type STRING, window_timestamp {flink.PROTOBUF_TIMESTAMP}, booking_count BIGINT,
        cash_total DOUBLE
    ) WITH ({flink.sink_options(bootstrap_servers, sink, TOTALS_MESSAGE)})"""
    insert = """INSERT INTO totals
        SELECT service_type, ROW(UNIX_TIMESTAMP(DATE_FORMAT(window_start, 'yyyy-MM-dd HH:mm:ss')), 0),
               COUNT(*), SUM(CAST(amount_paid_by_cash AS DOUBLE))
        FROM TABLE(TUMBLE(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '1' MINUTE))
        GROUP BY service_type, window_start, window_end"""
    return [bookings, totals, insert]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--minutes", type=float, default=10, help="event time the input spans")
    parser.add_argument("--max-records-per-batch", type=int, default=200_000, help="dagger micro-batch size")
    parser.add_argument("--flink", action="store_true", help="also run the window as Flink SQL")
    add_run_arguments(parser, RESULTS)
    args = parser.parse_args(argv)
    conf = spark_conf(args.conf)
    settings: dict[str, Any] = {
        "master": args.master,
        "broker": "apache",
        "minutes": args.minutes,
        "max_records_per_batch": args.max_records_per_batch,
        "connector": args.connector,
        "baseline_read_chunk": args.baseline_read_chunk,
        "watermark_delay_s": WATERMARK_DELAY.total_seconds(),
        "spark_conf": conf,
    }

    machine = machine_description()
    descriptor_set = compile_descriptor_set()
    registry = SchemaRegistry.load([str(descriptor_set)])
    with bench_broker() as servers:
        print(
            f"producing {args.records:,} bookings over {args.minutes} minutes of event time ...", flush=True
        )
        pace = args.records / args.minutes
        produce_rate, bookings = produce_bookings(
            servers, INPUT_TOPIC, registry, args.records, event_time_chunk(pace), FIRST_EVENT_TIME, pace
        )
        print(f"  {produce_rate:,.0f} events/s", flush=True)

        print("hand-written baseline ...", flush=True)
        baseline = run_window_baseline(servers, registry, args.records, args.baseline_read_chunk)
        print(f"  {baseline.events_per_s:,.0f} events/s, {baseline.written} windows", flush=True)

        dagger = window_dagger(servers, descriptor_set, args.max_records_per_batch)
        runs = run_fresh_and_warm(
            dagger, registry, args.records, PIPELINE_TOPICS, args.master, conf, args.connector
        )

        expected = expected_windows(bookings)
        if not expected.num_rows:
            raise RuntimeError("the input closes no window: give the input more --minutes")
        verify_windows(servers, HAND_LOOP, BASELINE_TOPIC, registry, expected)
        for session, topic in PIPELINE_TOPICS.items():
            verify_windows(servers, f"dagger, {session}", topic, registry, expected)
        flink_result = None
        if args.flink:
            flink_result = flink.measure(
                servers,
                flink_window_statements,
                (INPUT_TOPIC, FLINK_TOPIC),
                args.records,
                local_parallelism(args.master),
            )
            # The end of Flink's bounded input closes every window, also those the others leave open.
            for run, topic in flink_result["output_topics"].items():
                verify_windows(servers, run, topic, registry, expected_windows(bookings, closed_only=False))
        writes = window_writes(
            servers,
            registry,
            {HAND_LOOP: BASELINE_TOPIC, **PIPELINE_TOPICS, **(flink_result or {}).get("output_topics", {})},
        )
    reads = {
        HAND_LOOP: baseline.reads,
        **{session: dagger_reads(run.breakdown) for session, run in runs.items()},
    }
    cuts = first_to_last_window(writes, reads, args.records, args.minutes)
    spans = {run: cut.events_per_s for run, cut in cuts.items()}

    summary = throughput_summary(args.records, settings, machine, TARGETS, produce_rate, baseline, runs)
    flink.add_to_summary(summary, flink_result, spans)
    summary["first_window_to_last"] = {run: cut.summary() for run, cut in cuts.items()}
    summary["windows_written"] = expected.num_rows
    summary["verified"] = "every window the input closes, once each (count exact, cash to 1e-9)"
    print_throughput_summary(summary)
    print(f"input events/s from the first window written to the last: {spans}")
    write_summary(args.output, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

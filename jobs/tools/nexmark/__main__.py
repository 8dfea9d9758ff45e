"""`python -m jobs.tools.nexmark`: generate Nexmark events into Kafka and/or Parquet and say what was written.

    python -m jobs.tools.nexmark --events 1000000 --kafka localhost:9092 --topic nexmark
    python -m jobs.tools.nexmark --events 100000 --parquet build/nexmark --rate 10000

Without `--rate` it writes as fast as it can, events stamped 10,000 a second of event time (Nexmark's default
rate). `--rate R` stamps them R a second and writes each when its time comes, R a second of wall clock, as
nexmark-flink's source does when not at maximum speed. `--config` takes a YAML or JSON mapping of any
`NexmarkConfig` field; the flags override it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from jobs.tools.nexmark.config import NexmarkConfig
from jobs.tools.nexmark.generator import NexmarkGenerator
from jobs.tools.nexmark.kafka_writer import KafkaEventWriter
from jobs.tools.nexmark.parquet_writer import ParquetEventWriter
from jobs.tools.nexmark.summary import RunSummary


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m jobs.tools.nexmark", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, required=True, help="how many events to write")
    parser.add_argument("--kafka", metavar="BOOTSTRAP", help="Kafka bootstrap servers to write to")
    parser.add_argument("--topic", default="nexmark", help="Kafka topic (default: nexmark)")
    parser.add_argument(
        "--partitions", type=int, default=1, help="partitions of a topic made here (default 1)"
    )
    parser.add_argument("--parquet", metavar="DIR", type=Path, help="directory to write Parquet files to")
    parser.add_argument(
        "--rate", type=int, metavar="EVENTS_PER_S", help="pace the writes (default: no pacing)"
    )
    parser.add_argument("--seed", type=int, help="random seed (default 0)")
    parser.add_argument("--config", type=Path, help="YAML or JSON file of NexmarkConfig fields")
    arguments = parser.parse_args(argv)
    if arguments.events <= 0:
        parser.error("--events must be positive")
    if arguments.rate is not None and arguments.rate <= 0:
        parser.error("--rate must be positive")
    return arguments


def build_config(arguments: argparse.Namespace) -> NexmarkConfig:
    fields: dict[str, Any] = {}
    if arguments.config is not None:
        fields.update(yaml.safe_load(arguments.config.read_text(encoding="utf-8")) or {})
    fields["num_events"] = arguments.events
    if arguments.seed is not None:
        fields["seed"] = arguments.seed
    if arguments.rate is not None:
        fields["first_event_rate"] = fields["next_event_rate"] = arguments.rate
    return NexmarkConfig.model_validate(fields)


def run(arguments: argparse.Namespace) -> RunSummary:
    config = build_config(arguments)
    kafka = (
        KafkaEventWriter(arguments.kafka, arguments.topic, arguments.partitions) if arguments.kafka else None
    )
    parquet = ParquetEventWriter(arguments.parquet) if arguments.parquet else None
    summary = RunSummary()
    generator = NexmarkGenerator(config)
    started = time.monotonic()
    for event in generator.events():
        if arguments.rate is not None:
            wait_s = (event.emit_at_ms - config.base_time_ms) / 1000 - (time.monotonic() - started)
            if wait_s > 0:
                time.sleep(wait_s)
        if kafka is not None:
            kafka.write(event)
        if parquet is not None:
            parquet.write(event)
        summary.add(event)
    if kafka is not None:
        kafka.close()
    if parquet is not None:
        parquet.close()
    elapsed_s = time.monotonic() - started
    lines = summary.lines()
    lines.append(f"written in {elapsed_s:.1f} s ({summary.total / max(elapsed_s, 1e-9):,.0f} events/s)")
    if kafka is not None:
        lines.append(f"Kafka: topic {arguments.topic} at {arguments.kafka}")
    if parquet is not None:
        lines.append(f"Parquet: {len(parquet.files)} file(s) in {parquet.directory}")
    print("\n".join(lines))
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    run(parse_arguments(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`dagger`: run, check and demo daggers from the command line.

dagger run daggers/booking_filter.yaml      run until Ctrl-C (or until a bounded dagger's files are read)
dagger validate daggers/*.yaml              check files, descriptor sets, messages and SQL; run nothing
dagger convert job.properties > job.yaml    a raystack Dagger job config (or env:) as a dagger file
dagger demo                                 local Apache Kafka + booking generator + the example dagger
dagger sql "SELECT DistinctCount(x) ..."    batch SQL with every Dagger function; rows as JSON lines
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

from jobs.cli import analysis, collect, console
from jobs.engine.spark import ShipmentError
from jobs.model.schema_registry import SchemaRegistryError
from jobs.model.spec import DaggerConfigError
from jobs.project import EXAMPLE_DAGGER
from jobs.raystack import load_dagger_or_job
from jobs.running.checkpoints import CheckpointGenerations, Rewind, parse_rewind
from jobs.running.progress import ProgressReport
from jobs.running.runner import DaggerBuildError, DaggerQueryError, DaggerRun, build_dagger
from jobs.tools.protoc import compile_descriptor_set

log = logging.getLogger("dagger")


def _print_progress(report: ProgressReport) -> None:
    log.info("progress | %s", report.summary())


def run_dagger(
    path: Path,
    master: str | None,
    bounded: bool | None,
    checkpoint: str | None = None,
    rewind: Rewind | None = None,
    partition: str | None = None,
) -> int:
    from jobs.engine.spark import spark_session

    spec = load_dagger_or_job(path)
    if spec.partitions is not None and partition is None:
        example = spec.partitions.start.strftime(spec.partitions.key_format)
        raise DaggerConfigError(
            f"{path}: dagger {spec.name} has 'partitions': name the one to run, e.g. --partition {example}"
        )
    if partition is not None:  # a new generation of the partition, replacing its output
        spec = spec.for_time_partition(partition, uuid.uuid4().hex[:8])
    generations = CheckpointGenerations(spec)
    if rewind is not None:
        generation = generations.rewind(rewind)
        log.info("rewound: checkpoint generation %s (%s)", generation.name, generation.path)
    spec = generations.apply()
    if checkpoint is not None:
        spec = spec.model_copy(update={"checkpoint_location": checkpoint})
    spark = spark_session(master, app_name=f"dagger-{spec.name}")
    built = build_dagger(spark, spec)
    run = DaggerRun(spark, built, on_progress=_print_progress, bounded=bounded)
    run.start()
    log.info("dagger %s running; Ctrl-C stops it cleanly", spec.name)
    # Ctrl-C only asks for the stop: raised as KeyboardInterrupt inside one of the wait's py4j calls, it
    # would leave the connection out of step, and the stop would then read that call's answer.
    stop = threading.Event()
    previous_handler = signal.signal(signal.SIGINT, lambda _signal_number, _frame: stop.set())
    try:
        while not run.wait(timeout_s=0.5):
            if stop.is_set():
                log.info("stopping %s: finishing the current micro-batch...", spec.name)
                break
    finally:
        signal.signal(signal.SIGINT, previous_handler)
        run.stop()
        spark.stop()  # ends the Python workers too, and with them their Kafka clients
    log.info("dagger %s stopped; checkpoint %s", spec.name, run.checkpoint_location)
    return 0


def checkpoints(path: Path, restore: str | None) -> int:
    """List the checkpoint generations of a dagger (the current one marked), or restore one."""
    generations = CheckpointGenerations(load_dagger_or_job(path))
    if restore is not None:
        generation = generations.restore(restore)
        print(f"restored {generation.name}: {generation.path}")
        return 0
    current = generations.current().name
    for generation in generations.list():
        point = generation.rewind
        since = f" rewound to {point.model_dump_json(exclude_none=True)}" if point else ""
        created = f" created {generation.created.isoformat()}" if generation.created else ""
        marker = "*" if generation.name == current else " "
        print(f"{marker} {generation.name}: {generation.path}{created}{since}")
    return 0


def _offsets(text: str) -> dict[str, dict[int, int]]:
    """`topic:partition=offset[,topic:partition=offset...]`."""
    offsets: dict[str, dict[int, int]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        topic, _, position = item.rpartition(":")
        partition, _, offset = position.partition("=")
        if not topic or not partition.isdigit() or not offset.isdigit():
            raise argparse.ArgumentTypeError(f"{item!r}: expected topic:partition=offset")
        offsets.setdefault(topic, {})[int(partition)] = int(offset)
    return offsets


def validate(paths: list[Path], master: str | None) -> int:
    from jobs.engine.spark import spark_session

    spark = None
    failures = 0
    for path in paths:
        try:
            spec = load_dagger_or_job(path)
            spark = spark or spark_session(master, app_name="dagger-validate")
            build_dagger(spark, spec)
            print(f"{path}: ok ({len(spec.streams)} stream(s), {len(spec.sinks)} sink(s))")
        except (DaggerConfigError, DaggerBuildError, SchemaRegistryError) as error:
            failures += 1
            print(error, file=sys.stderr)
    return 1 if failures else 0


def convert(location: Path, output: Path | None) -> int:
    """Write a Dagger job config (.properties, or env: for the environment) as a dagger file."""
    from jobs.raystack.importer import read_job

    job = read_job(location)
    if (warning := job.warning()) is not None:
        log.warning("%s", warning)
    if output is None:
        sys.stdout.write(job.to_yaml())
    else:
        output.write_text(job.to_yaml(), encoding="utf-8")
        log.info("wrote %s", output)
    return 0


def demo(rate: int, master: str | None) -> int:
    """The example dagger on a local Apache Kafka node fed by the booking generator."""
    from jobs.model.schema_registry import SchemaRegistry
    from jobs.tools.broker import LocalKafka
    from jobs.tools.generator import BookingProducer

    descriptor_set = compile_descriptor_set()
    checkpoint = tempfile.mkdtemp(prefix="dagger-demo-")  # the broker forgets its topics as it stops
    stop_generator = threading.Event()
    log.info("starting Apache Kafka on this machine (a single KRaft node)")
    with LocalKafka() as broker:
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap_servers
        log.info("Apache Kafka on %s", broker.bootstrap_servers)
        producer = BookingProducer(
            broker.bootstrap_servers, "bookings", SchemaRegistry.load([str(descriptor_set)])
        )

        def stopped() -> Iterator[bool]:
            while True:
                yield stop_generator.is_set()

        generator = threading.Thread(
            target=producer.run, args=(rate, stopped()), name="booking-generator", daemon=True
        )
        generator.start()
        log.info("generating %d bookings/s to topic 'bookings'", rate)
        try:
            return run_dagger(EXAMPLE_DAGGER, master, bounded=False, checkpoint=checkpoint)
        finally:
            stop_generator.set()
            generator.join(timeout=10)
            shutil.rmtree(checkpoint, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dagger", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--master", help="Spark master URL or sc:// (default $DAGGER_SPARK_MASTER or local[*])"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run one dagger")
    run_parser.add_argument("dagger", type=Path)
    mode = run_parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--bounded",
        dest="bounded",
        action="store_true",
        default=None,
        help="process what is there, then stop",
    )
    mode.add_argument(
        "--unbounded", dest="bounded", action="store_false", help="keep running (default for Kafka)"
    )
    run_parser.add_argument(
        "--partition",
        metavar="KEY",
        help="a dagger with 'partitions': run this one (2026-11-20, 2026-11-20-05:00), replacing its output",
    )
    rewind = run_parser.add_mutually_exclusive_group()
    rewind.add_argument(
        "--rewind-to-timestamp",
        metavar="INSTANT",
        help="start a new checkpoint generation whose Kafka partitions start at this ISO-8601 instant",
    )
    rewind.add_argument(
        "--rewind-to-offsets",
        metavar="OFFSETS",
        type=_offsets,
        help="start a new checkpoint generation at topic:partition=offset[,...]",
    )
    checkpoints_parser = commands.add_parser(
        "checkpoints", help="list a dagger's checkpoint generations (rewinds), or restore one"
    )
    checkpoints_parser.add_argument("dagger", type=Path)
    checkpoints_parser.add_argument("--restore", metavar="NAME", help="make this generation current again")
    validate_parser = commands.add_parser("validate", help="check dagger files without running them")
    validate_parser.add_argument("daggers", type=Path, nargs="+")
    convert_parser = commands.add_parser(
        "convert", help="a raystack Dagger job config (.properties, or env:) as a dagger file"
    )
    convert_parser.add_argument("job", type=Path, help="a .properties file, or env: for the environment")
    convert_parser.add_argument("-o", "--output", type=Path, help="write here instead of to stdout")
    sql_parser = commands.add_parser(
        "sql", help="evaluate batch SQL with every Dagger function; result rows as JSON lines"
    )
    console.add_arguments(sql_parser)
    collect.add_arguments(commands.add_parser("collect", help="serve the Collection API (events to Kafka)"))
    collect.add_key_arguments(commands.add_parser("collect-key", help="make a project's write or read key"))
    analysis.add_arguments(commands.add_parser("analysis", help="serve the Analysis API"))
    demo_parser = commands.add_parser("demo", help="the example dagger on a local Apache Kafka node")
    demo_parser.add_argument("--rate", type=int, default=2000, help="generated bookings per second")
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname).1s %(name)s | %(message)s", datefmt="%H:%M:%S"
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        if args.command == "run":
            compile_descriptor_set()
            point = {"to_timestamp": args.rewind_to_timestamp, "to_offsets": args.rewind_to_offsets}
            rewind = parse_rewind(point) if any(point.values()) else None
            return run_dagger(args.dagger, args.master, args.bounded, rewind=rewind, partition=args.partition)
        if args.command == "checkpoints":
            return checkpoints(args.dagger, args.restore)
        if args.command == "convert":
            compile_descriptor_set()  # a job without stencil URLs reads the project's protos
            return convert(args.job, args.output)
        if args.command == "sql":
            return console.command(args)
        if args.command == "collect":
            return collect.command(args)
        if args.command == "collect-key":
            return collect.key_command(args)
        if args.command == "analysis":
            return analysis.command(args)
        if args.command == "validate":
            compile_descriptor_set()
            return validate(args.daggers, args.master)
        return demo(args.rate, args.master)
    except (
        DaggerConfigError,
        DaggerBuildError,
        SchemaRegistryError,
        DaggerQueryError,
        ShipmentError,
    ) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

"""`dagger collect`: the Collection API as a long-running HTTP service; `dagger collect-key`: a project's
write key.

    dagger collect --database "host=... dbname=meta user=..." --bootstrap-servers broker:9092 --port 8080
    dagger collect-key --database "..." shop        (prints a new write key of project `shop`)
    dagger collect-key --read --database "..." shop (a read key: queries through the Analysis API)

The metadata database and the broker default to $DAGGER_COLLECTOR_DATABASE and $KAFKA_BOOTSTRAP_SERVERS.
"""

from __future__ import annotations

import argparse
import os

_DATABASE_ENV = "DAGGER_COLLECTOR_DATABASE"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `dagger collect` command line."""
    add_database(parser)
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="the Kafka cluster the events go to (default $KAFKA_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--max-body-bytes", type=int, default=1024 * 1024)
    parser.add_argument("--max-batch-events", type=int, default=1_000)
    parser.add_argument(
        "--delivery-timeout", type=float, default=10.0, help="seconds the broker has to acknowledge a request"
    )
    parser.add_argument(
        "--topic-partitions", type=int, default=2, help="partitions of a new collection's topic"
    )


def add_key_arguments(parser: argparse.ArgumentParser) -> None:
    """The `dagger collect-key` command line."""
    add_database(parser)
    parser.add_argument("project", help="the project (created when new)")
    parser.add_argument(
        "--read", action="store_true", help="a read key (the Analysis API) instead of a write key"
    )


def add_database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database",
        default=os.environ.get(_DATABASE_ENV),
        help=f"the metadata database, a PostgreSQL connection string (default ${_DATABASE_ENV})",
    )


def command(args: argparse.Namespace) -> int:
    """`dagger collect`: serves until interrupted."""
    import uvicorn

    from jobs.collection.api import Collector, CollectorLimits, create_app
    from jobs.collection.delivery import KafkaDelivery
    from jobs.collection.registry import CollectionRegistry

    missing = [
        flag
        for flag, value in (("--database", args.database), ("--bootstrap-servers", args.bootstrap_servers))
        if not value
    ]
    if missing:
        raise SystemExit(f"error: dagger collect needs {' and '.join(missing)}")
    registry = CollectionRegistry(args.database)
    delivery = KafkaDelivery(
        args.bootstrap_servers, timeout_s=args.delivery_timeout, topic_partitions=args.topic_partitions
    )
    limits = CollectorLimits(max_body_bytes=args.max_body_bytes, max_batch_events=args.max_batch_events)
    try:
        uvicorn.run(create_app(Collector(registry, delivery, limits)), host=args.host, port=args.port)
    finally:
        delivery.close()
        registry.close()
    return 0


def key_command(args: argparse.Namespace) -> int:
    """`dagger collect-key`: prints a new write key, or read key."""
    from jobs.collection.registry import CollectionRegistry

    if not args.database:
        raise SystemExit(f"error: dagger collect-key needs --database (or ${_DATABASE_ENV})")
    registry = CollectionRegistry(args.database)
    try:
        print(registry.create_read_key(args.project) if args.read else registry.create_project(args.project))
    finally:
        registry.close()
    return 0

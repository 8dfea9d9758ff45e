"""`dagger analysis`: the Analysis API as a long-running HTTP service, on one warm Spark session.

    dagger analysis --database "host=... dbname=meta user=..." --projects daggers/analysis --port 8090

The metadata database (read keys, continuous tables) defaults to $DAGGER_COLLECTOR_DATABASE, the folder of
analysis project files to $DAGGER_ANALYSIS_DIR (else `<dagger folder>/analysis`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jobs.cli.collect import add_database


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_database(parser)
    add_projects(parser)
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, default=8090)


def add_projects(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--projects",
        type=Path,
        help="the folder of analysis project files (default $DAGGER_ANALYSIS_DIR, or daggers/analysis)",
    )


def command(args: argparse.Namespace) -> int:
    import uvicorn

    from jobs.analysis.api import QueryService, create_app
    from jobs.analysis.engine import AnalysisEngine
    from jobs.analysis.project import load_projects
    from jobs.collection.registry import CollectionRegistry
    from jobs.engine.spark import spark_session

    if not args.database:
        raise SystemExit("error: dagger analysis needs --database (or $DAGGER_COLLECTOR_DATABASE)")
    projects = load_projects(args.projects)
    registry = CollectionRegistry(args.database)
    spark = spark_session(args.master, app_name="dagger-analysis")
    try:
        service = QueryService(AnalysisEngine(spark, projects), registry)
        uvicorn.run(create_app(service), host=args.host, port=args.port)
    finally:
        spark.stop()
        registry.close()
    return 0

"""Dagger files -> Dagster definitions.

Each dagger in `$DAGGER_DIR` (default: the repository's `daggers/` folder) becomes one asset whose
materialization runs the dagger bounded: it processes every record available at start, then stops, which
is what CI and backfills want. Long-running streaming runs are launched with `dagger run` for now.
"""

import os
from pathlib import Path

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    Definitions,
    MaterializeResult,
    MetadataValue,
    asset,
)

from jobs.protoc import PROJECT_ROOT, compile_descriptor_set
from jobs.runner import DaggerRun, build_dagger
from jobs.spec import DaggerSpec, load_dagger
from resources.spark import SparkResource


def dagger_folder() -> Path:
    return Path(os.environ.get("DAGGER_DIR", PROJECT_ROOT / "daggers"))


def dagger_asset(spec: DaggerSpec, source: Path) -> AssetsDefinition:
    kinds = {
        "spark",
        "protobuf",
        *(stream.kind for stream in spec.streams),
        *(sink.kind for sink in spec.sinks),
    }

    @asset(
        name=spec.name.replace("-", "_"),
        group_name="daggers",
        kinds=kinds - {"log"},
        description=spec.description or f"Dagger {spec.name} ({source.name})",
        metadata={
            "dagger_file": MetadataValue.path(str(source)),
            "sql": MetadataValue.md(f"```sql\n{spec.sql.strip()}\n```"),
            "checkpoint_location": MetadataValue.path(spec.resolved_checkpoint_location),
        },
    )
    def run_bounded(context: AssetExecutionContext, spark: SparkResource) -> MaterializeResult:
        compile_descriptor_set()
        session = spark.session()
        run = DaggerRun(
            session,
            build_dagger(session, spec, log_emit=context.log.info),
            on_progress=lambda report: context.log.info(report.summary()),
            bounded=True,
        )
        run.start()
        try:
            run.wait()
        finally:
            run.stop()
        return MaterializeResult(
            metadata={
                "micro_batches": len(run.reports),
                "input_rows": sum(report.input_rows for report in run.reports),
                "invalid_records": sum(sum(report.invalid_records.values()) for report in run.reports),
            }
        )

    return run_bounded


def build_definitions(folder: Path) -> Definitions:
    assets = [dagger_asset(load_dagger(path), path) for path in sorted(folder.glob("*.yaml"))]
    return Definitions(assets=assets, resources={"spark": SparkResource()})


defs = build_definitions(dagger_folder())

"""Dagger files -> Dagster definitions.

Each dagger in `$DAGGER_DIR` (default: the repository's `daggers/` folder), a dagger file (`*.yaml`) or
a raystack Dagger job config loaded as it is (`*.properties`, `jobs.raystack`), becomes a group of stage
assets run by one streaming multi-asset and a job (`stages.py`), asset checks on its health
(`checks.py`), and the sensors that run it without an operator: restarts of crashed runs with back-off
(`restarts.py`), runs for new topics, runs while there is demand and restarts on schema changes
(`sensors.py`). A dagger file that does not load becomes a `broken_daggers/<file>` asset naming the
file and key, and the rest still load. With `$DAGGER_COLLECTOR_DATABASE` set, each event collection is an
asset upstream of the daggers that read it (`collections.py`). Each materialized table of the analysis
project files is an asset with its refresh schedule (`analysis.py`).
"""

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from dagster import (
    AssetKey,
    AssetsDefinition,
    ConfigurableResource,
    Definitions,
    MetadataValue,
    asset,
    in_process_executor,
)

from dagger_assets.analysis import analysis_definitions
from dagger_assets.checks import dagger_checks
from dagger_assets.collections import collection_assets
from dagger_assets.lineage import Lineage
from dagger_assets.restarts import restart_sensor
from dagger_assets.sensors import demand_sensor, new_topic_sensor, schema_change_sensor
from dagger_assets.stages import dagger_assets, dagger_job
from jobs.analysis.project import analysis_folder, load_projects
from jobs.model.spec import DaggerConfigError, DaggerSpec
from jobs.project import PROJECT_ROOT
from jobs.raystack import load_dagger_or_job
from resources import default_resources

log = logging.getLogger(__name__)


def dagger_folder() -> Path:
    return Path(os.environ.get("DAGGER_DIR", PROJECT_ROOT / "daggers"))


def broken_dagger_asset(path: Path, error: DaggerConfigError) -> AssetsDefinition:
    """Stands in for a dagger file that does not load: its description carries the error (file and key),
    and materializing it fails with that error, while every other dagger of the folder keeps working."""

    @asset(
        key=AssetKey(["broken_daggers", path.stem.replace("-", "_")]),
        group_name="broken_daggers",
        description=f"{path.name} does not load:\n\n```\n{error}\n```",
        metadata={"dagger_file": MetadataValue.path(str(path)), "error": str(error)},
    )
    def broken_dagger() -> None:
        raise error

    return broken_dagger


def build_definitions(
    folder: Path, resources: Mapping[str, ConfigurableResource] | None = None, analysis: Path | None = None
) -> Definitions:
    """Definitions of every dagger in `folder` and of the analysis projects in `analysis` (default
    `jobs.analysis.project.analysis_folder(folder)`); `resources` replace the defaults of
    `default_resources()` by key (a deployment's cluster, credentials, Spark master)."""
    assets, checks, jobs, sensors = [], [], [], []
    loaded: list[tuple[Path, DaggerSpec]] = []
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.properties")]):
        try:
            loaded.append((path, load_dagger_or_job(path)))
        except DaggerConfigError as error:
            log.error("%s", error)
            assets.append(broken_dagger_asset(path, error))
    collections = collection_assets()
    lineage = Lineage([spec for _, spec in loaded], collections)
    specs: list[DaggerSpec] = []
    for path, spec in loaded:
        upstream = {stream.table: lineage.upstream(spec, stream) for stream in spec.streams}
        stages = dagger_assets(spec, path, upstream)
        job = dagger_job(spec, stages)
        specs.append(spec)
        assets.append(stages)
        checks.extend(dagger_checks(spec))
        jobs.append(job)
        if spec.demand is not None:
            sensors.append(demand_sensor(spec, job))
        elif spec.topic_pattern_stream is not None:
            sensors.append(new_topic_sensor(spec, job))
    if specs:
        sensors.append(restart_sensor(specs, jobs))
        sensors.append(schema_change_sensor(specs, jobs))
    collection_keys = {collection.spec.key: collection.spec.key for collection in collections}
    analysis = analysis or analysis_folder(folder)
    try:
        projects = load_projects(analysis)
    except DaggerConfigError as error:  # the daggers still load
        log.error("%s", error)
        assets.append(broken_dagger_asset(analysis, error))
        projects = {}
    tables, schedules = analysis_definitions(
        projects, lambda address, collection: lineage.source_of(address, collection_keys.get(collection))
    )
    return Definitions(
        assets=[
            *assets,
            *tables,
            *lineage.external_assets(),
            *(collection.spec for collection in collections),
        ],
        schedules=schedules,
        asset_checks=checks,
        jobs=jobs,
        sensors=sensors,
        # Also for the UI's "Materialize" (an implicit asset job): the Spark driver must live in the run
        # worker, or a killed run leaves a step process's query running on the checkpoint.
        executor=in_process_executor,
        resources={**default_resources(), **(resources or {})},
    )


defs = build_definitions(dagger_folder())

"""The driver a `launch: spark_submit` run gives spark-submit (`driver.py`), and the progress messages it
sends the run through Dagster Pipes; the run's side is `dagger_assets.submit`."""

from __future__ import annotations

import dataclasses
from typing import Any

from jobs.running.progress import ProgressReport
from jobs.sinks.base import Written


def progress_message(report: ProgressReport) -> dict[str, Any]:
    """A finished micro-batch's report as a Pipes custom message (JSON)."""
    return {"event": "progress", "report": dataclasses.asdict(report)}


def progress_report(message: dict[str, Any]) -> ProgressReport:
    """The report a `progress_message` carries."""
    fields = dict(message["report"])
    sinks = {label: Written(**written) for label, written in fields.pop("sinks").items()}
    return ProgressReport(**fields, sinks=sinks)

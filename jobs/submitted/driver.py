"""A dagger's Spark driver as spark-submit runs it for a Dagster run (`launch: spark_submit`), talking to
the run through Dagster Pipes; see `dagger_assets.submit` for the messages and how a stop arrives.

    spark-submit --deploy-mode client --master <master> jobs/submitted/driver.py

The run passes everything in the Pipes context's extras: the dagger file, the partition (a template's
topic), `bounded`, and the configuration of each of the run's resources. Outside a Pipes session it
refuses to run.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from dagster_pipes import PipesContext, PipesEnvVarParamsLoader, open_dagster_pipes

_PR_SET_PDEATHSIG = 1


class _Resources:
    """The run's resources rebuilt from their configuration, by key, as attributes (like Dagster's)."""

    def __init__(self, configs: dict[str, dict[str, Any]]) -> None:
        from resources import default_resources

        defaults = default_resources()
        unknown = sorted(set(configs) - set(defaults))
        if unknown:
            raise ValueError(f"the run passed resources this driver does not know: {', '.join(unknown)}")
        for key, resource in defaults.items():
            setattr(self, key, type(resource)(**configs[key]) if key in configs else resource)


def _run(pipes: PipesContext) -> int:
    # Imported here: the module must stay importable (and refuse clearly) without a Spark install.
    from jobs.model.spec import DaggerConfigError
    from jobs.raystack import load_dagger_or_job
    from jobs.running.launch import configured_instance, open_session, spark_ui_url, start_run
    from jobs.running.runner import DaggerBuildError, DaggerQueryError
    from jobs.submitted import progress_message

    stop = threading.Event()
    parent = os.getppid()

    def request_stop(_signal_number: int, _frame: object) -> None:
        stop.set()

    extras = pipes.extras
    log_info = pipes.log.info
    try:
        resources = _Resources(extras["resources"])
        spec = load_dagger_or_job(Path(extras["dagger_file"]))
        # The run worker rewound or restored the checkpoint at launch, once: here it is only applied.
        instance = configured_instance(
            spec,
            extras["partition_key"],
            resources,
            log_info,
            partition_generation=extras["partition_generation"],
        )
        session = open_session(resources)
        # After the session: PySpark puts its own handlers in while the JVM starts.
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        run = start_run(
            session,
            instance,
            extras["bounded"],
            log_info,
            on_progress=lambda report: pipes.report_custom_message(progress_message(report)),
        )
    except (DaggerConfigError, DaggerBuildError) as error:
        pipes.report_custom_message({"event": "failed", "error": str(error), "deterministic": True})
        return 1
    except Exception as error:  # a broker or cluster not reachable, say: a restart may do better
        failure = f"{type(error).__name__}: {error}"
        pipes.report_custom_message({"event": "failed", "error": failure, "deterministic": False})
        raise  # its traceback goes to the run's captured stderr
    pipes.report_custom_message(
        {
            "event": "started",
            "pid": os.getpid(),
            "checkpoint_location": run.checkpoint_location,
            "result_schema": run.built.result.schema.jsonValue(),
            "spark_ui": spark_ui_url(session),
            "metrics_port": run.metrics_port,
        }
    )
    try:
        # The JVM that launched this driver is its parent: if it is gone, so is the query.
        while not run.wait(timeout_s=0.5) and not stop.is_set() and os.getppid() == parent:
            pass
    except DaggerQueryError as error:
        pipes.report_custom_message({"event": "failed", "error": str(error), "deterministic": False})
        return 1
    finally:
        run.stop()  # lets the micro-batch under way finish
    pipes.report_custom_message({"event": "ended"})
    return 0


def main() -> int:
    if not PipesEnvVarParamsLoader().is_dagster_pipes_process():
        print(
            "jobs/submitted/driver.py runs a dagger for a Dagster run launched with `launch: spark_submit`; "
            "it was started outside a Dagster Pipes session (no DAGSTER_PIPES_CONTEXT in its environment)",
            file=sys.stderr,
        )
        return 2
    # The JVM that spark-submit started is the parent: if it is killed, this driver goes with it.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    with open_dagster_pipes() as pipes:
        return _run(pipes)


if __name__ == "__main__":
    # Run as a script, Python puts this folder first on the path, not the project's root.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    sys.exit(main())

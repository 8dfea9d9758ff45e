"""Spark's own checks of a streaming query, run when a dagger is built rather than when its query starts.

`DataStreamWriter.start()` runs Spark's `UnsupportedOperationChecker` on the analysed plan: an aggregation
fed by another aggregation, append output without a watermark, a join Spark cannot run as a stream. Run
here, on the same plan and output mode, the check refuses such a dagger while it is built, so
`dagger validate` and Dagster's checks say what `dagger run` would, in the same words, before anything
runs.
"""

from __future__ import annotations

from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame

from jobs.engine.connect import is_spark_connect
from jobs.model.errors import DaggerBuildError, without_plan
from jobs.model.spec import DaggerSpec

_CHECKS_ENABLED = "spark.sql.streaming.unsupportedOperationCheck"


def output_mode(spec: DaggerSpec, bounded: bool) -> str:
    """The output mode the dagger's query starts with.

    Real-time mode takes no `append`; for the stateless queries it runs with `append` (the real-time
    checks refuse the others) every row is emitted once either way.
    """
    real_time = spec.execution == "real_time" and not bounded
    return "update" if real_time and spec.output_mode == "append" else spec.output_mode


def cannot_run_as_stream(spec: DaggerSpec, error: Exception) -> DaggerBuildError:
    """The error of a dagger whose query Spark refuses to run as a stream, as `dagger run` reports it."""
    return DaggerBuildError(
        f"dagger {spec.name}: the query cannot run as a stream: {without_plan(str(error))}"
    )


def require_streamable(result: DataFrame, spec: DaggerSpec, mode: str) -> None:
    """Runs Spark's streaming checks on `result` in `mode`, raising what starting it would raise.

    A Spark Connect session leaves them to the server, which runs them as the query starts.
    """
    if is_spark_connect(result.sparkSession):
        return
    spark = result.sparkSession
    if spark.conf.get(_CHECKS_ENABLED, "true").lower() != "true":
        return
    jvm = spark._jvm  # type: ignore[attr-defined]
    modes = jvm.org.apache.spark.sql.streaming.OutputMode
    java_mode = {"append": modes.Append, "update": modes.Update, "complete": modes.Complete}[mode]()
    plan = result._jdf.queryExecution().analyzed()  # type: ignore[attr-defined]
    try:
        jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker.checkForStreaming(
            plan, java_mode
        )
    except (AnalysisException, PySparkException) as error:
        raise cannot_run_as_stream(spec, error) from None

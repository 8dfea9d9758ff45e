"""Running a translated query's OVER views (`over.OverView`): each view's rows, through the project's JVM
operator (`FlinkOver.java`), registered under the view's name for the query to read. The rows stay in
the JVM: Python passes only the view's description."""

from __future__ import annotations

from collections.abc import Sequence

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from jobs import sql as sql_stage
from jobs.raystack.flink_sql.over import OverView

_OPERATOR = "dagger.jobs.raystack.flink_sql.FlinkOver"


class OverViewError(ValueError):
    """An OVER view that cannot run here, with the reason."""


def register_over_views(spark: SparkSession, views: Sequence[OverView]) -> None:
    """Registers each view (innermost first, as translated) as a temporary view of `spark`."""
    if not views:
        return
    jvm = getattr(spark, "_jvm", None)  # None on a Spark Connect client
    if jvm is None:
        raise OverViewError(
            "an OVER aggregation runs a JVM operator of this project, which a Spark Connect client cannot "
            "load; run the dagger on a classic master"
        )
    gateway = spark.sparkContext._gateway

    def strings(values: Sequence[str]):  # a Java String[]
        array = gateway.new_array(jvm.java.lang.String, len(values))
        for index, value in enumerate(values):
            array[index] = value
        return array

    for view in views:
        source = sql_stage.analyse(spark, view.source_sql)
        try:
            rows = getattr(jvm, _OPERATOR).apply(
                source._jdf, strings(view.keys), view.time_column, view.rows_frame, view.preceding,
                strings(view.functions), strings(view.arguments), strings(view.outputs),
            )  # fmt: skip
        except Py4JJavaError as error:
            cause = error.java_exception
            raise OverViewError(
                f"the OVER aggregation over {view.source_sql!r}: {cause.getMessage()}"
            ) from None
        DataFrame(rows, spark).createOrReplaceTempView(view.name)

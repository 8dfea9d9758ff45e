"""Running a translated query's views of the project's JVM operators (`over.OverView`, `top_n.TopNView`,
`changelog.AggregateView`, `proctime.ProcTimeWindowView`): each view's rows, through its operator
(`FlinkOver.java`, or `FlinkUpdatingOver.java` over a Top-N's rows, `FlinkRank.java`, `FlinkAggregate.java`,
`FlinkProcTimeWindow.java`), registered under
the view's name for the query to read. The rows stay in the JVM: Python passes only the view's
description."""

from __future__ import annotations

from collections.abc import Sequence

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from jobs.model import sql as sql_stage
from jobs.raystack.flink_sql.changelog import CHANGE_COLUMN, AggregateView
from jobs.raystack.flink_sql.over import OverView
from jobs.raystack.flink_sql.proctime import ProcTimeWindowView
from jobs.raystack.flink_sql.top_n import TopNView

_OVER = "dagger.jobs.raystack.flink_sql.FlinkOver"
_UPDATING_OVER = "dagger.jobs.raystack.flink_sql.FlinkUpdatingOver"
_TOP_N = "dagger.jobs.raystack.flink_sql.FlinkRank"
_AGGREGATE = "dagger.jobs.raystack.flink_sql.FlinkAggregate"
_PROCTIME_WINDOW = "dagger.jobs.raystack.flink_sql.FlinkProcTimeWindow"
_WATERMARK_DELAY = "spark.watermarkDelayMs"  # metadata Spark puts on a column with a watermark


class OverViewError(ValueError):
    """An OVER view that cannot run here, with the reason."""


def register_over_views(
    spark: SparkSession,
    views: Sequence[OverView | TopNView | AggregateView | ProcTimeWindowView],
    ends_with_input: bool = False,
) -> None:
    """Registers each view (innermost first, as translated) as a temporary view of `spark`.
    `ends_with_input`: the run is bounded and its input ends with the final watermark, at which a
    processing-time window the wall clock has passed comes out and one still open is dropped, as in Flink
    (`FlinkProcTimeWindow`)."""
    if not views:
        return
    jvm = getattr(spark, "_jvm", None)  # None on a Spark Connect client
    if jvm is None:
        raise OverViewError(
            "an OVER aggregation runs a JVM operator of this project, which a Spark Connect client cannot "
            "load; run the dagger on a classic master"
        )
    gateway = spark.sparkContext._gateway

    def array(java_type, values: Sequence):  # a Java array
        elements = gateway.new_array(java_type, len(values))
        for index, value in enumerate(values):
            elements[index] = value
        return elements

    def strings(values: Sequence[str]):
        return array(jvm.java.lang.String, values)

    for view in views:
        source = sql_stage.analyse(spark, view.source_sql)
        source = _one_event_time(source, _ordering_columns(view))
        try:
            if isinstance(view, TopNView):
                descending = array(gateway.jvm.boolean, view.descending)
                rows = getattr(jvm, _TOP_N).apply(
                    source._jdf, strings(view.keys), strings(view.orders), descending, view.limit,
                    _keeps_the_last_by_time(source, view), strings(view.helpers), view.rank_column,
                )  # fmt: skip
            elif isinstance(view, AggregateView):
                rows = getattr(jvm, _AGGREGATE).apply(
                    source._jdf, strings(view.keys), strings(view.functions), strings(view.arguments),
                    strings(view.outputs), CHANGE_COLUMN, view.upserts,
                )  # fmt: skip
            elif isinstance(view, ProcTimeWindowView):
                rows = getattr(jvm, _PROCTIME_WINDOW).apply(
                    source._jdf, strings(view.keys), view.size_ms, strings(view.functions),
                    strings(view.arguments), strings(view.outputs), ends_with_input,
                )  # fmt: skip
            elif view.row_keys:
                rows = getattr(jvm, _UPDATING_OVER).apply(
                    source._jdf, strings(view.keys), view.time_column, view.rows_frame, view.preceding,
                    strings(view.functions), strings(view.arguments), strings(view.outputs),
                    strings(view.row_keys), CHANGE_COLUMN,
                )  # fmt: skip
            else:
                rows = getattr(jvm, _OVER).apply(
                    source._jdf, strings(view.keys), view.time_column, view.rows_frame, view.preceding,
                    strings(view.functions), strings(view.arguments), strings(view.outputs),
                )  # fmt: skip
        except Py4JJavaError as error:
            cause = error.java_exception
            raise OverViewError(f"the OVER window over {view.source_sql!r}: {cause.getMessage()}") from None
        DataFrame(rows, spark).createOrReplaceTempView(view.name)


def _keeps_the_last_by_time(source: DataFrame, view: TopNView) -> bool:
    """Flink's deduplication keeping the last row (ROW_NUMBER() ordered by the time attribute, DESC,
    rn = 1): its later row wins a tie, where a Top-N keeps the earlier."""
    if view.limit != 1 or view.descending != (True,):
        return False
    return _WATERMARK_DELAY in source.schema[view.orders[0]].metadata


def _ordering_columns(view: OverView | TopNView | AggregateView | ProcTimeWindowView) -> Sequence[str]:
    """The columns a view orders its rows by (an aggregation without a window, or on processing time, by
    none)."""
    if isinstance(view, TopNView):
        return view.orders
    return (view.time_column,) if isinstance(view, OverView) else ()


def _one_event_time(source: DataFrame, preferred: Sequence[str]) -> DataFrame:
    """`source` with one event-time column: the operators run as `transformWithState`, which takes one,
    and a join's rows carry each side's (Nexmark q9's Top-N over a join of auctions and bids). The one
    kept is the first of `preferred` that is one (the column the view orders by), else the first; the
    others become plain timestamps, as a join's time attributes are to Flink's Top-N."""
    timed = [field.name for field in source.schema if _WATERMARK_DELAY in field.metadata]
    if len(timed) <= 1:
        return source
    kept = next((name for name in preferred if name in timed), timed[0])
    for name in timed:
        if name != kept:
            metadata = source.schema[name].metadata
            source = source.withMetadata(name, {k: v for k, v in metadata.items() if k != _WATERMARK_DELAY})
    return source

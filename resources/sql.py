"""The SQL stage: Spark SQL settings the query runs with."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field
from pyspark.sql import SparkSession


class SqlStageResource(ConfigurableResource):
    """Spark SQL settings of the SQL stage, applied to the session before the query is planned."""

    session_time_zone: str = Field(
        default="UTC",
        description="Time zone of timestamp functions and casts (`spark.sql.session.timeZone`).",
    )
    shuffle_partitions: int | None = Field(
        default=None,
        description="Partitions of aggregations and joins (`spark.sql.shuffle.partitions`); default Spark's.",
    )

    def configure(self, session: SparkSession) -> None:
        session.conf.set("spark.sql.session.timeZone", self.session_time_zone)
        if self.shuffle_partitions is not None:
            session.conf.set("spark.sql.shuffle.partitions", str(self.shuffle_partitions))

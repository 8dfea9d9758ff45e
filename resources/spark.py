"""The Spark session daggers run on, as a Dagster resource."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field
from pyspark.sql import SparkSession

from jobs.spark import spark_session


class SparkResource(ConfigurableResource):
    """Spark for daggers: local by default; any master URL, or Spark Connect with an `sc://` URL."""

    master: str | None = Field(
        default=None,
        description="Spark master URL or sc:// URL; default $DAGGER_SPARK_MASTER, then local[*].",
    )
    app_name: str = Field(default="dagger", description="Spark application name.")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings (spark.* keys).")

    def session(self) -> SparkSession:
        return spark_session(self.master, self.app_name, self.conf)

"""The Spark session daggers run on, as a Dagster resource."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path

from dagster import Config, ConfigurableResource
from pydantic import Field
from pyspark.sql import SparkSession

from jobs.engine.spark import spark_session


class SparkLaunch(Enum):
    """How a dagger's run starts its Spark driver: in the Dagster run worker, or as a `spark-submit
    --deploy-mode client` subprocess talking to the run through Dagster Pipes (`dagger_assets.submit`)."""

    in_process = "in_process"
    spark_submit = "spark_submit"


class SparkSubmitOptions(Config):
    """How `launch: spark_submit` runs `spark-submit` (client mode: the driver runs beside the run worker)."""

    spark_submit: str | None = Field(
        default=None,
        description="The spark-submit executable; default the one of the installed pyspark.",
    )
    args: list[str] = Field(
        default_factory=list,
        description="Extra spark-submit arguments before the driver script (`--driver-memory 2g`...).",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment of the spark-submit process."
    )
    stop_timeout_seconds: float = Field(
        default=180.0,
        gt=0,
        description="How long a stop waits for the driver to finish its micro-batch and exit before it is "
        "killed (the checkpoint replays the batch).",
    )


class SparkResource(ConfigurableResource):
    """Spark for daggers: local by default; any master URL, or Spark Connect with an `sc://` URL."""

    master: str | None = Field(
        default=None,
        description="Spark master URL or sc:// URL; default $DAGGER_SPARK_MASTER, then local[*].",
    )
    app_name: str = Field(default="dagger", description="Spark application name.")
    conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark settings (spark.* keys).")
    launch: SparkLaunch | None = Field(
        default=None,
        description="Where the driver runs: `in_process` (the run worker) or `spark_submit` (a spark-submit "
        "subprocess in client mode, through Dagster Pipes); default $DAGGER_SPARK_LAUNCH, then in_process.",
    )
    submit: SparkSubmitOptions = Field(
        default_factory=SparkSubmitOptions, description="spark-submit options for `launch: spark_submit`."
    )

    def session(self) -> SparkSession:
        return spark_session(self.master, self.app_name, self.conf)

    def launch_mode(self) -> SparkLaunch:
        """`launch`, or $DAGGER_SPARK_LAUNCH, or in_process; a bad value is an error naming its source."""
        if self.launch is not None:
            return self.launch
        value = os.environ.get("DAGGER_SPARK_LAUNCH", SparkLaunch.in_process.value)
        try:
            return SparkLaunch(value)
        except ValueError:
            expected = ", ".join(launch.value for launch in SparkLaunch)
            raise ValueError(
                f"spark resource: launch from $DAGGER_SPARK_LAUNCH is {value!r}, expected one of {expected}"
            ) from None

    def spark_submit_executable(self) -> str:
        """`submit.spark_submit`, or the spark-submit of the installed pyspark."""
        if self.submit.spark_submit is not None:
            return self.submit.spark_submit
        import pyspark

        return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")

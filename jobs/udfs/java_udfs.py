"""Users' Java functions in Spark SQL: classes of public `eval` methods (Flink's ScalarFunction
convention), each registered under its SQL name by the project's JVM class `EvalFunctions`, which calls
`eval` by reflection in the JVM, so a query calling one keeps its rows there (no Python worker).

They are listed in the dagger file's `functions.java_udfs` (a Flink SQL script's `CREATE FUNCTION name AS
'class'` adds to it), with the jars they are loaded from. Registering loads each class on the driver: one
that is not there, needs a class that is not (Flink's own, say), or has no `eval`, is refused before the
dagger starts, naming it.
"""

from __future__ import annotations

from pathlib import Path

from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import SparkSession

from jobs.udfs.config import JavaUdfsConfig

_EVAL_FUNCTIONS = "dagger.jobs.udfs.EvalFunctions"
_JVM_TRACE = "\n\nJVM stacktrace:"  # what PySpark appends to a captured exception's message


class JavaUdfError(ValueError):
    """A Java function that cannot be registered; the message names its class or jar."""


def register(spark: SparkSession, config: JavaUdfsConfig) -> list[str]:
    """Register the configured classes on `spark` (a classic session); returns their SQL names."""
    if not config.classes:
        return []
    missing = [jar for jar in config.jars if "://" not in jar and not Path(jar).is_file()]
    if missing:
        raise JavaUdfError(f"jars: no such file: {', '.join(missing)}")
    jvm = getattr(spark, "_jvm", None)  # None on a Spark Connect client
    if jvm is None:
        raise JavaUdfError(
            "Java functions are loaded into the session's JVM, which a Spark Connect client cannot reach; "
            "run the dagger on a classic master"
        )
    gateway = spark.sparkContext._gateway
    jars = gateway.new_array(jvm.java.lang.String, len(config.jars))
    for index, jar in enumerate(config.jars):
        jars[index] = jar
    for name, class_name in config.classes.items():
        try:
            getattr(jvm, _EVAL_FUNCTIONS).register(spark._jsparkSession, name, class_name, jars)
        except Py4JJavaError as error:
            raise JavaUdfError(f"{name}: {error.java_exception.getMessage()}") from None
        except CapturedException as error:  # PySpark's own for Java's IllegalArgumentException
            raise JavaUdfError(f"{name}: {str(error).split(_JVM_TRACE)[0]}") from None
    return list(config.classes)

"""The log sink's lines: one JSON object per row, 32-bit floats as their shortest decimal."""

from __future__ import annotations

import json

import numpy
from pyspark.sql.types import ArrayType, DoubleType, FloatType, StringType, StructField, StructType

from jobs.sinks.base import SinkContext, Written
from jobs.sinks.log.writer import LogSinkWriter


def test_floats_print_as_protobuf_prints_them_and_doubles_in_full(spark, make_dagger):
    schema = StructType([
        StructField("name", StringType()),
        StructField("fare", FloatType()),
        StructField("distance", DoubleType()),
        StructField("point", StructType([StructField("x", FloatType())])),
        StructField("fares", ArrayType(FloatType())),
    ])  # fmt: skip
    widened = float(numpy.float32(8789.7))  # 8789.7001953125, what Spark hands Python for a FLOAT
    batch = spark.createDataFrame([("a", widened, widened, (widened,), [widened, None])], schema)
    lines: list[str] = []
    stream = {"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e", "paths": ["p"]}
    spec = make_dagger(streams=[stream], sql="SELECT * FROM t", sinks=[{"kind": "log"}])
    writer = LogSinkWriter(spec.sinks[0], SinkContext(spec, log_emit=lines.append))

    assert writer.write(batch, 7) == Written(rows=1)
    [line] = lines
    prefix, _, row = line.partition(" | ")
    assert prefix == "batch 7"
    assert json.loads(row) == {
        "name": "a", "fare": 8789.7, "distance": widened, "point": {"x": 8789.7}, "fares": [8789.7, None]
    }  # fmt: skip
    assert '"fare": 8789.7,' in row and '"distance": 8789.7001953125' in row

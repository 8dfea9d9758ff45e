"""Client secrets in stream settings never show in query plans or explain output.

Stream settings travel as data-source options; Spark redacts an option whose value matches
`spark.redaction.regex` (password, secret, token...), which covers the `stream` option holding them.
"""

from __future__ import annotations

import contextlib
import io

from jobs.runner import build_dagger
from tests.conftest import kafka_stream

PLANTED = "planted-secret-7f3a"


def test_consumer_passwords_are_redacted_from_plans(kafka, make_dagger, spark, registry):
    topic = kafka.new_topic("secrets")
    stream = kafka_stream(
        kafka.bootstrap_servers,
        "orders",
        "dagger.testing.Order",
        "created_at",
        topics=[topic],
        consumer_config={"sasl.password": PLANTED, "sasl.username": "dagger"},
    )
    spec = make_dagger(streams=[stream], sql="SELECT order_id FROM orders", sinks=[{"kind": "log"}])
    built = build_dagger(spark, spec, registry)

    explained = io.StringIO()
    with contextlib.redirect_stdout(explained):
        built.result.explain(extended=True)
    plan = built.result._jdf.queryExecution().toString()
    assert "dagger_kafka" in plan  # the source and its options are in the plan...
    assert PLANTED not in plan  # ...but not the secret
    assert PLANTED not in explained.getvalue()

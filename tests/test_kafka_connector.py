"""Kafka streams read by Spark's own Kafka connector and decoded in the JVM (`connector: spark`), on Apache
Kafka: the same rows out as the Python source gives, every position and policy kept."""

from __future__ import annotations

from tests.conftest import kafka_sink, kafka_stream, message_class
from tests.test_kafka_pipeline import ALL_TYPE_COLUMNS, ALL_TYPES, all_types_message


def test_every_protobuf_type_comes_out_as_it_went_in(kafka, registry, make_dagger, start_dagger):
    source, sink = kafka.new_topic("jvm-all-types", partitions=2), kafka.new_topic("jvm-all-types-out")
    sent = [all_types_message(registry, index) for index in range(40)]
    kafka.produce(
        source, [message.SerializeToString() for message in sent], partition=lambda index: index % 2
    )

    stream = kafka_stream(kafka.bootstrap_servers, "things", ALL_TYPES, "event_time", topics=[source])
    spec = make_dagger(
        streams=[{**stream, "connector": "spark"}],
        sql=f"SELECT {', '.join(ALL_TYPE_COLUMNS)} FROM things",
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, ALL_TYPES)],
    )
    start_dagger(spec).process_available()

    decode = message_class(registry, ALL_TYPES).FromString
    received = sorted(
        (decode(record.value()) for record in kafka.read_all(sink)), key=lambda m: int(m.id[3:])
    )
    assert received == sent

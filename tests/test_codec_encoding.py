"""Arrow -> protobuf encoding through the native ptars codec and the JVM encoder (`jobs.codec.jvm_protobuf`),
each test run against both: round trips, dotted columns into nested fields, JSON Struct columns, enums, and
errors that name the column, the field and both types."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.codec.jvm_protobuf import register_encoder
from jobs.codec.protobuf import ProtoDecoder
from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.codec.protobuf_types import EncodeError
from jobs.model.schema_registry import SchemaRegistry
from tests.codec_samples import ALL_TYPES, BOOKING, FULL, PROJECTION, SECOND, build
from tests.conftest import message_class


class JvmEncoder:
    """The JVM encoder (`jobs.codec.jvm_protobuf`) behind ProtoEncoder's interface: the batch becomes a
    DataFrame, a query applies the encoder to a struct of all its columns, and the payloads come back as
    Arrow, in row order. It is registered for each batch's types, so a column whose type cannot fill its
    field raises EncodeError before the query runs; what only values show fails the query."""

    def __init__(self, spark: SparkSession, descriptor: Descriptor) -> None:
        self.descriptor = descriptor
        self._spark = spark
        self._function = f"encode_{descriptor.name.lower()}"

    def encode(self, batch: pa.RecordBatch) -> pa.BinaryArray:
        frame = self._spark.createDataFrame(pa.Table.from_batches([batch]))
        register_encoder(self._spark, self._function, self.descriptor, frame.schema)
        columns = F.struct(*[F.col(f"`{name}`") for name in frame.columns])  # `a.b` is one column's name
        table = frame.select(F.call_function(self._function, columns).alias("payload")).toArrow()
        return table.column("payload").combine_chunks()


@dataclass(frozen=True)
class EncoderFactory:
    """Makes the encoder of one kind (`native` or `jvm`) for a message."""

    kind: str
    make: Callable[[Descriptor], ProtoEncoder | JvmEncoder]

    def __call__(self, descriptor: Descriptor) -> ProtoEncoder | JvmEncoder:
        return self.make(descriptor)


@pytest.fixture(scope="module", params=["native", "jvm"])
def new_encoder(request: pytest.FixtureRequest) -> EncoderFactory:
    if request.param == "native":
        return EncoderFactory("native", ProtoEncoder)
    spark = request.getfixturevalue("spark")
    return EncoderFactory("jvm", lambda descriptor: JvmEncoder(spark, descriptor))


def round_trip(
    registry: SchemaRegistry, name: str, messages: list[Message], new_encoder: EncoderFactory
) -> list[Message]:
    descriptor = registry.message(name)
    batch, invalid = ProtoDecoder(descriptor).decode([message.SerializeToString() for message in messages])
    assert invalid == {}
    encoded = new_encoder(descriptor).encode(batch)
    assert encoded.type == pa.binary()
    return [message_class(registry, name).FromString(payload) for payload in encoded.to_pylist()]


def test_decode_encode_round_trip_of_all_types(registry: SchemaRegistry, new_encoder: EncoderFactory) -> None:
    originals = [
        build(registry, ALL_TYPES, FULL),
        build(registry, ALL_TYPES, SECOND),
        build(registry, ALL_TYPES, {}),
    ]

    decoded_again = round_trip(registry, ALL_TYPES, originals, new_encoder)

    for original, again in zip(originals, decoded_again, strict=True):
        assert again == original, f"\n{again}\n!=\n{original}"
    assert decoded_again[0].uint64_value == 2**64 - 1
    assert decoded_again[0].fixed64_value == 2**63
    assert json_format.MessageToDict(decoded_again[0].attributes) == FULL["attributes"]
    assert decoded_again[1].HasField("point")  # an empty but present message stays present
    assert decoded_again[1].optional_name.value == ""
    assert decoded_again[1].HasField("optional_name")
    assert not decoded_again[2].HasField("optional_name")


def test_decode_encode_round_trip_of_bookings(registry: SchemaRegistry, new_encoder: EncoderFactory) -> None:
    originals = [
        build(
            registry,
            BOOKING,
            {
                "service_type": "GO_FOOD",
                "order_number": "order-1",
                "status": "CANCELLED",
                "event_timestamp": "2024-06-01T12:00:00Z",
                "amount_paid_by_cash": 12.5,
                "customer_price": 99.99,
                "total_distance_meters": "123456",
                "is_surge": True,
                "pickup_location": {"name": "home", "latitude": -6.2, "longitude": 106.8},
                "tags": ["a", "b"],
                "metadata": {"source": "app"},
                "voucher_discount": 0.0,
            },
        ),
        build(registry, BOOKING, {"order_number": "order-2"}),
    ]

    assert round_trip(registry, BOOKING, originals, new_encoder) == originals


def test_both_encoders_write_the_same_bytes(registry: SchemaRegistry, spark: SparkSession) -> None:
    # Struct fields aside: a Struct's entries are written in the order of the Python runtime's map.
    descriptor = registry.message(ALL_TYPES)
    messages = [build(registry, ALL_TYPES, fields) for fields in (FULL, SECOND, {})]
    batch, _ = ProtoDecoder(descriptor).decode([message.SerializeToString() for message in messages])
    batch = batch.drop_columns(["attributes"])

    native = ProtoEncoder(descriptor).encode(batch).to_pylist()

    assert JvmEncoder(spark, descriptor).encode(batch).to_pylist() == native
    assert native[2] == b""


def encode(
    new_encoder: EncoderFactory, registry: SchemaRegistry, name: str, columns: dict[str, Any]
) -> list[Message]:
    encoded = new_encoder(registry.message(name)).encode(pa.RecordBatch.from_pydict(columns))
    return [message_class(registry, name).FromString(payload) for payload in encoded.to_pylist()]


def encode_error(
    new_encoder: EncoderFactory,
    registry: SchemaRegistry,
    name: str,
    columns: dict[str, Any],
    *,
    jvm_finds_it_in_values: bool = False,
) -> str:
    """The message of the error encoding `columns` raises: an EncodeError. The JVM encoder raises it too for
    what the columns' types show (when it is registered), but what only values show (an unknown enum value,
    an integer out of range, text that is not JSON) it finds while encoding the row: the query fails, with
    an IllegalArgumentException holding the same message as the cause of Spark's error."""
    if new_encoder.kind == "jvm" and jvm_finds_it_in_values:
        with pytest.raises(Py4JJavaError) as failed:
            encode(new_encoder, registry, name, columns)
        return java_cause_message(failed.value, "java.lang.IllegalArgumentException")
    with pytest.raises(EncodeError) as raised:
        encode(new_encoder, registry, name, columns)
    return str(raised.value)


def java_cause_message(error: Py4JJavaError, class_name: str) -> str:
    cause = error.java_exception
    while cause is not None:
        if cause.getClass().getName() == class_name:
            return cause.getMessage()
        cause = cause.getCause()
    raise AssertionError(f"no {class_name} caused {error}")


def test_dotted_columns_fill_nested_fields_and_extra_columns_are_ignored(
    registry: SchemaRegistry, new_encoder: EncoderFactory
) -> None:
    messages = encode(
        new_encoder,
        registry,
        PROJECTION,
        {
            "id": ["a", None],
            "point.x": [1.5, None],
            "point.label": ["here", "there"],
            "total": pa.array([5, None], pa.int32()),  # widened to int64
            "window_start": [1, 2],  # extra column
            "other.x": [1.0, 2.0],  # extra dotted column
            "words": [["w1", "w2"], None],
        },
    )

    assert messages == [
        build(
            registry,
            PROJECTION,
            {"id": "a", "point": {"x": 1.5, "label": "here"}, "total": "5", "words": ["w1", "w2"]},
        ),
        build(registry, PROJECTION, {"point": {"label": "there"}}),
    ]


def test_struct_json_column_and_timestamps(registry: SchemaRegistry, new_encoder: EncoderFactory) -> None:
    messages = encode(
        new_encoder,
        registry,
        ALL_TYPES,
        {
            "attributes": ['{"k": [1, {"n": null}], "s": {"t": "u"}}', None],
            "event_time": pa.array([datetime(2024, 1, 1, 0, 0, 1), None], pa.timestamp("ms")),
        },
    )

    assert messages == [
        build(
            registry,
            ALL_TYPES,
            {"attributes": {"k": [1, {"n": None}], "s": {"t": "u"}}, "event_time": "2024-01-01T00:00:01Z"},
        ),
        build(registry, ALL_TYPES, {}),
    ]


def test_integer_enum_columns_map_to_names(registry: SchemaRegistry, new_encoder: EncoderFactory) -> None:
    messages = encode(
        new_encoder,
        registry,
        ALL_TYPES,
        {"colour": pa.array([2, None, 1, 0], pa.int32()), "colours": pa.array([[1, 2], [], None, [0]])},
    )

    assert [message.colour for message in messages] == [2, 0, 1, 0]
    assert [list(message.colours) for message in messages] == [[1, 2], [], [], [0]]
    colour_enum = registry.message(ALL_TYPES).fields_by_name["colour"].enum_type
    assert colour_enum.values_by_number[messages[0].colour].name == "GREEN"


def test_no_matching_columns_gives_empty_messages(
    registry: SchemaRegistry, new_encoder: EncoderFactory
) -> None:
    encoded = new_encoder(registry.message(PROJECTION)).encode(
        pa.RecordBatch.from_pydict({"nothing": [1, 2]})
    )

    assert encoded.to_pylist() == [b"", b""]


@pytest.mark.parametrize(
    ("name", "columns", "expected", "jvm_finds_it_in_values"),
    [
        (
            PROJECTION,
            {"total": ["5"]},
            "column 'total': type mismatch, string cannot fill field dagger.testing.Projection.total "
            "of type int64",
            False,
        ),
        (
            PROJECTION,
            {"id": [5]},
            "column 'id': type mismatch, bigint cannot fill field dagger.testing.Projection.id "
            "of type string",
            False,
        ),
        (
            PROJECTION,
            {"total": [1.5]},
            "column 'total': type mismatch, double cannot fill field dagger.testing.Projection.total "
            "of type int64",
            False,
        ),
        (
            PROJECTION,
            {"colour": ["BLUE"]},
            "column 'colour': 'BLUE' is not a value of enum dagger.testing.Colour "
            "(field colour; values: COLOUR_UNKNOWN, RED, GREEN)",
            True,
        ),
        (
            PROJECTION,
            {"colour": [5]},
            "column 'colour': 5 is not a number of enum dagger.testing.Colour "
            "(field colour; numbers: [0, 1, 2])",
            True,
        ),
        (
            PROJECTION,
            {"point.x": ["east"]},
            "column 'point.x': type mismatch, string cannot fill field dagger.testing.Point.x of type double",
            False,
        ),
        (
            PROJECTION,
            {"words": [[1, 2]]},
            "column 'words[]': type mismatch, bigint cannot fill field dagger.testing.Projection.words "
            "of type string",
            False,
        ),
        (
            PROJECTION,
            {"event_time": ["2024-01-01"]},
            "column 'event_time': type mismatch, string cannot fill field "
            "dagger.testing.Projection.event_time of type google.protobuf.Timestamp",
            False,
        ),
        (
            ALL_TYPES,
            {"segments": [[{"start": {"x": "s"}}]]},
            "column 'segments[].start.x': type mismatch, string cannot fill field dagger.testing.Point.x "
            "of type double",
            False,
        ),
        (
            ALL_TYPES,
            {"labels": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))},
            "column 'labels value': type mismatch, bigint cannot fill field "
            "dagger.testing.AllTypes.LabelsEntry.value of type string",
            False,
        ),
        (
            ALL_TYPES,
            {"attributes": [5]},
            "column 'attributes': type mismatch, bigint cannot fill field dagger.testing.AllTypes.attributes "
            "of type google.protobuf.Struct (expects a JSON string)",
            False,
        ),
        (
            PROJECTION,
            {"point": [{"x": 1.0}], "point.y": [2.0]},
            "columns 'point' and point.* both fill field 'point'; keep one of them",
            False,
        ),
    ],
)
def test_type_mismatches_name_the_column_the_field_and_both_types(
    registry: SchemaRegistry,
    new_encoder: EncoderFactory,
    name: str,
    columns: dict[str, Any],
    expected: str,
    jvm_finds_it_in_values: bool,
) -> None:
    message = encode_error(
        new_encoder, registry, name, columns, jvm_finds_it_in_values=jvm_finds_it_in_values
    )

    assert message == expected


def test_unknown_nested_field_names_the_dotted_column(
    registry: SchemaRegistry, new_encoder: EncoderFactory
) -> None:
    message = encode_error(new_encoder, registry, PROJECTION, {"point.x": [1.0], "point.z": [2.0]})

    assert message == "column 'point.z': dagger.testing.Point has no field 'z' (fields: x, y, label)"


def test_not_json_into_struct(registry: SchemaRegistry, new_encoder: EncoderFactory) -> None:
    message = encode_error(
        new_encoder, registry, ALL_TYPES, {"attributes": ["{not json"]}, jvm_finds_it_in_values=True
    )

    assert message.startswith("column 'attributes': '{not json' is not JSON for a google.protobuf.Struct: ")


@pytest.mark.parametrize(
    ("column", "value", "expected_prefix"),
    [
        (
            "int32_value",
            2**40,
            "column 'int32_value': type mismatch, bigint cannot fill field "
            "dagger.testing.AllTypes.int32_value of type int32: ",
        ),
        (
            "uint32_value",
            -1,
            "column 'uint32_value': type mismatch, bigint cannot fill field "
            "dagger.testing.AllTypes.uint32_value of type uint32: ",
        ),
    ],
)
def test_out_of_range_integers_raise(
    registry: SchemaRegistry, new_encoder: EncoderFactory, column: str, value: int, expected_prefix: str
) -> None:
    message = encode_error(
        new_encoder,
        registry,
        ALL_TYPES,
        {column: pa.array([1, value], pa.int64())},
        jvm_finds_it_in_values=True,
    )

    assert message.startswith(expected_prefix)
    assert str(value) in message


def test_a_null_typed_column_leaves_the_field_unset(
    registry: SchemaRegistry, new_encoder: EncoderFactory
) -> None:
    # Spark sends `SELECT NULL AS total` as an Arrow null-typed column: every row is an absent value.
    messages = encode(new_encoder, registry, PROJECTION, {"id": ["a"], "total": pa.nulls(1)})

    assert messages == [build(registry, PROJECTION, {"id": "a"})]

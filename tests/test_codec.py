"""Protobuf -> Arrow decoding through the native ptars codec and the JVM decoder (`jobs.codec.jvm_protobuf`),
each test run against both: every field's type and value, invalid payloads reported by index, and the
schemas Spark accepts. (Encoding: tests/test_codec_encoding.py; the schema registry:
tests/test_schema_registry.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf.descriptor import Descriptor
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.codec.jvm_protobuf import register_decoder
from jobs.codec.protobuf import ProtoDecoder
from jobs.model.schema_registry import SchemaRegistry
from tests.codec_samples import ALL_TYPES, BOOKING, FULL, SECOND, build
from tests.conftest import message_class

# `descriptor_set` and `registry` are the session fixtures of conftest.py (the set built from protos/).


def sorted_map(entries: list[tuple[Any, Any]] | None) -> list[tuple[Any, Any]] | None:
    """Map entries in key order (their order on the wire is not part of the contract)."""
    return None if entries is None else sorted(entries, key=lambda entry: entry[0])


POINT = pa.struct([("x", pa.float64()), ("y", pa.float64()), ("label", pa.string())])
SEGMENT = pa.struct([("start", POINT), ("end", POINT), ("travel_time", pa.duration("us"))])
ORIGIN = {"x": 0.0, "y": 0.0, "label": ""}

# field, Arrow type, value decoded from FULL, value decoded from an empty message
DECODED_FIELDS = [
    ("id", pa.string(), "booking-1", ""),
    ("int32_value", pa.int32(), -(2**31), 0),
    ("int64_value", pa.int64(), -(2**63), 0),
    ("uint32_value", pa.int64(), 2**32 - 1, 0),
    ("uint64_value", pa.int64(), -1, 0),  # 2**64 - 1 wraps, as in Java
    ("sint32_value", pa.int32(), -7, 0),
    ("sint64_value", pa.int64(), 2**63 - 1, 0),
    ("fixed32_value", pa.int64(), 4_000_000_000, 0),
    ("fixed64_value", pa.int64(), -(2**63), 0),  # 2**63 wraps
    ("float_value", pa.float32(), 1.5, 0.0),
    ("double_value", pa.float64(), -2.25, 0.0),
    ("bool_value", pa.bool_(), True, False),
    ("bytes_value", pa.binary(), b"\x00\x01\xff", b""),
    ("colour", pa.string(), "GREEN", "COLOUR_UNKNOWN"),
    ("event_time", pa.timestamp("us", "UTC"), datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), None),
    ("point", POINT, {"x": 1.0, "y": -2.0, "label": "p"}, None),
    ("numbers", pa.list_(pa.int64()), [1, -2, 3], []),
    ("words", pa.list_(pa.string()), ["a", "", "c"], []),
    ("colours", pa.list_(pa.string()), ["RED", "COLOUR_UNKNOWN", "GREEN"], []),
    (
        "segments",
        pa.list_(SEGMENT),
        [
            {
                "start": {"x": 1.0, "y": 0.0, "label": ""},
                "end": {"x": 0.0, "y": 2.0, "label": "e"},
                "travel_time": timedelta(seconds=1.5),
            },
            {"start": None, "end": None, "travel_time": None},
        ],
        [],
    ),
    ("labels", pa.map_(pa.string(), pa.string()), [("empty", ""), ("k", "v")], []),
    ("points_by_id", pa.map_(pa.int32(), POINT), [(-1, ORIGIN), (7, {"x": 3.0, "y": 0.0, "label": ""})], []),
    ("optional_name", pa.string(), "n", None),
    ("optional_count", pa.int64(), 0, None),  # set to 0 is not unset
    ("optional_flag", pa.bool_(), False, None),
    (
        "attributes",
        pa.string(),
        '{"a":1.0,"b":{"c":[1.0,"x",null,true],"d":{"deeper":[{"e":2.5}]}},"e":{},"l":[{"z":1.0},[],"y"],'
        '"n":null,"s":"text","t":false}',
        None,
    ),
    ("elapsed", pa.duration("us"), timedelta(seconds=3, microseconds=1), None),
]
MAP_FIELDS = {"labels", "points_by_id"}


class JvmDecoder:
    """The JVM decoder (`jobs.codec.jvm_protobuf`) behind ProtoDecoder's interface: the payloads go through
    a Spark query that applies it, and come back as Arrow. An invalid payload is a NULL row there; here it
    is reported by index, as ProtoDecoder reports it, and its row is all nulls."""

    def __init__(self, spark: SparkSession, descriptor: Descriptor) -> None:
        self.descriptor = descriptor
        self.schema = ProtoDecoder(descriptor).schema  # the columns it is asked for: the native decoder's
        self._spark = spark
        self._function = f"decode_{descriptor.name.lower()}"
        register_decoder(spark, self._function, descriptor, from_arrow_schema(self.schema))

    def decode(self, payloads: list[bytes]) -> tuple[pa.RecordBatch, dict[int, str]]:
        frame = self._spark.createDataFrame(list(enumerate(payloads)), "position int, payload binary")
        decoded = frame.select("position", F.call_function(self._function, "payload").alias("record"))
        errors = F.call_function(f"{self._function}_error", "payload").alias("error")
        table = decoded.join(frame.select("position", errors), "position").orderBy("position").toArrow()
        records = table.column("record").combine_chunks()
        if not isinstance(records, pa.StructArray):  # no rows: Spark's Arrow gives the type only
            records = pa.array([], pa.struct(list(self.schema)))
        reasons = table.column("error").to_pylist()
        valid = records.is_valid().to_pylist()
        invalid = {index: reasons[index] for index in range(len(valid)) if not valid[index]}
        columns = [records.field(name) for name in self.schema.names]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema), invalid


def make_decoder(
    kind: str, request: pytest.FixtureRequest, descriptor: Descriptor
) -> ProtoDecoder | JvmDecoder:
    """The decoder of one kind: `native` (ptars) or `jvm` (in the test session's Spark)."""
    if kind == "native":
        return ProtoDecoder(descriptor)
    return JvmDecoder(request.getfixturevalue("spark"), descriptor)


@pytest.fixture(scope="module", params=["native", "jvm"])
def all_types_decoder(request: pytest.FixtureRequest, registry: SchemaRegistry) -> ProtoDecoder | JvmDecoder:
    return make_decoder(request.param, request, registry.message(ALL_TYPES))


@pytest.fixture(scope="module")
def decoded_full_and_empty(registry: SchemaRegistry, all_types_decoder: ProtoDecoder) -> list[dict[str, Any]]:
    payloads = [build(registry, ALL_TYPES, FULL).SerializeToString(), b""]
    batch, invalid = all_types_decoder.decode(payloads)
    assert invalid == {}
    return batch.to_pylist()


# --------------------------------------------------------------------------------------------------------
# ProtoDecoder
# --------------------------------------------------------------------------------------------------------


def test_decoded_schema_is_the_documented_one(all_types_decoder: ProtoDecoder) -> None:
    expected = pa.schema([(name, arrow_type) for name, arrow_type, _, _ in DECODED_FIELDS])

    assert all_types_decoder.schema == expected


@pytest.mark.parametrize(
    ("name", "arrow_type", "full_value", "empty_value"),
    DECODED_FIELDS,
    ids=[row[0] for row in DECODED_FIELDS],
)
def test_every_field_decodes_to_its_type_and_value(
    decoded_full_and_empty: list[dict[str, Any]],
    all_types_decoder: ProtoDecoder,
    name: str,
    arrow_type: pa.DataType,
    full_value: Any,
    empty_value: Any,
) -> None:
    full, empty = (row[name] for row in decoded_full_and_empty)
    if name in MAP_FIELDS:
        full, empty = sorted_map(full), sorted_map(empty)

    assert all_types_decoder.schema.field(name).type == arrow_type
    assert full == full_value
    assert empty == empty_value


@pytest.mark.parametrize("codec", ["native", "jvm"])
def test_fields_numbered_far_apart_decode_and_unknown_numbers_between_them_are_skipped(
    registry: SchemaRegistry, request: pytest.FixtureRequest, codec: str
) -> None:
    descriptor = registry.message("dagger.testing.FarFieldNumbers")
    fields = {"first": "a", "atArrayEnd": "7", "pastArray": "-8", "farRepeated": [1, 2], "largest": "z"}
    known = build(registry, "dagger.testing.FarFieldNumbers", fields).SerializeToString()
    # Unknown fields numbered 2 (inside the array), 5000 (past it) and 200000 (past the map's keys).
    unknown = bytes([0x10, 0x05]) + bytes([0xC0, 0xB8, 0x02, 0x09]) + bytes([0x80, 0xD4, 0x61, 0x0B])
    decoder = make_decoder(codec, request, descriptor)

    decoded, invalid = decoder.decode([known, unknown + known, b""])

    assert invalid == {}
    full = {"first": "a", "at_array_end": 7, "past_array": -8, "far_repeated": [1, 2], "largest": "z"}
    empty = {"first": "", "at_array_end": 0, "past_array": 0, "far_repeated": [], "largest": ""}
    assert decoded.to_pylist() == [full, full, empty]


def test_decoded_timestamps_are_utc(decoded_full_and_empty: list[dict[str, Any]]) -> None:
    assert decoded_full_and_empty[0]["event_time"].utcoffset() == timedelta(0)


def test_unknown_enum_numbers_decode_as_digits(
    registry: SchemaRegistry, all_types_decoder: ProtoDecoder
) -> None:
    message = message_class(registry, ALL_TYPES)(colour=7, colours=[1, 9])

    batch, invalid = all_types_decoder.decode([message.SerializeToString()])

    assert invalid == {}
    assert batch.column("colour").to_pylist() == ["7"]
    assert batch.column("colours").to_pylist() == [["RED", "9"]]


RANDOM_BYTES = b'\xc7(\xc83\x90,\xf7tc\x91\x11\xf9\x7f$\x1af\xf4\xbb\xd7\xf8\xd3\x8f\xb3bVM\xcb\x99"\t3\x8f'


def test_invalid_payloads_are_reported_by_index_and_the_rest_decodes(
    registry: SchemaRegistry, all_types_decoder: ProtoDecoder
) -> None:
    full = build(registry, ALL_TYPES, FULL).SerializeToString()
    second = build(registry, ALL_TYPES, SECOND).SerializeToString()
    payloads = [full, full[:-1], second, RANDOM_BYTES, b"\x08", b"\xff\xff\xff", b""]

    batch, invalid = all_types_decoder.decode(payloads)

    assert sorted(invalid) == [1, 3, 4, 5]
    rows = batch.to_pylist()
    assert len(rows) == len(payloads)
    assert rows[0] == _row(all_types_decoder, full)
    assert rows[2] == _row(all_types_decoder, second)
    assert rows[6] == _row(all_types_decoder, b"")
    if isinstance(all_types_decoder, JvmDecoder):  # protobuf-java's reasons; an invalid row is NULL
        truncated = (
            "failed to decode Protobuf message: While parsing a protocol message, the input ended "
            "unexpectedly in the middle of a field."
        )
        assert [invalid[index].split("  ")[0] for index in (1, 3, 4, 5)] == [
            truncated,
            "failed to decode Protobuf message: Protocol message tag had invalid wire type.",
            truncated,
            truncated,
        ]
        assert [rows[index] for index in (1, 3, 4, 5)] == [dict.fromkeys(all_types_decoder.schema.names)] * 4
    else:
        assert invalid[1] == "failed to decode Protobuf message: unexpected EOF"  # truncated inside `elapsed`
        assert invalid[3] == "failed to decode Protobuf message: unsupported wire type"
        assert invalid[4] == "failed to decode Protobuf message: unexpected EOF in varint"
        assert invalid[5] == "failed to decode Protobuf message: unexpected EOF in varint"
        assert [rows[index] for index in (1, 3, 4, 5)] == [rows[6]] * 4  # invalid rows hold defaults


def _row(decoder: ProtoDecoder, payload: bytes) -> dict[str, Any]:
    batch, invalid = decoder.decode([payload])
    assert invalid == {}
    return batch.to_pylist()[0]


def test_a_valid_batch_reports_nothing_invalid(
    registry: SchemaRegistry, all_types_decoder: ProtoDecoder
) -> None:
    batch, invalid = all_types_decoder.decode([build(registry, ALL_TYPES, SECOND).SerializeToString()] * 3)

    assert invalid == {}
    assert batch.num_rows == 3
    assert batch.column("id").to_pylist() == ["booking-2"] * 3


def test_an_empty_batch(all_types_decoder: ProtoDecoder) -> None:
    batch, invalid = all_types_decoder.decode([])

    assert invalid == {}
    assert batch.num_rows == 0
    assert batch.schema == all_types_decoder.schema


def test_spark_accepts_the_decoded_schemas(registry: SchemaRegistry, all_types_decoder: ProtoDecoder) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    point = "struct<x:double,y:double,label:string>"
    assert from_arrow_schema(all_types_decoder.schema).simpleString() == (
        "struct<id:string,int32_value:int,int64_value:bigint,uint32_value:bigint,uint64_value:bigint,"
        "sint32_value:int,sint64_value:bigint,fixed32_value:bigint,fixed64_value:bigint,float_value:float,"
        "double_value:double,bool_value:boolean,bytes_value:binary,colour:string,event_time:timestamp,"
        f"point:{point},numbers:array<bigint>,words:array<string>,colours:array<string>,"
        f"segments:array<struct<start:{point},end:{point},travel_time:interval day to second>>,"
        f"labels:map<string,string>,points_by_id:map<int,{point}>,optional_name:string,optional_count:bigint,"
        "optional_flag:boolean,attributes:string,elapsed:interval day to second>"
    )
    booking = ProtoDecoder(registry.message(BOOKING)).schema
    location = "struct<name:string,latitude:double,longitude:double>"
    assert from_arrow_schema(booking).simpleString() == (
        "struct<service_type:string,order_number:string,status:string,event_timestamp:timestamp,"
        "customer_id:string,driver_id:string,service_area_id:string,amount_paid_by_cash:float,"
        "customer_price:double,total_distance_meters:bigint,is_surge:boolean,"
        f"pickup_location:{location},dropoff_location:{location},tags:array<string>,"
        "metadata:map<string,string>,voucher_discount:double>"
    )

"""Arrow batches encoded column by column as Confluent wire-format Avro: byte for byte what fastavro writes
for the same rows in the same schema, and read back by the stream decoder."""

from __future__ import annotations

import io
import math
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from jobs.codec import avro_encoding
from jobs.codec.avro import ConfluentAvroDecoder
from jobs.codec.avro_encoding import AvroEncoder, avro_schema_of

SCHEMA_ID = 0x01020304
HEADER = b"\x00\x01\x02\x03\x04"
ROWS = 16
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
AT = datetime(2026, 11, 26, 10, 30, 15, 123456, tzinfo=UTC)


def column(values: list, arrow_type: pa.DataType) -> pa.Array:
    """`values` repeated to ROWS rows."""
    return pa.array([values[row % len(values)] for row in range(ROWS)], arrow_type)


POINT = pa.struct(
    [
        ("x", pa.float64()),
        ("label", pa.string()),
        ("inner", pa.struct([("at", pa.timestamp("us", tz="UTC")), ("tags", pa.list_(pa.string()))])),
    ]
)
STOP = pa.struct([("name", pa.string()), ("seq", pa.int32())])


def every_type_batch() -> pa.RecordBatch:
    """Each supported type, with nulls at every level, empty and non-empty lists and maps."""
    texts = ["", "a", None, "héllo wörld ✓", "日本語", "x" * 300, "\x00nul", "emoji 🎉"]
    blobs = [b"", b"\x00\xff\x80", None, bytes(range(256)), b"z"]
    return pa.record_batch(
        {
            "text": column(texts, pa.string()),
            "large_text": column(texts[::-1], pa.large_string()),
            "blob": column(blobs, pa.binary()),
            "large_blob": column(blobs[::-1], pa.large_binary()),
            "flag": column([True, False, None], pa.bool_()),
            "i8": column([-128, 127, None, 0, -1], pa.int8()),
            "i16": column([-(2**15), 2**15 - 1, None, 64, -65], pa.int16()),
            "i32": column([-(2**31), 2**31 - 1, None, 8191, -8193], pa.int32()),
            "u8": column([255, 0, None], pa.uint8()),
            "u16": column([65535, None, 128], pa.uint16()),
            "u32": column([2**32 - 1, None, 2**31], pa.uint32()),
            "i64": column([-(2**63), 2**63 - 1, None, 0, -1, 63, 64, -64, -65, 2**62], pa.int64()),
            "f32": column([math.inf, -math.inf, -0.0, 1.5, None, 3.4e38, 1e-45], pa.float32()),
            "f64": column([math.inf, -math.inf, -0.0, None, 1e308, 5e-324, -2.5], pa.float64()),
            "ts_utc": column([AT, None, EPOCH - timedelta(microseconds=1), EPOCH], pa.timestamp("us", "UTC")),
            "ts_ns": column([1_700_000_000_123_456_789, None, -1, -1_001, 999], pa.timestamp("ns")),
            "ts_ms": column([1_700_000_000_123, -1, None], pa.timestamp("ms", "Asia/Jakarta")),
            "ts_s": column([1_700_000_000, None, -86_400], pa.timestamp("s")),
            "day": column([date(2026, 11, 26), None, date(1969, 12, 31), date(1, 1, 1)], pa.date32()),
            "point": column(
                [
                    {"x": 1.5, "label": "p", "inner": {"at": AT, "tags": ["a", None, ""]}},
                    None,
                    {"x": None, "label": None, "inner": None},
                    {"x": -0.0, "label": "ü", "inner": {"at": None, "tags": []}},
                    {"x": 2.0, "label": "", "inner": {"at": EPOCH, "tags": None}},
                ],
                POINT,
            ),
            "numbers": column([[1, None, -(2**63)], [], None, [2**63 - 1], [None]], pa.list_(pa.int64())),
            "names": column([["ö", None], None, [], ["b" * 200, "c"]], pa.large_list(pa.string())),
            "stops": column(
                [[{"name": "a", "seq": 1}, None, {"name": None, "seq": None}], [], None], pa.list_(STOP)
            ),
            "matrix": column(
                [[[1, 2], [], None, [None, -3]], [], None, [[]]], pa.list_(pa.list_(pa.int32()))
            ),
            "attrs": column(
                [[("a", 1), ("ключ", None), ("", -(2**40))], [], None, [("z", 0)]],
                pa.map_(pa.string(), pa.int64()),
            ),
            "stop_by_key": column(
                [[("home", {"name": "h", "seq": 7}), ("gone", None)], None, []],
                pa.map_(pa.large_string(), STOP),
            ),
            "list_by_key": column(
                [[("xs", [1.5, None]), ("none", None), ("empty", [])], []],
                pa.map_(pa.string(), pa.list_(pa.float32())),
            ),
        }
    )


def wire_records(batch: pa.RecordBatch, avro_schema: dict) -> list[bytes]:
    """The reference: fastavro's datum of each row after the wire header."""
    parsed = fastavro.parse_schema(avro_schema)
    names = [field["name"] for field in avro_schema["fields"]]
    columns = [_plain_column(batch.column(name)) for name in names]
    records = []
    for values in zip(*columns, strict=True):
        out = io.BytesIO(HEADER)
        out.seek(len(HEADER))
        fastavro.schemaless_writer(out, parsed, dict(zip(names, values, strict=True)))
        records.append(out.getvalue())
    return records


def _plain_column(array: pa.Array) -> list:
    """Python values fastavro writes as the encoder should: timestamps as floored microseconds."""
    if pa.types.is_timestamp(array.type):
        scale = {"s": 1_000_000, "ms": 1_000, "us": 1}
        ticks = array.cast(pa.int64()).to_pylist()
        if array.type.unit == "ns":
            return [None if tick is None else tick // 1_000 for tick in ticks]
        return [None if tick is None else tick * scale[array.type.unit] for tick in ticks]
    return [_plain(value, array.type) for value in array.to_pylist()]


def _plain(value: Any, arrow_type: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return {key: _plain(item, arrow_type.item_type) for key, item in value}
    if pa.types.is_struct(arrow_type):
        return {field.name: _plain(value[field.name], field.type) for field in arrow_type}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_plain(item, arrow_type.value_type) for item in value]
    if pa.types.is_timestamp(arrow_type):
        return (value - EPOCH) // timedelta(microseconds=1)
    return value


def assert_encodes_like_fastavro(batch: pa.RecordBatch) -> None:
    encoder = AvroEncoder(batch.schema, SCHEMA_ID)
    encoded = encoder.encode(batch)
    assert encoded.type == pa.binary()
    assert encoded.to_pylist() == wire_records(batch, encoder.avro_schema)


def test_the_avro_schema_has_a_nullable_field_per_column_and_a_named_record_per_struct():
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("at", pa.timestamp("ns", "Asia/Jakarta")),
            ("day", pa.date32()),
            ("stops", pa.list_(STOP)),
            ("attrs", pa.map_(pa.string(), pa.float32())),
            ("flag", pa.bool_()),
        ]
    )
    assert avro_schema_of(schema, "com.example.Booking") == {
        "type": "record",
        "name": "com.example.Booking",
        "fields": [
            {"name": "id", "type": ["null", "long"], "default": None},
            {
                "name": "at",
                "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
                "default": None,
            },
            {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
            {
                "name": "stops",
                "type": [
                    "null",
                    {
                        "type": "array",
                        "items": [
                            "null",
                            {
                                "type": "record",
                                "name": "Booking_stops",
                                "fields": [
                                    {"name": "name", "type": ["null", "string"], "default": None},
                                    {"name": "seq", "type": ["null", "int"], "default": None},
                                ],
                            },
                        ],
                    },
                ],
                "default": None,
            },
            {
                "name": "attrs",
                "type": ["null", {"type": "map", "values": ["null", "float"]}],
                "default": None,
            },
            {"name": "flag", "type": ["null", "boolean"], "default": None},
        ],
    }


def test_nested_records_get_distinct_names_fastavro_accepts():
    schema = pa.schema(
        [
            ("a", pa.struct([("b_c", pa.struct([("v", pa.int32())]))])),
            ("a_b", pa.struct([("c", pa.struct([("v", pa.int32())]))])),
        ]
    )
    avro_schema = avro_schema_of(schema, "row")
    fastavro.parse_schema(avro_schema)  # raises on a name defined twice
    names = re.findall(r"'name': '(row_[^']*)'", str(avro_schema))
    assert len(names) == len(set(names)) == 4


def test_every_type_encodes_byte_for_byte_like_fastavro():
    assert_encodes_like_fastavro(every_type_batch())


def test_a_sliced_batch_encodes_its_rows_only():
    assert_encodes_like_fastavro(every_type_batch().slice(3, 10))


def test_a_batch_encoded_in_many_slices_is_the_same(monkeypatch: pytest.MonkeyPatch):
    batch = every_type_batch()
    whole = AvroEncoder(batch.schema, SCHEMA_ID).encode(batch)
    monkeypatch.setattr(avro_encoding, "_SLICE_BYTES", 1)  # a row a slice
    assert AvroEncoder(batch.schema, SCHEMA_ID).encode(batch).equals(whole)


def test_a_zero_row_batch_encodes_to_no_records():
    batch = every_type_batch().slice(0, 0)
    encoded = AvroEncoder(batch.schema, SCHEMA_ID).encode(batch)
    assert encoded.type == pa.binary()
    assert len(encoded) == 0


def test_integers_at_every_varint_width():
    boundaries = sorted(
        {sign * (2**bits + delta) for bits in range(0, 63) for delta in (-1, 0) for sign in (1, -1)}
    )
    values = [-(2**63), *boundaries, 2**63 - 1]
    batch = pa.record_batch({"n": pa.array(values, pa.int64()), "m": pa.array(values[::-1], pa.int64())})
    assert_encodes_like_fastavro(batch)


def test_nan_floats_keep_their_bytes():
    batch = pa.record_batch(
        {
            "f32": pa.array([math.nan, None, 1.0], pa.float32()),
            "f64": pa.array([math.nan, -math.nan, None], pa.float64()),
        }
    )
    assert_encodes_like_fastavro(batch)


def test_the_slots_of_nulls_are_never_encoded():
    """Arrow leaves a null's value slot undefined: a length, a list range, a struct's children."""
    validity = pa.array([True, False, True, False, True]).buffers()[1]
    offsets = pa.array([0, 2, 7, 9, 12, 14], pa.int32()).buffers()[1]
    texts = pa.Array.from_buffers(pa.string(), 5, [validity, offsets, pa.py_buffer(b"abGARBAcdXYZef")])
    numbers = pa.Array.from_buffers(
        pa.int64(), 5, [validity, pa.array([1, 2**60, 3, -(2**60), 5]).buffers()[1]]
    )
    lists = pa.ListArray.from_arrays(
        pa.array([0, 1, 3, 4, 6, 7], pa.int32()),
        pa.array(range(7), pa.int64()),
        mask=pa.array([False, True, False, True, False]),
    )
    structs = pa.StructArray.from_arrays(
        [pa.array(["a", "b", "c", "d", "e"]), pa.array([1, 2, 3, 4, 5], pa.int32())],
        names=["s", "n"],
        mask=pa.array([False, True, True, False, False]),
    )
    batch = pa.record_batch({"texts": texts, "numbers": numbers, "lists": lists, "structs": structs})
    assert batch.column("texts").to_pylist() == ["ab", None, "cd", None, "ef"]
    assert_encodes_like_fastavro(batch)
    assert_encodes_like_fastavro(batch.slice(1, 3))


def test_the_decoder_reads_back_the_same_rows():
    batch = every_type_batch()
    encoder = AvroEncoder(batch.schema, SCHEMA_ID)
    encoded = encoder.encode(batch.slice(2, 13))
    decoder = ConfluentAvroDecoder(encoder.avro_schema, {SCHEMA_ID: encoder.avro_schema}.get)
    decoded, invalid = decoder.decode(encoded.to_pylist())
    assert invalid == {}
    expected = pa.record_batch(
        [_as_decoded(batch.column(name)) for name in batch.schema.names], batch.schema.names
    )
    assert decoded.to_pylist() == expected.slice(2, 13).to_pylist()


def _as_decoded(array: pa.Array) -> pa.Array:
    """A column as the decoder gives it back: timestamps as floored microseconds in UTC."""
    if pa.types.is_timestamp(array.type):
        return pa.array(_plain_column(array), pa.int64()).cast(pa.timestamp("us", "UTC"))
    return array


def test_a_wire_record_starts_with_magic_byte_and_big_endian_schema_id():
    batch = pa.record_batch({"n": pa.array([1, None], pa.int32())})
    assert AvroEncoder(batch.schema, 258).encode(batch).to_pylist() == [
        b"\x00\x00\x00\x01\x02\x02\x02",
        b"\x00\x00\x00\x01\x02\x00",
    ]


def test_columns_are_taken_by_name_in_the_encoders_order():
    schema = pa.schema([("a", pa.string()), ("b", pa.int64())])
    batch = pa.record_batch(
        {"extra": pa.array([1.0, 2.0]), "b": pa.array([7, None]), "a": pa.array(["x", "y"])}
    )
    encoder = AvroEncoder(schema, SCHEMA_ID)
    assert encoder.encode(batch).to_pylist() == wire_records(batch.select(["a", "b"]), encoder.avro_schema)


def test_a_missing_column_or_another_type_is_named():
    encoder = AvroEncoder(pa.schema([("a", pa.string()), ("b", pa.int64())]), SCHEMA_ID)
    with pytest.raises(ValueError, match="column 'b': not in the batch"):
        encoder.encode(pa.record_batch({"a": pa.array(["x"])}))
    with pytest.raises(ValueError, match="column 'b': type int32"):
        encoder.encode(pa.record_batch({"a": pa.array(["x"]), "b": pa.array([1], pa.int32())}))


@pytest.mark.parametrize(
    ("arrow_type", "path", "unsupported"),
    [
        (pa.decimal128(10, 2), "price", "decimal128(10, 2)"),
        (pa.uint64(), "price", "uint64"),
        (pa.duration("s"), "price", "duration[s]"),
        (pa.float16(), "price", "halffloat"),
        (pa.null(), "price", "null"),
        (pa.dictionary(pa.int32(), pa.string()), "price", "dictionary<values=string"),
        (pa.map_(pa.int32(), pa.string()), "price", "map<int32, string>"),
        (
            pa.struct([("inner", pa.struct([("amount", pa.decimal128(5, 1))]))]),
            "price.inner.amount",
            "decimal",
        ),
        (pa.list_(pa.struct([("at", pa.time64("us"))])), "price[].at", "time64[us]"),
        (pa.map_(pa.string(), pa.uint64()), "price{}", "uint64"),
    ],
)
def test_an_unsupported_type_is_named_with_its_column(arrow_type: pa.DataType, path: str, unsupported: str):
    schema = pa.schema([("id", pa.int64()), ("price", arrow_type)])
    with pytest.raises(ValueError, match=re.escape(f"column {path!r}: Arrow type {unsupported}")):
        avro_schema_of(schema, "row")
    with pytest.raises(ValueError, match=re.escape(f"column {path!r}")):
        AvroEncoder(schema, SCHEMA_ID)


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        (pa.schema([("order-id", pa.string())]), "order-id"),
        (pa.schema([("1st", pa.string())]), "1st"),
        (pa.schema([("", pa.string())]), ""),
        (pa.schema([("outer", pa.struct([("has space", pa.int32())]))]), "outer.has space"),
        (pa.schema([("a", pa.int32()), ("a", pa.int64())]), "a"),
    ],
)
def test_a_column_name_avro_does_not_allow_is_named(schema: pa.Schema, path: str):
    with pytest.raises(ValueError, match=re.escape(f"column {path!r}")):
        avro_schema_of(schema, "row")


def test_the_record_name_must_be_an_avro_name():
    with pytest.raises(ValueError, match="record name 'my-row'"):
        avro_schema_of(pa.schema([("a", pa.int32())]), "my-row")


def test_large_batches_encode_like_fastavro():
    rng = np.random.default_rng(3)
    count = 50_000
    batch = pa.record_batch(
        {
            "n": pa.array(
                rng.integers(-(2**63), 2**63 - 1, count, dtype=np.int64), mask=rng.random(count) < 0.1
            ),
            "s": pa.array(np.char.add("row-", rng.integers(0, 10**9, count).astype(str))),
            "xs": pa.ListArray.from_arrays(
                np.concatenate([[0], np.cumsum(rng.integers(0, 4, count))]).astype(np.int32),
                pa.array(rng.random(count * 4)),
            ),
        }
    )
    assert_encodes_like_fastavro(batch)

"""Every protobuf type through both decoders and both encoders: `dagger.testing.EveryType` holds each scalar
type, an enum, a oneof, the nine wrappers and Value/ListValue/Struct. Each decoder (the native ptars one and
the JVM one) gives every column its documented type and value (docs/dagger-file.md, "Protobuf types"), and
each encoder writes the decoded rows back into the messages they came from, for all four pairs. Values sit at
the edges: each integer type's minimum and maximum (the unsigned ones wrapped), NaN and infinities, empty
text and bytes, wrappers holding their zero value (set, so not NULL), a oneof holding each member, none,
and two members sent one after the other (the last one holds, as protobuf reads it)."""

from __future__ import annotations

import base64
import math
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf.message import Message
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.codec.protobuf import ProtoDecoder
from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.model.schema_registry import SchemaRegistry
from tests.codec_samples import build
from tests.conftest import message_class
from tests.test_codec import POINT, JvmDecoder, make_decoder
from tests.test_codec_encoding import JvmEncoder

EVERY_TYPE = "dagger.testing.EveryType"
NAN = math.nan
INF = math.inf
I32, I64 = 2**31, 2**63

# Every field set, at the top of its range; the wrappers hold their zero value, the oneof its message.
HIGHS = {
    "double_value": "NaN",
    "float_value": "Infinity",
    "int32_value": I32 - 1,
    "int64_value": str(I64 - 1),
    "uint32_value": 2**32 - 1,
    "uint64_value": str(2**64 - 1),
    "sint32_value": I32 - 1,
    "sint64_value": str(I64 - 1),
    "fixed32_value": 2**32 - 1,
    "fixed64_value": str(2**64 - 1),
    "sfixed32_value": I32 - 1,
    "sfixed64_value": str(I64 - 1),
    "bool_value": True,
    "string_value": 'snow \u2603 "quoted"\n',
    "bytes_value": base64.b64encode(b"\x00\x01\xff").decode(),
    "colour": "GREEN",
    "choice_point": {"x": 1.5, "label": "p"},
    "double_wrapper": 0,
    "float_wrapper": 0,
    "int64_wrapper": "0",
    "uint64_wrapper": "0",
    "int32_wrapper": 0,
    "uint32_wrapper": 0,
    "bool_wrapper": False,
    "string_wrapper": "",
    "bytes_wrapper": "",
    "value": None,  # a Value holding null_value: set, so the JSON text `null`, not NULL
    "list_value": [1, "a", None, True, {"k": []}, [2.5, [False]]],
    "struct_value": {"a": {"b": [True, {"c": None}]}, "e": {}, "n": -0.5, "s": "\u2603"},
}
# At the bottom of each range (unsigned: past the signed maximum, which wraps); the wrappers at their edges.
LOWS = {
    "double_value": "-Infinity",
    "float_value": "NaN",
    "int32_value": -I32,
    "int64_value": str(-I64),
    "uint32_value": 1,
    "uint64_value": str(I64),
    "sint32_value": -I32,
    "sint64_value": str(-I64),
    "fixed32_value": I32,
    "fixed64_value": str(I64),
    "sfixed32_value": -I32,
    "sfixed64_value": str(-I64),
    "bool_value": False,
    "string_value": "",
    "bytes_value": "",
    "colour": "RED",
    "choice_number": str(-I64),
    "double_wrapper": "NaN",
    "float_wrapper": "-Infinity",
    "int64_wrapper": str(-I64),
    "uint64_wrapper": str(2**64 - 1),
    "int32_wrapper": -I32,
    "uint32_wrapper": 2**32 - 1,
    "bool_wrapper": True,
    "string_wrapper": "w",
    "bytes_wrapper": base64.b64encode(b"\xff").decode(),
    "value": {"nested": [1e300, "x"]},
    "list_value": [],
    "struct_value": {},
}

# field, Arrow type, value decoded from HIGHS, from LOWS, from an empty message
DECODED_FIELDS = [
    ("double_value", pa.float64(), NAN, -INF, 0.0),
    ("float_value", pa.float32(), INF, NAN, 0.0),
    ("int32_value", pa.int32(), I32 - 1, -I32, 0),
    ("int64_value", pa.int64(), I64 - 1, -I64, 0),
    ("uint32_value", pa.int64(), 2**32 - 1, 1, 0),
    ("uint64_value", pa.int64(), -1, -I64, 0),  # two's complement, as in Java
    ("sint32_value", pa.int32(), I32 - 1, -I32, 0),
    ("sint64_value", pa.int64(), I64 - 1, -I64, 0),
    ("fixed32_value", pa.int64(), 2**32 - 1, I32, 0),
    ("fixed64_value", pa.int64(), -1, -I64, 0),
    ("sfixed32_value", pa.int32(), I32 - 1, -I32, 0),
    ("sfixed64_value", pa.int64(), I64 - 1, -I64, 0),
    ("bool_value", pa.bool_(), True, False, False),
    ("string_value", pa.string(), 'snow \u2603 "quoted"\n', "", ""),
    ("bytes_value", pa.binary(), b"\x00\x01\xff", b"", b""),
    ("colour", pa.string(), "GREEN", "RED", "COLOUR_UNKNOWN"),
    ("choice_number", pa.int64(), None, -I64, None),
    ("choice_text", pa.string(), None, None, None),
    ("choice_point", POINT, {"x": 1.5, "y": 0.0, "label": "p"}, None, None),
    ("double_wrapper", pa.float64(), 0.0, NAN, None),  # set to zero is not unset
    ("float_wrapper", pa.float32(), 0.0, -INF, None),
    ("int64_wrapper", pa.int64(), 0, -I64, None),
    ("uint64_wrapper", pa.int64(), 0, -1, None),
    ("int32_wrapper", pa.int32(), 0, -I32, None),
    ("uint32_wrapper", pa.int64(), 0, 2**32 - 1, None),
    ("bool_wrapper", pa.bool_(), False, True, None),
    ("string_wrapper", pa.string(), "", "w", None),
    ("bytes_wrapper", pa.binary(), b"", b"\xff", None),
    ("value", pa.string(), "null", '{"nested":[1e+300,"x"]}', None),
    ("list_value", pa.string(), '[1.0,"a",null,true,{"k":[]},[2.5,[false]]]', "[NaN,-Infinity]", None),
    ("struct_value", pa.string(), '{"a":{"b":[true,{"c":null}]},"e":{},"n":-0.5,"s":"\\u2603"}', "{}", None),
]


def every_type(registry: SchemaRegistry, fields: dict[str, Any]) -> Message:
    return build(registry, EVERY_TYPE, fields)


def lows(registry: SchemaRegistry) -> Message:
    message = every_type(registry, LOWS)
    for number in (NAN, -INF):  # protobuf JSON has no NaN in a Value: a string "NaN" would be a string_value
        message.list_value.values.add().number_value = number
    return message


def concatenated(registry: SchemaRegistry, *parts: dict[str, Any]) -> bytes:
    """Messages written one after the other: protobuf reads them as one, merged."""
    return b"".join(every_type(registry, part).SerializeToString() for part in parts)


# A oneof: name, payload's parts (one message each, concatenated), choice_number, choice_text, choice_point
ONEOF_CASES = [
    ("none", [{}], None, None, None),
    ("number zero", [{"choice_number": "0"}], 0, None, None),
    ("text empty", [{"choice_text": ""}], None, "", None),
    ("text", [{"choice_text": "t"}], None, "t", None),
    ("point empty", [{"choice_point": {}}], None, None, {"x": 0.0, "y": 0.0, "label": ""}),
    ("number then text", [{"choice_number": "5"}, {"choice_text": "t"}], None, "t", None),
    (
        "text, point, then number",
        [{"choice_text": "t"}, {"choice_point": {"x": 1}}, {"choice_number": "0"}],
        0,
        None,
        None,
    ),
    (
        "point twice, merged",
        [{"choice_point": {"x": 1}}, {"choice_point": {"y": 2}}],
        None,
        None,
        {"x": 1.0, "y": 2.0, "label": ""},
    ),
]


def payloads(registry: SchemaRegistry) -> list[bytes]:
    """HIGHS, LOWS, an empty message, then each oneof case."""
    messages = [every_type(registry, HIGHS).SerializeToString(), lows(registry).SerializeToString(), b""]
    return messages + [concatenated(registry, *parts) for _, parts, *_ in ONEOF_CASES]


def nan_as_text(value: Any) -> Any:
    """NaN compares unequal to itself: as text, two NaNs are the same value."""
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


@pytest.fixture(scope="module", params=["native", "jvm"])
def decoder(request: pytest.FixtureRequest, registry: SchemaRegistry) -> ProtoDecoder | JvmDecoder:
    return make_decoder(request.param, request, registry.message(EVERY_TYPE))


@pytest.fixture(scope="module")
def decoded(registry: SchemaRegistry, decoder: ProtoDecoder | JvmDecoder) -> pa.RecordBatch:
    batch, invalid = decoder.decode(payloads(registry))
    assert invalid == {}
    return batch


def test_the_decoded_schema_is_the_documented_one(decoder: ProtoDecoder, decoded: pa.RecordBatch) -> None:
    expected = pa.schema([(name, arrow_type) for name, arrow_type, *_ in DECODED_FIELDS])

    assert decoder.schema == expected
    assert decoded.schema == expected
    point = "struct<x:double,y:double,label:string>"
    assert from_arrow_schema(expected).simpleString() == (
        "struct<double_value:double,float_value:float,int32_value:int,int64_value:bigint,uint32_value:bigint,"
        "uint64_value:bigint,sint32_value:int,sint64_value:bigint,fixed32_value:bigint,fixed64_value:bigint,"
        "sfixed32_value:int,sfixed64_value:bigint,bool_value:boolean,string_value:string,bytes_value:binary,"
        f"colour:string,choice_number:bigint,choice_text:string,choice_point:{point},double_wrapper:double,"
        "float_wrapper:float,int64_wrapper:bigint,uint64_wrapper:bigint,int32_wrapper:int,"
        "uint32_wrapper:bigint,bool_wrapper:boolean,string_wrapper:string,bytes_wrapper:binary,"
        "value:string,list_value:string,struct_value:string>"
    )


@pytest.mark.parametrize(
    ("name", "arrow_type", "highs", "lows", "empty"), DECODED_FIELDS, ids=[row[0] for row in DECODED_FIELDS]
)
def test_every_field_decodes_to_its_type_and_value(
    decoded: pa.RecordBatch, name: str, arrow_type: pa.DataType, highs: Any, lows: Any, empty: Any
) -> None:
    column = decoded.column(name)

    assert column.type == arrow_type
    assert [nan_as_text(value) for value in column.to_pylist()[:3]] == [
        nan_as_text(value) for value in (highs, lows, empty)
    ]


@pytest.mark.parametrize(
    ("case", "number", "text", "point"),
    [(case, number, text, point) for case, _, number, text, point in ONEOF_CASES],
    ids=[case[0] for case in ONEOF_CASES],
)
def test_a_oneof_is_a_column_per_member_null_but_the_one_set_last(
    decoded: pa.RecordBatch, case: str, number: int | None, text: str | None, point: dict | None
) -> None:
    row = 3 + [name for name, *_ in ONEOF_CASES].index(case)
    members = decoded.select(["choice_number", "choice_text", "choice_point"]).slice(row, 1).to_pylist()

    assert members == [{"choice_number": number, "choice_text": text, "choice_point": point}]


@pytest.mark.parametrize("encoder_kind", ["native", "jvm"])
def test_the_decoded_rows_encode_back_into_their_messages(
    registry: SchemaRegistry, request: pytest.FixtureRequest, decoded: pa.RecordBatch, encoder_kind: str
) -> None:
    descriptor = registry.message(EVERY_TYPE)
    encoder = (
        ProtoEncoder(descriptor)
        if encoder_kind == "native"
        else JvmEncoder(request.getfixturevalue("spark"), descriptor)
    )
    every = message_class(registry, EVERY_TYPE)
    originals = [every.FromString(payload) for payload in payloads(registry)]

    encoded = [every.FromString(payload) for payload in encoder.encode(decoded).to_pylist()]

    assert len(encoded) == len(originals)
    for index, (again, original) in enumerate(zip(encoded, originals, strict=True)):
        assert again == original, f"row {index}:\n{again}\n!=\n{original}"  # NaN equals NaN here
    assert math.isnan(encoded[0].double_value) and math.isnan(encoded[1].double_wrapper.value)
    assert encoded[0].HasField("double_wrapper") and encoded[0].double_wrapper.value == 0.0
    assert encoded[0].WhichOneof("choice") == "choice_point" and encoded[3].WhichOneof("choice") is None
    assert encoded[2] == every() and encoded[2].ByteSize() == 0
    assert [encoded[index].WhichOneof("choice") for index in (4, 5, 8, 9)] == [
        "choice_number",
        "choice_text",
        "choice_text",
        "choice_number",
    ]

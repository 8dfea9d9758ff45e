"""The protobuf messages the codec tests decode and encode: the test messages' names, and two populated
`dagger.testing.AllTypes` (`FULL`, with every value chosen to show its conversion, and `SECOND`) written
as protobuf JSON, built into messages by `build`."""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from jobs.model.schema_registry import SchemaRegistry
from tests.conftest import message_class

ALL_TYPES = "dagger.testing.AllTypes"
PROJECTION = "dagger.testing.Projection"
BOOKING = "dagger.examples.BookingLogMessage"


def build(registry: SchemaRegistry, name: str, fields: dict[str, Any]) -> Message:
    """A message from proto field names, values written as in protobuf JSON."""
    return json_format.ParseDict(fields, message_class(registry, name)())


# A fully populated AllTypes, every value chosen to show its conversion (extremes, wraps, presence).
FULL = {
    "id": "booking-1",
    "int32_value": -2147483648,
    "int64_value": "-9223372036854775808",
    "uint32_value": 4294967295,
    "uint64_value": "18446744073709551615",
    "sint32_value": -7,
    "sint64_value": "9223372036854775807",
    "fixed32_value": 4000000000,
    "fixed64_value": "9223372036854775808",
    "float_value": 1.5,
    "double_value": -2.25,
    "bool_value": True,
    "bytes_value": base64.b64encode(b"\x00\x01\xff").decode(),
    "colour": "GREEN",
    "event_time": "2024-01-02T03:04:05.123456Z",
    "point": {"x": 1.0, "y": -2.0, "label": "p"},
    "numbers": [1, -2, 3],
    "words": ["a", "", "c"],
    "colours": ["RED", "COLOUR_UNKNOWN", "GREEN"],
    "segments": [{"start": {"x": 1}, "end": {"y": 2, "label": "e"}, "travel_time": "1.5s"}, {}],
    "labels": {"k": "v", "empty": ""},
    "points_by_id": {"7": {"x": 3}, "-1": {}},
    "optional_name": "n",
    "optional_count": "0",
    "optional_flag": False,
    "attributes": {
        "a": 1,
        "s": "text",
        "b": {"c": [1, "x", None, True], "d": {"deeper": [{"e": 2.5}]}},
        "l": [{"z": 1}, [], "y"],
        "n": None,
        "t": False,
        "e": {},
    },
    "elapsed": "3.000001s",
}

# A second, differently populated one: other enum values, non-default wrappers, negative duration.
SECOND = {
    "id": "booking-2",
    "int32_value": 2147483647,
    "uint64_value": "1",
    "colour": "RED",
    "event_time": "1969-12-31T23:59:59.999999Z",
    "point": {},
    "numbers": [0],
    "colours": ["GREEN"],
    "segments": [{"travel_time": "-0.000001s"}],
    "points_by_id": {"0": {"label": "origin"}},
    "optional_name": "",
    "optional_count": "-5",
    "optional_flag": True,
    "attributes": {"only": "one"},
    "elapsed": "-1.5s",
}

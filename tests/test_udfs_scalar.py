"""Dagger's scalar functions called from Spark SQL: geometry, arrays and maps, text, JSON, protobuf
arrays and feature rows (calendar functions: test_udfs_scalar_time.py).

Expected values come from elsewhere: hand-written formulas (haversine, geohash bisection, Java's split
rule), published reference values (Wikipedia's geohashes, Dagger's own tests, S2's face cells), or the
protobuf messages the test builds.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from google.protobuf.message import Message as ProtoMessage
from py4j.protocol import Py4JJavaError
from pyspark.errors import PythonException

from jobs.model import sql as sql_stage
from jobs.model.schema_registry import SchemaRegistry
from tests.conftest import message_class


def fails(sql, expression: str, message: str) -> None:
    """`expression` fails with `message`, from a Python function or from a JVM one."""
    with pytest.raises((PythonException, Py4JJavaError), match=re.escape(message)):
        sql(expression)


# --------------------------------------------------------------------------------------------------------
# Geometry
# --------------------------------------------------------------------------------------------------------


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    dphi, dlambda = math.radians(lat2 - lat1), math.radians(lon2 - lon1)
    a = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlambda / 2) ** 2
    return 2 * 6371 * math.asin(math.sqrt(a))


def test_distance_is_the_haversine_in_kilometres(sql) -> None:
    pairs = [
        (48.8566, 2.3522, 51.5074, 0.1278),  # Paris - London
        (12.9716, 77.5946, 6.1751, 106.8650),  # Bangalore - Jakarta
        (-6.170024, 106.8243203, -6.170024, 106.8243203),
        (0.0, 179.5, 0.0, -179.5),
        (-33.8688, 151.2093, 40.7128, -74.0060),
    ]
    got = sql(*(f"Distance({a}D, {b}D, {c}D, {d}D)" for a, b, c, d in pairs), "Distance(NULL, 1D, 2D, 3D)")
    for pair, distance in zip(pairs, got, strict=False):
        assert distance == pytest.approx(haversine_km(*pair), rel=1e-12, abs=1e-9)
    # Dagger's published figures (DistanceTest), to the last digit they print
    assert got[0] == pytest.approx(334.5761379805, abs=1e-10)
    assert got[1] == pytest.approx(3294.208197583382, abs=1e-10)
    assert got[-1] is None


def bisection_geohash(latitude: float, longitude: float, length: int) -> str:
    """The geohash definition: alternate longitude/latitude halvings, 5 bits per base-32 character."""
    alphabet, bits = "0123456789bcdefghjkmnpqrstuvwxyz", []
    ranges = {"lon": [-180.0, 180.0], "lat": [-90.0, 90.0]}
    for index in range(length * 5):
        axis, value = ("lon", longitude) if index % 2 == 0 else ("lat", latitude)
        low, high = ranges[axis]
        middle = (low + high) / 2
        bits.append(value >= middle)
        ranges[axis] = [middle, high] if value >= middle else [low, middle]
    return "".join(
        alphabet[int("".join("1" if bit else "0" for bit in bits[i : i + 5]), 2)]
        for i in range(0, len(bits), 5)
    )


def test_geohash_takes_latitude_then_longitude(sql) -> None:
    points = [
        (-6.170024, 106.8243203, 6),
        (0.0, 0.0, 7),
        (90.0, 180.0, 12),
        (-90.0, -180.0, 1),
        (51.5, -0.12, 9),
    ]
    got = sql(
        "GeoHash(42.6, -5.6, 5)",  # Wikipedia's example
        "GeoHash(57.64911, 10.40744, 11)",  # Wikipedia's example
        "GeoHash(10D, 190D, 5)",  # longitude folded into [-180, 180]
        "GeoHash(NULL, 1D, 5)",
        *(f"GeoHash({lat}D, {lon}D, {length})" for lat, lon, length in points),
    )
    assert got[:4] == ["ezs42", "u4pruydqqvj", bisection_geohash(10, -170, 5), None]
    assert got[4] == "qqguyu"  # Dagger's GeoHashTest
    assert got[4:] == [bisection_geohash(*point) for point in points]


def test_geohash_rejects_latitudes_beyond_the_poles(sql) -> None:
    fails(sql, "GeoHash(90.5D, 1D, 5)", "GeoHash: latitude must be between -90 and 90 inclusive, got 90.5")


def face_cell_id(face: int) -> int:
    """S2's level-0 cell of a face: the face in the top 3 bits, then the level marker bit."""
    cell_id = face << 61 | 1 << 60
    return cell_id - (1 << 64) if cell_id >= 1 << 63 else cell_id  # Java's signed long


def test_s2_id_and_area(sql) -> None:
    got = sql(
        "S2Id(-6.170024, 106.8243203, 13)",
        "S2Id(0D, 0D, 0)",  # on face 0
        "S2Id(-90D, 0D, 0)",  # the south pole: face 5, whose ids print negative in Java
        "S2AreaInKm2('3267730965564227584')",
        f"S2AreaInKm2('{face_cell_id(0)}')",
        "S2AreaInKm2(S2Id(0D, 0D, 0))",
        "S2Id(NULL, 0D, 1)",
    )
    assert got[0] == "3344474489181175808"  # Dagger's S2IdTest
    assert got[1:3] == [str(face_cell_id(0)), str(face_cell_id(5))]
    assert got[3] == pytest.approx(909.97058, abs=1e-4)  # Dagger's S2AreaInKm2Test
    # a face is a sixth of the sphere, and the function scales steradians to 510,072,000 km2
    assert got[4] == pytest.approx(510072000 / 6, rel=1e-12)
    assert got[5] == got[4]
    assert got[6] is None


def test_s2_id_rejects_levels_below_leaves(sql) -> None:
    fails(sql, "S2Id(1D, 1D, 31)", "S2Id: level must be between 0 and 30, got 31")


# --------------------------------------------------------------------------------------------------------
# Arrays and maps
# --------------------------------------------------------------------------------------------------------


def test_element_at_of_values(sql) -> None:
    got = sql(
        "ElementAt(array('a', 'a', 'b', 'v', 'a'), 2)",
        "ElementAt(array('a', 'a', 'b', 'v', 'a'), -2)",  # from the end
        "ElementAt(array('a', 'a', 'b'), 5)",
        "ElementAt(array('a', 'a', 'b'), -5)",
        "ElementAt(array('a', NULL), 1)",
        "ElementAt(CAST(NULL AS ARRAY<STRING>), 0)",
        "ElementAt(array(1D, 3D, 1.0E10D), 1)",  # as Java's String.valueOf prints them
        "ElementAt(array(1D, 3D, 1.0E10D), 2)",
        "ElementAt(array(CAST(21.5 AS FLOAT), CAST(0.1 AS FLOAT)), 1)",
        "ElementAt(array(7L, 8L), -1)",
        "ElementAt(array(true), 0)",
    )
    assert got == ["b", "v", None, None, None, None, "3.0", "1.0E10", "0.1", "8", "true"]


def test_element_at_of_rows_reads_a_dotted_path(sql) -> None:
    route = (
        "array(named_struct('start', named_struct('latitude', -6.170024D, 'longitude', 106.8243203D), "
        "'end', CAST(NULL AS STRUCT<latitude: DOUBLE>), 'distance_in_kms', CAST(21.5 AS FLOAT)))"
    )
    got = sql(
        f"ElementAt({route}, 'routes', 0, 'distance_in_kms')",
        f"ElementAt({route}, 'routes', 0, 'distance_in_kms', 'booking')",
        f"ElementAt({route}, 'routes', 0, 'start.latitude')",
        f"ElementAt({route}, 'routes', 0, 'start.longitude')",
        f"ElementAt({route}, 'routes', 0, 'start.invalid')",
        f"ElementAt({route}, 'routes', 1, 'start.latitude')",
        f"ElementAt({route}, 'routes', -1, 'start.latitude')",  # no counting from the end here
        f"ElementAt(slice({route}, 1, 0), 'routes', 0, 'start.latitude')",
        "ElementAt(CAST(NULL AS ARRAY<STRUCT<a: INT>>), 'routes', 0, 'a')",
        f"ElementAt({route}, 'routes', 0, 'end.latitude')",  # through a NULL row
        "ElementAt(array(named_struct('a', CAST(NULL AS INT))), 'r', 0, 'a')",  # a NULL leaf
    )
    assert got == ["21.5", "21.5", "-6.170024", "106.8243203", "", "", "", "", "", "", "null"]


def test_map_get_reads_spark_maps_and_dagger_key_value_rows(sql) -> None:
    dagger_layout = "array(named_struct('key', 'x', 'value', 1.5D), named_struct('key', 'y', 'value', 2D))"
    got = sql(
        "MapGet(map('payment_switch', 'PB-123456', 'weighted_abuse_probability', '0.4'), "
        "'weighted_abuse_probability')",
        "MapGet(map('a', 4), 'a')",
        "MapGet(map('a', 4), 'b')",
        f"MapGet({dagger_layout}, 'y')",
        f"MapGet({dagger_layout}, 'z')",
        "MapGet(array(named_struct('key', 'k', 'value', 'first'), named_struct('key', 'k', 'value', 'x')), "
        "'k')",
        "MapGet(map(1, 'one'), 1)",
        "MapGet(map(1L, 'one'), 1)",  # numbers compare by value
        "MapGet(map(1, 'one'), '1')",  # text never equals a number
        "MapGet(CAST(NULL AS MAP<STRING, STRING>), 'a')",
        "MapGet(map('a', named_struct('x', 1)), 'a')",
    )
    assert got == ["0.4", "4", None, "2.0", None, "first", "one", "one", None, None, '{"x":1}']


def test_list_contains(sql) -> None:
    got = sql(
        "ListContains(array('test1', 'test2'), 'test1')",
        "ListContains(array('test1', 'test2'), 'test3')",
        "ListContains(array('test1', 'test2'), NULL)",
        "ListContains(NULL, 'item1')",
        "ListContains(array(), 'item1')",
        "ListContains(array('a', NULL), 'b')",
        "ListContains(array('a', NULL), NULL)",
    )
    assert got == [True, False, False, False, False, False, True]


def test_array_aggregate(sql) -> None:
    got = sql(
        "ArrayAggregate(array(1, 2, 3), 'average', 'Integer')",
        "ArrayAggregate(array(1.3D, 2.3D, 3.3D), 'average', 'double')",
        "ArrayAggregate(array(1L, 2L, 3L), 'average', 'long')",
        "ArrayAggregate(array(1L, 1L, 1L, 2L, 3L), 'distinct.average', 'long')",
        "ArrayAggregate(array('a', 'a', 'b', 'v', 'a'), 'distinct.count', 'other')",
        "ArrayAggregate(array(2147483647, 1), 'sum', 'INT')",  # Java's int sum wraps around
        "ArrayAggregate(array(5, 9, 2), 'max', 'bigint')",
        "ArrayAggregate(array(5, 9, 2), 'sorted.findFirst', 'int')",
        "ArrayAggregate(CAST(array() AS ARRAY<INT>), 'min', 'int')",  # an empty Optional is 0
        "ArrayAggregate(array('1.5', '2.25'), 'sum', 'Float')",  # text read as the declared type
        "ArrayAggregate(CAST(NULL AS ARRAY<INT>), 'sum', 'int')",
    )
    # Of the type of Dagger's Java stream: an int sum is an int, a count a long, an average a double.
    assert got == [2.0, pytest.approx(2.3), 2.0, 2.0, 3, -2147483648, 9, 2, 0, 3.75, None]
    kinds = [float, float, float, float, int, int, int, int, int, float, type(None)]
    assert [type(value) for value in got] == kinds


def test_array_aggregate_errors_use_daggers_text(sql) -> None:
    fails(
        sql,
        "ArrayAggregate(array('a'), 'distinct.count', 'String')",
        # Dagger's text, word for word
        "No support for inputDataType: String.Please provide 'Other' as inputDataType instead.",
    )
    fails(
        sql,
        "ArrayAggregate(array('a'), 'distinct.coun', 'other')",
        "ArrayAggregate: unsolvable function/method 'coun'",
    )
    fails(
        sql,
        "ArrayAggregate(array(1.5D), 'sum', 'int')",
        "ArrayAggregate: element 1.5 is not of inputDataType int",
    )


def test_array_operate(sql) -> None:
    got = sql(
        "ArrayOperate(array('a', 'a', 'b', 'v', 'a'), 'distinct', 'other')",
        "ArrayOperate(array(1, 2, 1, 2, 1), 'distinct.sorted', 'int')",
        "ArrayOperate(array(1.3D, 2.1D, 1.3D, 0.1D, 1.3D), 'distinct.sorted', 'double')",
        "ArrayOperate(array(CAST(1.5 AS FLOAT)), 'sorted', 'float')",
    )
    # Elements of the declared input type, as Dagger's; an 'other' array's elements as text.
    assert got == [["a", "b", "v"], [1, 2], [0.1, 1.3, 2.1], [1.5]]
    assert [type(values[0]) for values in got] == [str, int, float, float]


def test_a_typed_array_call_keeps_the_positions_of_errors(spark, sql) -> None:
    """The cast around the call is the SQL stage's own: an error inside it is placed in the text as written,
    here together with a Dagger aggregate expanded in the same query."""
    query = "SELECT DistinctCount(id),\n  ArrayOperate(no_such_column, 'distinct', 'int') FROM range(3)"
    with pytest.raises(sql_stage.SqlError, match=r"at line 2, column 16 \('no_such_column'\)"):
        sql_stage.analyse(spark, query)


# --------------------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------------------


def java_split(text: str, regex: str) -> list[str]:
    """Java's String.split(regex): trailing empty strings removed; no match gives the input itself."""
    parts = re.split(regex, text)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return [] if parts == [""] and text else parts


def test_dagger_split_follows_java_string_split(sql) -> None:
    cases = [
        ("1234567890 0987654321 000000000", " "),
        ("a,b,,", ","),
        (",a,,b,,", ","),
        (",,,", ","),
        ("", ","),
        ("no delimiter", ","),
        ("a1b22c333", r"\\d+"),
    ]
    got = sql(
        *(f"DaggerSplit('{text}', '{regex}')" for text, regex in cases),
        "DaggerSplit('a b c', '')",  # an empty delimiter is a space
        "DaggerSplit(NULL, ',')",
        "DaggerSplit('a', NULL)",
        "split('a,b,,', ',')",  # Spark's own split keeps trailing empty strings
    )
    expected = [java_split(text, regex.replace("\\\\", "\\")) for text, regex in cases]
    assert got == [*expected, ["a", "b", "c"], [], [], ["a", "b", "", ""]]


def test_byte_to_string_decodes_utf8(sql) -> None:
    text = "héllo wörld"
    got = sql(f"ByteToString(X'{text.encode().hex()}')", "ByteToString(X'')", "ByteToString(NULL)")
    assert got == [text, "", None]


# --------------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------------

DOCUMENT = {"k1": None, "k2": "v2", "k3": {"a": 1, "b": [1, 2.5, "x/y", True, {"c": None}]}, "n": 1e2}


def literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_json_query(sql) -> None:
    document = literal(json.dumps(DOCUMENT))
    paths = [
        "$.k2",
        "$.k1",
        "$.missing",
        "$.k3",
        "$.k3.b[1]",
        "$.k3.b[-1]",
        "$.k3.b[*]",
        "$.k3.b[0:2]",
        "$.n",
    ]
    got = sql(
        *(f"JsonQuery({document}, {literal(path)})" for path in paths),
        f"JsonQuery({document}, '$.k3.b[?(@.c == null)]')",
        f"JsonQuery({document}, 'k2')",  # a path without $ starts at the root
        f"JsonQuery({document}, '$.k3.b.length()')",  # Jayway's path functions
    )
    assert got == [
        '"v2"',  # strings keep their quotes
        None,
        None,  # a missing last property reads as null
        compact(DOCUMENT["k3"]),
        "2.5",
        '{"c":null}',
        compact(DOCUMENT["k3"]["b"]),
        "[1,2.5]",
        "100.0",  # a JSON double is printed as Java prints it
        '[{"c":null}]',
        '"v2"',
        "5",
    ]


def test_flinks_json_value_converts_only_scalars_of_its_type_and_errors_fail(sql) -> None:
    """What the Flink oracle cannot compare, since Flink 2.3 fails its job there too: a value of another
    kind than RETURNING names, and ERROR ON EMPTY; the rest is on the oracle (json_value_*)."""
    document = literal('{"i": 42, "s": "x"}')

    def json_value(path: str, returning: str, on_empty: str = "'NULL'") -> str:
        call = f"FlinkJsonValue({document}, '{path}', '{returning}', {on_empty}, NULL, 'NULL', NULL)"
        return f"CAST({call} AS {returning})"

    assert sql(json_value("$.i", "INT"), json_value("$.i", "DOUBLE")) == [42, 42.0]
    fails(
        sql,
        json_value("$.s", "INT"),
        "the value x does not convert to INT (ON ERROR does not cover the conversion",
    )
    fails(sql, json_value("$.i", "BOOLEAN"), "the value 42 does not convert to BOOLEAN")
    fails(
        sql,
        json_value("lax $.missing", "INT", "'ERROR'"),
        "Empty result of JSON_VALUE function is not allowed",
    )


def test_json_update_and_delete(sql) -> None:
    got = sql(
        "JsonUpdate('{}', '$.k1', 'v1')",
        """JsonUpdate('{"k1":null,"k2":"v2"}', '$.k3', 'v3')""",
        """JsonUpdate('{"k1":null,"k2":"v2"}', '$.k2', 'updatedValue')""",
        """JsonUpdate('{"k1":null,"k2":{"key1":"value1"}}', '$.k2.key3', 'value3')""",
        """JsonUpdate('{"k1":null,"k2":"v2"}', '$.k2', map('key1', 'value1', 'key2', 'value2'))""",
        """JsonUpdate('{"k1":null,"k2":"v2"}', '$.k2', CAST(NULL AS STRING))""",
        """JsonUpdate('{"a":[1,2]}', '$.a[1]', 5)""",
        """JsonUpdate('{"a":[1,2]}', '$.a[*]', 0)""",
        """JsonUpdate('{"a":1}', '$.a', array(1.5D, 2D))""",
        """JsonDelete('{"k1":"v1","k2":"v2"}', '$.k2')""",
        """JsonDelete('{"k1":"v1","k2":{"key1":"value1","key2":"value2"}}', '$.k2')""",
        """JsonDelete('{"k1":"v1","k2":{"key1":"value1","key2":"value2"}}', '$.k2.key1')""",
        """JsonDelete('{"k1":"v1","k2":["value1","value2","value3"]}', '$.k2[1]')""",
        """JsonDelete('{"k1":"v1","k2":["value1","value2","value3"]}', '$..*')""",
        """JsonDelete('{"k1":"v1"}', '$.missing')""",
    )
    assert [json.loads(text) for text in got] == [
        {"k1": "v1"},
        {"k1": None, "k2": "v2", "k3": "v3"},
        {"k1": None, "k2": "updatedValue"},
        {"k1": None, "k2": {"key1": "value1", "key3": "value3"}},
        {"k1": None, "k2": {"key1": "value1", "key2": "value2"}},
        {"k1": None, "k2": None},
        {"a": [1, 5]},
        {"a": [0, 0]},
        {"a": [1.5, 2.0]},
        {"k1": "v1"},
        {"k1": "v1"},
        {"k1": "v1", "k2": {"key2": "value2"}},
        {"k1": "v1", "k2": ["value1", "value3"]},
        {},
        {"k1": "v1"},
    ]
    assert got[2] == '{"k1":null,"k2":"updatedValue"}'  # compact, keys in their order


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            """JsonQuery('{"k1":null,"k2":"v2"}', '$ .k1')""",
            "Illegal character at position 1 expected '.' or '['",
        ),
        (
            """JsonUpdate('{"k1":null,"k2":"v2"}', '$.k9.x', 1)""",
            "JsonUpdate: Missing property in path $['k9']",  # Jayway's words
        ),
        (
            "JsonQuery(CAST(NULL AS STRING), '$.k2')",
            "JsonQuery: jsonEvent: json string can not be null or empty",
        ),
    ],
)
def test_json_errors(sql, expression: str, message: str) -> None:
    fails(sql, expression, message)


# --------------------------------------------------------------------------------------------------------
# Arrays of serialized messages (LongbowPlus)
# --------------------------------------------------------------------------------------------------------

BOOKING = "'dagger.examples.BookingLogMessage'"


@pytest.fixture(scope="module")
def bookings(registry: SchemaRegistry) -> list[ProtoMessage]:
    booking = message_class(registry, "dagger.examples.BookingLogMessage")
    return [
        booking(
            order_number=f"o{index}",
            status="CANCELLED" if index % 2 else "CREATED",
            customer_price=index * 1.5,
            total_distance_meters=index * 1000,
            pickup_location={"latitude": -6.25 + index},
        )
        for index in range(5)
    ]


def proto_array(messages: list[ProtoMessage]) -> str:
    return "array(" + ", ".join(f"X'{message.SerializeToString().hex()}'" for message in messages) + ")"


def test_select_fields_reads_a_field_of_each_message(sql, bookings: list[ProtoMessage]) -> None:
    protos = proto_array(bookings)
    got = sql(
        f"SelectFields({protos}, {BOOKING}, 'order_number')",
        f"SelectFields({protos}, {BOOKING}, 'status')",  # enums by name
        f"SelectFields({protos}, {BOOKING}, 'customer_price')",
        f"SelectFields({protos}, {BOOKING}, 'pickup_location.latitude')",
        f"SelectFields(CAST(NULL AS ARRAY<BINARY>), {BOOKING}, 'status')",
        f"SelectFields(CAST(array() AS ARRAY<BINARY>), {BOOKING}, 'status')",
        f"ArrayAggregate(SelectFields({protos}, {BOOKING}, 'total_distance_meters'), 'sum', 'long')",
        f"ElementAt(SelectFields({protos}, {BOOKING}, 'order_number'), -1)",
    )
    assert got[0] == [booking.order_number for booking in bookings]
    assert got[1] == ["CREATED", "CANCELLED", "CREATED", "CANCELLED", "CREATED"]
    assert got[2] == [repr(booking.customer_price) for booking in bookings]
    assert got[3] == [repr(booking.pickup_location.latitude) for booking in bookings]
    assert got[4:] == [None, [], float(sum(booking.total_distance_meters for booking in bookings)), "o4"]


def test_filters_keeps_the_messages_meeting_every_condition(sql, bookings: list[ProtoMessage]) -> None:
    protos = proto_array(bookings)
    got = sql(
        f"SelectFields(Filters({protos}, {BOOKING}, CondEq('status', 'CANCELLED')), 'order_number')",
        f"SelectFields(Filters({protos}, {BOOKING}, CondEq('status', 'CANCELLED'), "
        "CondEq('total_distance_meters', 3000)), 'order_number')",
        f"SelectFields(Filters({protos}, {BOOKING}, CondEq('customer_price', '6.0')), 'order_number')",
        f"cardinality(SelectFields(Filters({protos}, {BOOKING}), 'order_number'))",
        f"cardinality(SelectFields(Filters({protos}, {BOOKING}, CondEq('status', 'COMPLETED')), 'status'))",
        f"Filters({protos}, {BOOKING}, CondEq('status', 'CANCELLED')).proto_class",
    )
    cancelled = [booking.order_number for booking in bookings if booking.status == 5]
    assert got == [cancelled, ["o3"], ["o4"], len(bookings), 0, BOOKING.strip("'")]


def test_proto_functions_name_bad_classes_and_fields(sql, bookings: list[ProtoMessage]) -> None:
    protos = proto_array(bookings[:1])
    fails(
        sql,
        f"SelectFields({protos}, {BOOKING}, 'nope')",
        "SelectFields: Key : nope does not exist in Message dagger.examples.BookingLogMessage",
    )
    fails(
        sql,
        f"SelectFields({protos}, 'dagger.examples.Bookin', 'status')",
        "SelectFields: protoClassName: protobuf message 'dagger.examples.Bookin' is not defined",
    )


# --------------------------------------------------------------------------------------------------------
# Feature rows
# --------------------------------------------------------------------------------------------------------


def test_single_feature_with_type_builds_one_row_per_triplet(sql) -> None:
    [features] = sql(
        "SingleFeatureWithType('price', 1.5D, 'DoubleType', 'id', 42, 'StringType', 'n', '7', 'LongType')"
    )
    assert [(feature.name, feature.key) for feature in features] == [
        ("price", "price"),
        ("id", "id"),
        ("n", "n"),
    ]
    set_slots = [
        {slot: value for slot, value in feature.value.asDict().items() if value is not None}
        for feature in features
    ]
    assert set_slots == [{"double_val": 1.5}, {"string_val": "42"}, {"int64_val": 7}]
    # Each message names the function once, then says what is wrong (Dagger's text where it has one).
    fails(
        sql,
        "SingleFeatureWithType('a', 1)",
        "Error: SingleFeatureWithType: Invalid number of arguments given to Udf. "
        "Requires arguments that is divisible by 3.",
    )
    fails(
        sql,
        "SingleFeatureWithType('a', 'x', 'IntegerType')",
        "Error: SingleFeatureWithType: the value of feature 1 cannot be read as IntegerType",
    )
    fails(  # String.valueOf(null) is "null", which is no ValueEnum constant
        sql,
        "SingleFeatureWithType('a', 1, CAST(NULL AS STRING))",
        "Error: SingleFeatureWithType: No enum constant "
        "org.raystack.dagger.functions.udfs.aggregate.feast.handler.ValueEnum.null",
    )


def filled_slots(feature: Any) -> tuple[str, Any]:
    [(slot, value)] = [(slot, value) for slot, value in feature.value.asDict().items() if value is not None]
    return slot, value


def test_single_feature_with_type_reads_keys_as_java_text_and_keeps_each_triplet_once(spark, sql) -> None:
    # Dagger keeps features in a map keyed by (key, value, type): a repeated triplet appears once, while the
    # same key with another value or type, or a value that only converts to the same slot value ('TRUE' and
    # 'true' as BooleanType), is a feature of its own. A null key is String.valueOf(null): "null".
    rows = spark.sql(
        """SELECT SingleFeatureWithType(k1, v1, 'IntegerType', k2, v2, 'IntegerType', 'a', v2, 'LongType',
                                        'f', f1, 'BooleanType', 'f', f2, 'BooleanType') AS features
           FROM VALUES (1, 'a', 5, 'a', 5, 'true', 'true'),
                       (2, 'a', 5, 'a', 6, 'TRUE', 'true'),
                       (3, NULL, 7, 'null', 7, NULL, NULL) AS t(id, k1, v1, k2, v2, f1, f2)
           ORDER BY id"""
    ).collect()
    found = [[(feature.name, feature.key, filled_slots(feature)) for feature in row.features] for row in rows]
    assert found == [
        [
            ("a", "a", ("int32_val", 5)),
            ("a", "a", ("int64_val", 5)),
            ("f", "f", ("bool_val", True)),
        ],
        [
            ("a", "a", ("int32_val", 5)),
            ("a", "a", ("int32_val", 6)),
            ("a", "a", ("int64_val", 6)),
            ("f", "f", ("bool_val", True)),
            ("f", "f", ("bool_val", True)),
        ],
        [
            ("null", "null", ("int32_val", 7)),
            ("a", "a", ("int64_val", 7)),
            ("f", "f", ("bool_val", False)),  # two nulls are equal; a null boolean is false
        ],
    ]
    # Keys of other types read as Java writes them; doubles compare as Double.equals does (0.0 != -0.0).
    # (Columns, not literals: Spark hands a UDF equal literals such as 0.0D and -0.0D as one column.)
    [[features]] = spark.sql(
        """SELECT SingleFeatureWithType(1.0E10D, 'x', 'StringType', 'z', zero, 'DoubleType',
                                        'z', negative_zero, 'DoubleType', 'z', zero, 'DoubleType')
           FROM VALUES (0.0D, -0.0D) AS t(zero, negative_zero)"""
    ).collect()
    assert [(feature.name, filled_slots(feature)) for feature in features] == [
        ("1.0E10", ("string_val", "x")),
        ("z", ("double_val", 0.0)),
        ("z", ("double_val", -0.0)),
    ]
    assert [math.copysign(1.0, filled_slots(feature)[1]) for feature in features[1:]] == [1.0, -1.0]

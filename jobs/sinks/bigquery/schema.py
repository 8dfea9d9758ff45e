"""BigQuery sink, schema: Spark result -> BigQuery columns -> the protobuf message the rows are written as.

A table created from the result gets these columns:

| Spark | BigQuery |
|---|---|
| STRING | STRING |
| TINYINT, SMALLINT, INT, BIGINT | INT64 |
| FLOAT, DOUBLE | FLOAT64 |
| BOOLEAN, BINARY | BOOL, BYTES |
| TIMESTAMP, TIMESTAMP_NTZ, DATE | TIMESTAMP, DATETIME, DATE |
| DECIMAL(p, s) | NUMERIC when s <= 9 and p - s <= 29, else BIGNUMERIC |
| STRUCT | RECORD |
| ARRAY<T> | T with mode REPEATED (a NULL array is written empty; a NULL element fails the batch) |
| MAP<K, V> | REPEATED RECORD<key K, value V> |

An existing table must have every result column (names compare case-insensitively; extra NULLABLE or
REPEATED columns are left NULL/empty) with a type that can take it: the same type, or INT64 into
FLOAT64/NUMERIC/BIGNUMERIC, NUMERIC and BIGNUMERIC into each other, STRING into JSON or GEOGRAPHY. Anything
else fails the first micro-batch naming the column, before a row is sent.

The rows are written as a self-contained proto2 message, `Row`, with a field per result column typed as the
Storage Write API takes the table column's type (`row_descriptor`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from google.cloud import bigquery
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor
from pyspark.sql import types as T

ROW_MESSAGE = "Row"
_COLUMN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,299}$")
_NAMES = {"INTEGER": "INT64", "FLOAT": "FLOAT64", "BOOLEAN": "BOOL", "STRUCT": "RECORD"}
# Result type -> table types that can take it (the service checks the values, e.g. NUMERIC's range).
_FILLS = {
    "INT64": {"INT64", "FLOAT64", "NUMERIC", "BIGNUMERIC"},
    "NUMERIC": {"NUMERIC", "BIGNUMERIC"},
    "BIGNUMERIC": {"NUMERIC", "BIGNUMERIC"},
    "STRING": {"STRING", "JSON", "GEOGRAPHY"},
}
_F = descriptor_pb2.FieldDescriptorProto
# The protobuf type each BigQuery type is written as (Storage Write API conventions).
_PROTO_TYPES = {
    "STRING": _F.TYPE_STRING,
    "JSON": _F.TYPE_STRING,
    "GEOGRAPHY": _F.TYPE_STRING,
    "NUMERIC": _F.TYPE_STRING,
    "BIGNUMERIC": _F.TYPE_STRING,
    "DATETIME": _F.TYPE_STRING,  # civil time, "YYYY-MM-DD HH:MM:SS.ffffff"
    "INT64": _F.TYPE_INT64,
    "TIMESTAMP": _F.TYPE_INT64,  # microseconds since the epoch
    "DATE": _F.TYPE_INT32,  # days since the epoch
    "FLOAT64": _F.TYPE_DOUBLE,
    "BOOL": _F.TYPE_BOOL,
    "BYTES": _F.TYPE_BYTES,
    "RECORD": _F.TYPE_MESSAGE,
}


def _normal(bq_type: str) -> str:
    return _NAMES.get(bq_type.upper(), bq_type.upper())


def bigquery_field(name: str, data_type: T.DataType, path: str | None = None) -> bigquery.SchemaField:
    """The BigQuery column a Spark result column becomes in a created table."""
    path = path or name
    if not _COLUMN_NAME.match(name):
        raise ValueError(
            f"column {path!r}: not a BigQuery column name (letters, digits and _, not starting with a "
            "digit); rename it with AS"
        )
    if isinstance(data_type, T.ArrayType):
        if isinstance(data_type.elementType, T.ArrayType | T.MapType):
            raise ValueError(
                f"column {path!r}: BigQuery has no arrays of arrays ({data_type.simpleString()})"
            )
        element = bigquery_field(name, data_type.elementType, path)
        return bigquery.SchemaField(name, element.field_type, mode="REPEATED", fields=element.fields)
    if isinstance(data_type, T.MapType):
        key = bigquery_field("key", data_type.keyType, f"{path}.key")
        value = bigquery_field("value", data_type.valueType, f"{path}.value")
        return bigquery.SchemaField(name, "RECORD", mode="REPEATED", fields=[key, value])
    if isinstance(data_type, T.StructType):
        if not data_type.fields:
            raise ValueError(f"column {path!r}: a BigQuery RECORD needs at least one field")
        unique([field.name for field in data_type.fields], path)
        children = [bigquery_field(f.name, f.dataType, f"{path}.{f.name}") for f in data_type.fields]
        return bigquery.SchemaField(name, "RECORD", fields=children)
    return bigquery.SchemaField(name, _scalar_type(data_type, path))


def _scalar_type(data_type: T.DataType, path: str) -> str:
    if isinstance(data_type, T.StringType | T.CharType | T.VarcharType | T.NullType):
        return "STRING"
    if isinstance(data_type, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return "INT64"
    if isinstance(data_type, T.FloatType | T.DoubleType):
        return "FLOAT64"
    if isinstance(data_type, T.DecimalType):
        fits_numeric = data_type.scale <= 9 and data_type.precision - data_type.scale <= 29
        return "NUMERIC" if fits_numeric else "BIGNUMERIC"
    simple = {
        T.BooleanType: "BOOL",
        T.BinaryType: "BYTES",
        T.TimestampType: "TIMESTAMP",
        T.TimestampNTZType: "DATETIME",
        T.DateType: "DATE",
    }
    for spark_type, bq_type in simple.items():
        if isinstance(data_type, spark_type):
            return bq_type
    raise ValueError(
        f"column {path!r}: {data_type.simpleString()} has no BigQuery type in this sink; cast it in the "
        "query (e.g. an interval to BIGINT microseconds, a variant to STRING)"
    )


def unique(names: list[str], where: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise ValueError(f"{where}: two columns named {name!r} (BigQuery names ignore case)")
        seen.add(name.lower())


@dataclass(frozen=True)
class WireColumn:
    """A result column as it is written: its name, the table column's type, and its children."""

    name: str
    bq_type: str
    repeated: bool
    children: tuple[WireColumn, ...] = ()


def wire_columns(
    result: T.StructType, table: list[bigquery.SchemaField], table_name: str
) -> list[WireColumn]:
    """Check the result against the table's schema; what each column is written as."""
    unique(result.names, "result")
    expected = [bigquery_field(field.name, field.dataType) for field in result.fields]
    return _match(expected, table, table_name, "")


def _match(
    expected: list[bigquery.SchemaField], actual: list[bigquery.SchemaField], table_name: str, prefix: str
) -> list[WireColumn]:
    by_name = {field.name.lower(): field for field in actual}
    wanted = {field.name.lower() for field in expected}
    missing_required = [f.name for f in actual if f.mode == "REQUIRED" and f.name.lower() not in wanted]
    if missing_required:
        raise ValueError(
            f"table {table_name}: REQUIRED column {prefix}{missing_required[0]} is not in the result; "
            f"the result has {', '.join(f.name for f in expected)}"
        )
    columns = []
    for field in expected:
        path = f"{prefix}{field.name}"
        column = by_name.get(field.name.lower())
        if column is None:
            raise ValueError(
                f"table {table_name} has no column {path} (its columns: "
                f"{', '.join(f.name for f in actual)}); BigQuery tables cannot gain columns through this "
                "sink: add it to the table or drop it from the query"
            )
        source, target = _normal(field.field_type), _normal(column.field_type)
        repeated = field.mode == "REPEATED"
        if target not in _FILLS.get(source, {source}) or repeated != (column.mode == "REPEATED"):
            raise ValueError(
                f"table {table_name}: column {path} is {_describe(column)} but the result's is "
                f"{_describe(field)}; cast it in the query or write to another table"
            )
        children: tuple[WireColumn, ...] = ()
        if target == "RECORD":
            children = tuple(_match(list(field.fields), list(column.fields), table_name, f"{path}."))
        columns.append(WireColumn(field.name, target, repeated, children))
    return columns


def _describe(field: bigquery.SchemaField) -> str:
    kind = _normal(field.field_type)
    if kind == "RECORD":
        kind = f"RECORD<{', '.join(f'{f.name} {_describe(f)}' for f in field.fields)}>"
    return f"REPEATED {kind}" if field.mode == "REPEATED" else kind


def row_descriptor(columns: list[WireColumn]) -> descriptor_pb2.DescriptorProto:
    """The self-contained proto2 message the rows are written as: nested messages inside it."""
    root = descriptor_pb2.DescriptorProto(name=ROW_MESSAGE)
    counter = iter(range(1, 1_000_000))

    def fill(
        message: descriptor_pb2.DescriptorProto, fields: tuple[WireColumn, ...] | list[WireColumn]
    ) -> None:
        for number, column in enumerate(fields, start=1):
            label = _F.LABEL_REPEATED if column.repeated else _F.LABEL_OPTIONAL
            field = message.field.add(
                name=column.name, number=number, label=label, type=_PROTO_TYPES[column.bq_type]
            )
            if column.bq_type == "RECORD":
                nested = root.nested_type.add(name=f"Record{next(counter)}")
                field.type_name = f".{ROW_MESSAGE}.{nested.name}"
                fill(nested, column.children)

    fill(root, columns)
    return root


def row_message(descriptor: bytes) -> Descriptor:
    """The message of a serialized `row_descriptor`, in a pool of its own (what the codec encodes)."""
    file = descriptor_pb2.FileDescriptorProto(name="dagger_bigquery_row.proto", syntax="proto2")
    file.message_type.add().MergeFromString(descriptor)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool.FindMessageTypeByName(ROW_MESSAGE)


def time_partitioning_type(partition_type: str) -> str:
    return getattr(bigquery.TimePartitioningType, partition_type)

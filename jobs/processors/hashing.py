"""The `hash` transformer: Dagger's HashTransformer (SHA-256 masking of columns, Guava's encodings).

Dagger hashes with Guava's `Hashing.sha256()`:

* STRING: `hashString(value, UTF_8).toString()`, the 64 lowercase hex digits of sha256(utf-8 bytes);
* INT: `hashInt(value).asInt()`, sha256 of the value's 4 little-endian bytes, whose first 4 bytes read
  little-endian are the new (signed) value;
* BIGINT: `hashLong(value).asLong()`, likewise with 8 bytes.

A dotted path (`point.label`) reaches into struct columns: the struct is rebuilt with the hashed field;
a top-level column whose name contains dots (`point.label` from the SQL) is taken first. Any other type
cannot be hashed, as in Dagger; NULL stays NULL. The values are hashed in Arrow batches (`mapInArrow`).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, IntegerType, LongType, StringType, StructType

from jobs.processors.config import Hash
from jobs.processors.context import TransformContext

_TEMPORARY = "__dagger_hash_{}"
_POSITIONAL = "__dagger_column_{}"


def sha256_string(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def sha256_int(value: int) -> int:
    return int.from_bytes(hashlib.sha256(struct.pack("<i", value)).digest()[:4], "little", signed=True)


def sha256_long(value: int) -> int:
    return int.from_bytes(hashlib.sha256(struct.pack("<q", value)).digest()[:8], "little", signed=True)


_HASHERS: dict[type[DataType], Callable] = {
    StringType: sha256_string,
    IntegerType: sha256_int,
    LongType: sha256_long,
}


@dataclass(frozen=True)
class _Target:
    path: str
    column: str
    """The top-level column holding the value."""
    fields: tuple[str, ...]
    """The struct fields from `column` down to the value (none for a top-level column)."""
    data_type: DataType


def hash_columns(frame: DataFrame, config: Hash, context: TransformContext) -> DataFrame:
    """Replaces each listed column (or dotted path into structs) by its SHA-256 hash, as Dagger does;
    output columns = input columns (same names, types and order)."""
    targets: list[_Target] = []
    for path in config.columns:
        if any(target.path == path for target in targets):
            raise context.error(f"hash: column {path!r} is listed twice")
        target = _resolve(frame.schema, path, context)
        if type(target.data_type) not in _HASHERS:
            raise context.error(
                f"hash: column {path!r} is {target.data_type.simpleString()}; "
                "only string, int and bigint columns can be hashed"
            )
        targets.append(target)

    # PySpark's mapInArrow cannot name columns with dots: run it on positional names.
    names = {field.name: _POSITIONAL.format(index) for index, field in enumerate(frame.schema)}
    positional = frame.toDF(*names.values())
    temporaries = [_TEMPORARY.format(index) for index in range(len(targets))]
    with_values = positional.select(
        "*",
        *[
            _value(names[target.column], target.fields).alias(name)
            for target, name in zip(targets, temporaries, strict=True)
        ],
    )
    kinds = {name: type(target.data_type) for target, name in zip(targets, temporaries, strict=True)}
    hashed = with_values.mapInArrow(_hash_batches(kinds), with_values.schema)
    for target, name in zip(targets, temporaries, strict=True):
        column, value = names[target.column], F.col(name)
        hashed = hashed.withColumn(
            column, _with_field(F.col(column), target.fields, value) if target.fields else value
        )
    # mapInArrow makes new columns: give them back their metadata (the event-time column's watermark).
    return hashed.select(
        *[F.col(names[field.name]).alias(field.name, metadata=field.metadata) for field in frame.schema]
    )


def _resolve(schema: StructType, path: str, context: TransformContext) -> _Target:
    if path in schema.names:
        return _Target(path, path, (), schema[path].dataType)
    column, *fields = path.split(".")
    if not fields or column not in schema.names:
        raise context.error(f"hash: no column {path!r} (columns: {', '.join(schema.names)})")
    data_type = schema[column].dataType
    reached = column
    for name in fields:
        if not isinstance(data_type, StructType):
            raise context.error(
                f"hash: {reached!r} is {data_type.simpleString()}, not a struct: no field {path!r}"
            )
        if name not in data_type.names:
            raise context.error(
                f"hash: no field {name!r} in {reached!r} for {path!r} (fields: {', '.join(data_type.names)})"
            )
        data_type = data_type[name].dataType
        reached = f"{reached}.{name}"
    return _Target(path, column, tuple(fields), data_type)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _value(column: str, fields: tuple[str, ...]) -> Column:
    value = F.col(column)
    for name in fields:
        value = value.getField(name)
    return value


def _with_field(struct_column: Column, fields: tuple[str, ...], value: Column) -> Column:
    """`struct_column` with the field at `fields` set to `value` (a NULL struct stays NULL)."""
    head, *rest = fields
    if rest:
        value = _with_field(struct_column.getField(head), tuple(rest), value)
    return struct_column.withField(_quoted(head), value)


def _hash_batches(
    kinds: dict[str, type[DataType]],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def hash_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            columns = list(batch.columns)
            for name, kind in kinds.items():
                index = batch.schema.get_field_index(name)
                hasher = _HASHERS[kind]
                values = columns[index]
                columns[index] = pa.array(
                    [None if value is None else hasher(value) for value in values.to_pylist()],
                    type=values.type,
                )
            yield pa.RecordBatch.from_arrays(columns, schema=batch.schema)

    return hash_batches

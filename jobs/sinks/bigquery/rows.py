"""BigQuery sink, rows (executors): Arrow record batches of the result -> serialized `Row` messages.

Whole batches at a time, never row by row: the columns BigQuery takes in an encoding of its own are
converted with pyarrow.compute (TIMESTAMP -> int64 microseconds since the epoch, DATE -> int32 days,
DATETIME -> civil-time text, NUMERIC/BIGNUMERIC -> decimal text, MAP -> a list of {key, value} records),
and the project's native codec (`jobs.codec.protobuf_encoding.ProtoEncoder`) encodes the batch into the
row message of `schema.row_descriptor`. Requests are cut from the encoded rows by `request_chunks`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.sinks.bigquery.schema import WireColumn, row_message


class TableRows:
    """Encodes the result's Arrow batches as the table's rows (ValueError: a value it cannot write)."""

    def __init__(self, columns: list[WireColumn], descriptor: bytes) -> None:
        self._columns = columns
        self._encoder = ProtoEncoder(row_message(descriptor))

    def encode(self, batch: pa.RecordBatch) -> pa.BinaryArray:
        arrays = [_wire(batch.column(column.name), column, column.name) for column in self._columns]
        names = [column.name for column in self._columns]
        return self._encoder.encode(pa.RecordBatch.from_arrays(arrays, names=names))


_encoders: dict[tuple[bytes, tuple[WireColumn, ...]], TableRows] = {}
_encoders_lock = threading.Lock()


def table_rows(columns: list[WireColumn], descriptor: bytes) -> TableRows:
    """This process's encoder for a table's rows (building one compiles the codec: workers reuse it)."""
    key = (descriptor, tuple(columns))
    with _encoders_lock:
        encoder = _encoders.get(key)
        if encoder is None:
            encoder = _encoders[key] = TableRows(columns, descriptor)
        return encoder


def _wire(array: pa.Array | pa.ChunkedArray, column: WireColumn, path: str) -> pa.Array:
    """`array` in the encoding BigQuery takes for `column`; the codec does the rest (widening...)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_null(array.type):  # `SELECT NULL AS x`: the codec leaves the field unset
        return array
    if column.repeated:
        return _wire_list(array, column, path)
    if column.bq_type == "RECORD":
        fields = array.flatten()  # the struct's children, sliced as the struct is
        children = [
            _wire(field, child, f"{path}.{child.name}")
            for field, child in zip(fields, column.children, strict=True)
        ]
        names = [field.name for field in array.type]
        return pa.StructArray.from_arrays(children, names=names, mask=array.is_null())
    convert = _SCALARS.get(column.bq_type)
    if convert is None:
        return array
    try:
        return convert(array)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise ValueError(
            f"column {path!r}: {array.type} cannot be written as {column.bq_type}: {error}"
        ) from None


def _wire_list(array: pa.Array, column: WireColumn, path: str) -> pa.Array:
    if pa.types.is_map(array.type):  # MAP -> a list of {key, value} records
        start, end = array.offsets[0].as_py(), array.offsets[-1].as_py()  # `keys`: of the whole array
        keys, items = array.keys.slice(start, end - start), array.items.slice(start, end - start)
        entries = pa.StructArray.from_arrays([keys, items], names=["key", "value"])
    else:
        if pa.types.is_large_list(array.type):
            array = array.cast(pa.list_(array.type.value_field))
        entries = array.flatten()  # the elements, sliced as the list is
    if entries.null_count:
        raise ValueError(
            f"column {path!r}: an array holds a NULL element, which BigQuery arrays cannot hold; "
            "filter the NULLs out in the query (e.g. filter(xs, x -> x IS NOT NULL))"
        )
    element = _wire(entries, dataclasses.replace(column, repeated=False), f"{path}[]")
    # A NULL array stays NULL: the codec writes it as no element (BigQuery has no NULL arrays).
    offsets = pc.subtract(array.offsets, array.offsets[0])
    return pa.ListArray.from_arrays(offsets, element, mask=array.is_null())


def _timestamp_micros(array: pa.Array) -> pa.Array:
    return pc.cast(pc.cast(array, pa.timestamp("us", array.type.tz)), pa.int64())


def _civil_time(array: pa.Array) -> pa.Array:
    return pc.strftime(pc.cast(array, pa.timestamp("us")), format="%Y-%m-%d %H:%M:%S")


_SCALARS: dict[str, Callable[[pa.Array], pa.Array]] = {
    "TIMESTAMP": _timestamp_micros,
    "DATE": lambda array: pc.cast(array, pa.int32()),
    "DATETIME": _civil_time,
    "NUMERIC": lambda array: pc.cast(array, pa.string()),
    "BIGNUMERIC": lambda array: pc.cast(array, pa.string()),
}


def request_chunks(rows: pa.BinaryArray, max_rows: int, max_bytes: int) -> Iterator[list[bytes]]:
    """Serialized rows in requests of at most `max_rows` rows and about `max_bytes` bytes (one at least)."""
    count = len(rows)
    if not count:
        return
    # Each row costs its bytes and a few more (tag, length) in the request.
    ends = np.cumsum(pc.binary_length(rows).to_numpy(zero_copy_only=False).astype(np.int64) + 8)
    start = 0
    while start < count:
        before = int(ends[start - 1]) if start else 0
        end = int(np.searchsorted(ends, before + max_bytes, side="right"))
        end = max(start + 1, min(end, start + max_rows))
        yield rows.slice(start, end - start).to_pylist()
        start = end

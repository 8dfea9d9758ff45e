"""Arrow arrays and scalars built from their bytes, for code that runs in Spark's Python workers.

pyarrow imports pandas (about 40 MB a process) the first time it converts a Python value: `pa.array`,
`pa.scalar`, `pa.repeat` of a Python value, `RecordBatch.from_pydict`, or a compute function given a
Python number. A dagger's Python workers have no other use for pandas, and the steady memory of a dagger
is mostly its workers, so what their hot path builds (metadata columns, validity flags, row counts) is
built here from buffers instead.
"""

from __future__ import annotations

import array
from collections.abc import Sequence

import pyarrow as pa

# Python's array typecodes of the fixed-width integer types (timestamps are 64-bit integers).
_TYPECODES = {1: "b", 2: "h", 4: "i", 8: "q"}
_INT64 = pa.int64()


def int_array(values: Sequence[int], arrow_type: pa.DataType = _INT64) -> pa.Array:
    """Integers (no nulls) as an array of a fixed-width integer or timestamp type."""
    buffer = pa.py_buffer(array.array(_TYPECODES[arrow_type.bit_width // 8], values))
    return pa.Array.from_buffers(arrow_type, len(values), [None, buffer])


def bool_array(values: Sequence[bool]) -> pa.Array:
    return int_array(values, pa.int8()).cast(pa.bool_())  # a bool is an int to Python's array


def scalar(value: bool | int | str, arrow_type: pa.DataType) -> pa.Scalar:
    """One value of a boolean, fixed-width integer, timestamp or string type."""
    if pa.types.is_boolean(arrow_type):
        return bool_array([bool(value)])[0]
    if pa.types.is_string(arrow_type):
        data = str(value).encode()
        offsets = pa.py_buffer(array.array("i", [0, len(data)]))
        return pa.Array.from_buffers(arrow_type, 1, [None, offsets, pa.py_buffer(data)])[0]
    return int_array([int(value)], arrow_type)[0]

"""SingleFeatureWithType: Feast feature rows from (name, value, type) triplets of one row."""

from __future__ import annotations

import pyarrow as pa

from jobs.udfs.aggregate import INVALID_NUMBER_OF_ARGUMENTS
from jobs.udfs.feature_rows import FEATURE_ROWS_DDL, feature_rows
from jobs.udfs.registration import FunctionSet, UdfError


def single_feature_with_type(*arguments: pa.Array) -> pa.Array:
    """One feature row per distinct triplet, in argument order; `type` is a Dagger ValueEnum name
    ('StringType', 'DoubleType', ...) that picks the slot and the conversion."""
    if not arguments or len(arguments) % 3:
        raise UdfError(f"SingleFeatureWithType: {INVALID_NUMBER_OF_ARGUMENTS}")
    return feature_rows(
        "SingleFeatureWithType", list(arguments[0::3]), list(arguments[1::3]), list(arguments[2::3])
    )


def declare(functions: FunctionSet) -> None:
    functions.arrow("SingleFeatureWithType", single_feature_with_type, FEATURE_ROWS_DDL)

"""The contract between the runner and a sink kind's writer.

Lifecycle of a writer, for the life of one streaming query:

1. **Construction, on the driver, before the query starts**: `Writer(sink, context)`. Check here what
   can be checked without data (the output message exists, the target is reachable, the table's schema
   fits) and raise `ValueError`/`LookupError` naming the key at fault: the dagger then fails to start,
   which a restart would not cure.
2. **`write(batch, batch_id)`, on the driver, once per micro-batch**, from Spark's `foreachBatch`. The
   writer usually fans the batch out to the executors (`jobs.sinks.partitions.write_partitions`) and
   returns, when every row is durable, what it wrote (`Written`: 0 rows for a replayed batch it had
   written before); the dagger's metrics count it. Raising fails the micro-batch; Spark then replays it
   from the checkpoint with the same `batch_id`, so a writer that must not duplicate keys its side effects
   on `(query id, batch_id, partition)`.
3. No close: executors keep their clients per Python worker, and the driver's die with the query.

Rows reach `write` as a DataFrame in the SQL result's (or post-processors') columns; a writer never
collects a whole batch to the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from jobs.model.schema_registry import SchemaRegistry
    from jobs.model.spec import DaggerSpec


@dataclass(frozen=True)
class Written:
    """What writing a micro-batch took: rows written, and the requests sent to the target (counted by
    `jobs.engine.retry.RetryPolicy`, so 0 for clients that retry on their own) with how many were retries."""

    rows: int
    requests: int = 0
    retries: int = 0


@dataclass(frozen=True)
class SinkContext:
    """What a writer may know of the dagger around its sink."""

    spec: DaggerSpec
    index: int = 0
    """Position of the sink in the dagger's `sinks` (part of names that must be unique per sink)."""
    registry: SchemaRegistry | None = None
    """The dagger's protobuf messages; loaded from `spec.schema_registry` when not given."""
    log_emit: Callable[[str], None] | None = None
    """Where text for the user goes (the Dagster run's log); None: Python logging."""
    result_schema: StructType | None = None
    """The columns of the rows `write` gets (None: not known, e.g. a sink checked alone)."""
    object_store: Mapping[str, str] = field(default_factory=dict)
    """The session's `fs.s3a.*` settings (`jobs.engine.object_store.s3a_settings`), for targets on `s3a://`."""
    session: SparkSession | None = None
    """The dagger's session, for writers that register JVM functions in it (None: a sink checked alone)."""

    def schema_registry(self) -> SchemaRegistry:
        if self.registry is not None:
            return self.registry
        from jobs.model.schema_registry import SchemaRegistry

        config = self.spec.schema_registry
        return SchemaRegistry.load(
            config.descriptor_sets, config.fetch_timeout.total_seconds(), config.fetch_headers
        )


class SinkWriter(Protocol):
    """Writes one micro-batch; raising fails the batch, which the checkpoint then replays."""

    @property
    def reads_whole_batch(self) -> bool:
        """False for sinks that look at part of a batch (the log sink takes a few rows)."""
        ...

    def write(self, batch: DataFrame, batch_id: int) -> Written: ...

"""Time-ordered output: rows leave in non-decreasing event time, across streams and micro-batches.

A row may only leave once no row with an earlier event time can still come, which is what the low
watermark says: Spark's watermark is the minimum over the dagger's streams of (latest event time seen -
`watermark_delay`). So each micro-batch `k` emits, sorted, the rows at or below the watermark `W(k)` that
Spark computed for it, and holds back the rest until a later batch's watermark passes them. A row of batch
`k` below `W(k-1)` arrives after rows later than it have left: it is late, dropped and logged. A row
without an event time cannot be placed: it leaves at once, ahead of its batch's ordered rows.

`W(k)` is read from the checkpoint's offset log (`offsets/<k>`: the `v1` line, then the batch metadata
with `batchWatermarkMs`), which Spark writes before it runs batch `k`. The rows held back after batch `k`
are a Parquet folder `ordered_output/<k>` inside the checkpoint: batch `k` reads what batch `k-1` left,
and a batch run again after a crash reads the same folder and rewrites its own, so output and holdings
stay as if it had run once. Everything is computed by Spark, column by column.

The cost is latency: a row waits for the watermark to pass it, and the watermark moves only when a batch
with newer rows of every stream has run.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

log = logging.getLogger(__name__)

BatchWriter = Callable[[DataFrame, int], None]

HELD_FOLDER = "ordered_output"


class OrderedOutput:
    """Wraps a micro-batch writer so that it receives its rows in event-time order, one partition."""

    def __init__(self, time_column: str, checkpoint_location: str, dagger: str) -> None:
        self.time_column = time_column
        self.checkpoint = Path(checkpoint_location)
        self.dagger = dagger

    def watermark(self, batch_id: int) -> datetime:
        """The watermark Spark used for batch `batch_id` (the epoch before any event was seen)."""
        lines = (self.checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
        metadata = json.loads(lines[1])
        return datetime.fromtimestamp(metadata.get("batchWatermarkMs", 0) / 1000, UTC)

    def _held(self, batch_id: int) -> Path:
        return self.checkpoint / HELD_FOLDER / str(batch_id)

    def wrap(self, write: BatchWriter) -> BatchWriter:
        def write_in_order(batch: DataFrame, batch_id: int) -> None:
            time = F.col(self.time_column)
            watermark = F.lit(self.watermark(batch_id))
            cached = batch.persist()  # read twice below: computed (and its metrics counted) once
            try:
                if batch_id > 0:
                    previous = F.lit(self.watermark(batch_id - 1))
                    late = batch.filter(time < previous).count()
                    if late:
                        log.warning(
                            "dagger %s: %d row(s) of batch %d are older than the watermark %s of the batch "
                            "before and were dropped: rows after them have left already",
                            self.dagger, late, batch_id, self.watermark(batch_id - 1),
                        )  # fmt: skip
                    batch = batch.filter(time.isNull() | (time >= previous))
                rows = batch
                if batch_id > 0 and any(self._held(batch_id - 1).glob("*.parquet")):
                    rows = rows.unionByName(batch.sparkSession.read.parquet(str(self._held(batch_id - 1))))
                rows.filter(time > watermark).write.mode("overwrite").parquet(str(self._held(batch_id)))
                ready = rows.filter(time.isNull() | (time <= watermark))
                write(ready.orderBy(time).coalesce(1), batch_id)
            finally:
                cached.unpersist()
            self._forget_before(batch_id - 1)

        return write_in_order

    def _forget_before(self, batch_id: int) -> None:
        """Drop the holdings older than `batch_id`'s, which no rerun of a batch can need any more."""
        folder = self.checkpoint / HELD_FOLDER
        for old in folder.iterdir() if folder.exists() else []:
            if old.name.isdigit() and int(old.name) < batch_id:
                shutil.rmtree(old)

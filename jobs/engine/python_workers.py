"""Keeps Spark's reused Python workers from re-scanning their imported modules after every task.

A reused worker runs a full `gc.collect()` after each task (pyspark's daemon does it). A full collection
walks every container object the process tracks, and a worker that has imported pyarrow, pandas, protobuf
and the confluent-kafka client holds about 100,000 of them: some 45 ms per task, measured, which a stream
of short micro-batches pays on every task of every batch.

`freeze_imported_objects` moves every object alive into the collector's permanent generation whenever
modules were imported since it last did, so the collection after a task walks only what tasks created.
Frozen objects are still freed by reference counting; only a reference cycle that was alive at a freeze
and later dropped is never reclaimed. Freezes happen only when modules were imported (a few times per
worker), at the start of a task, when what is alive is modules, caches and pooled clients.
"""

from __future__ import annotations

import gc
import sys
import threading

_lock = threading.Lock()
_modules_at_last_freeze = 0


def freeze_imported_objects() -> None:
    """Call at the start of a task run in a Spark Python worker (cheap when nothing new was imported)."""
    global _modules_at_last_freeze
    with _lock:
        if len(sys.modules) != _modules_at_last_freeze:
            gc.freeze()
            _modules_at_last_freeze = len(sys.modules)

"""A materialized table's snapshots, swapped atomically.

    <tables>/<project>/<name>/CURRENT                        the current snapshot's folder name
    <tables>/<project>/<name>/snapshot-<ns>-<id>/*.parquet   a snapshot, never changed once published

A refresh writes the new snapshot into a folder of its own, then replaces `CURRENT` with one rename, so a
reader finds the old snapshot or the new one, whole, never a mix and never nothing. A failed refresh
deletes its folder and leaves `CURRENT` as it was. After a swap, every snapshot but the new one and the
one it replaced is deleted: the replaced one stays for readers that resolved `CURRENT` just before the
swap and are still reading (a reader slower than two refreshes would lose its files). Refreshes of one
table take turns (a lock file), so one never deletes the folder another is writing.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

_CURRENT = "CURRENT"
_PREFIX = "snapshot-"


class Snapshots:
    """The snapshots of one materialized table, under a local folder."""

    def __init__(self, tables: str, project: str, name: str) -> None:
        if "://" in tables:
            raise ValueError(f"materialized tables need a local folder, got {tables}")
        self.folder = Path(tables) / project / name

    def current(self) -> Path | None:
        try:
            name = (self.folder / _CURRENT).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return self.folder / name

    def publish(self, write: Callable[[str], object]) -> Path:
        """Calls `write(folder)` to fill a new snapshot folder (which must not exist yet, as Spark's
        writer wants), then makes it current. Returns the new snapshot."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with (self.folder / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._publish(write)

    def _publish(self, write: Callable[[str], object]) -> Path:
        snapshot = self.folder / f"{_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        replaced = self.current()
        try:
            write(str(snapshot))
            pointer = self.folder / f".{_CURRENT}.{snapshot.name}"
            with pointer.open("w", encoding="utf-8") as file:
                file.write(snapshot.name)
                file.flush()
                os.fsync(file.fileno())
            os.replace(pointer, self.folder / _CURRENT)
        except BaseException:
            shutil.rmtree(snapshot, ignore_errors=True)
            raise
        kept = {snapshot.name, replaced.name if replaced else None}
        for folder in self.folder.glob(f"{_PREFIX}*"):
            if folder.name not in kept:
                shutil.rmtree(folder, ignore_errors=True)
        return snapshot

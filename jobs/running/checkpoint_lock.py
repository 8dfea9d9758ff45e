"""One run per checkpoint: a second query on a checkpoint that a running query uses is refused.

Two queries on one checkpoint would each commit offsets and state over the other's: batches written
twice or skipped, state stores corrupted. Spark refuses a second query only inside one session; daggers
are launched from the CLI, the Dagster UI and sensors, in separate processes. So each run holds an
exclusive `flock` on `<checkpoint>.lock` from its start until its query ends: the kernel releases it
when the process dies, however it dies, so a crashed run never blocks its restart. The lock file holds
who has it, for the message the refused launch shows.

Checkpoints on an object store (`s3://`, `gs://`, `hdfs://`...) have no such lock; there Dagster's own
"one run per dagger" is the only guard.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path


class CheckpointInUseError(RuntimeError):
    """The checkpoint is used by a running query; the message names its holder."""


def _local_path(checkpoint: str) -> Path | None:
    if checkpoint.startswith("file://"):
        return Path(checkpoint.removeprefix("file://"))
    return None if "://" in checkpoint else Path(checkpoint)


class CheckpointLock:
    """Held by one run of a dagger while its query may run."""

    def __init__(self, checkpoint: str, dagger: str) -> None:
        self.checkpoint = checkpoint
        self.dagger = dagger
        path = _local_path(checkpoint)
        self.path = None if path is None else path.with_name(f"{path.name}.lock")
        self._file: int | None = None
        self._guard = threading.Lock()  # released by wait() and by stop(), which other threads may call

    def acquire(self) -> None:
        """Take the lock, or raise `CheckpointInUseError` naming the run that holds it."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 4096).decode(errors="replace")
            os.close(descriptor)
            raise CheckpointInUseError(
                f"dagger {self.dagger}: checkpoint {self.checkpoint} is in use by a running query "
                f"({_describe(holder)}); stop that run first, or give this one another checkpoint_location"
            ) from None
        holder = {
            "dagger": self.dagger,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, json.dumps(holder).encode(), 0)
        self._file = descriptor
        self._remove_unfinished_log_writes()

    def _remove_unfinished_log_writes(self) -> None:
        """A run killed while writing a batch's offsets or commit leaves the write's temporary file
        (`.<batch>.<uuid>.tmp`, and its `.crc`) beside the log; Spark then refuses to start batch 0 over a
        log holding anything. Only the lock's holder writes the log, so what is left is no one's."""
        checkpoint = _local_path(self.checkpoint)
        for log_name in ("offsets", "commits"):
            folder = checkpoint / log_name if checkpoint is not None else None
            if folder is not None and folder.is_dir():
                for leftover in folder.glob(".*.tmp*"):
                    leftover.unlink(missing_ok=True)

    def release(self) -> None:
        """Give the lock up (idempotent): the query has ended."""
        with self._guard:
            if self._file is not None:
                os.ftruncate(self._file, 0)
                os.close(self._file)  # closing the descriptor drops the flock
                self._file = None


def _describe(holder: str) -> str:
    try:
        fields = json.loads(holder)
        dagger, pid, host, since = fields["dagger"], fields["pid"], fields["host"], fields["since"]
    except (ValueError, KeyError, TypeError):
        return "holder unknown"
    return f"dagger {dagger}, process {pid} on {host} since {since}"

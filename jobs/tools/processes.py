"""Ending the servers the project starts (the embedded broker, and the test servers)."""

from __future__ import annotations

import subprocess


def end_process(process: subprocess.Popen | None, timeout_s: float) -> None:
    """SIGTERM `process` if it still runs, SIGKILL it if it has not ended `timeout_s` later; reaped either
    way."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

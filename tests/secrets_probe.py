"""`python -m tests.secrets_probe run --bounded dagger.yaml`: the `dagger` CLI with Python logging at DEBUG.

The secrets tests run daggers through this in a subprocess whose stdout and stderr go to files: the driver's
log (every logger, the libraries' too, at DEBUG), the Spark JVM's output and the Python workers' stderr
(both inherited from the driver) all land there. `jobs.cli.main` configures logging only when nothing has
yet, so the DEBUG root logger set here stays (it still quiets py4j, which would echo every JVM call).
"""

from __future__ import annotations

import logging
import sys

from jobs.cli import main as cli


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.DEBUG, format="%(asctime)s %(levelname).1s %(name)s | %(message)s", datefmt="%H:%M:%S"
    )
    return cli.main(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

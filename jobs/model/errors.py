"""What a dagger raises: it cannot start, or its query stopped; and the cause of a failed Spark job."""

from __future__ import annotations

import re


class DaggerBuildError(ValueError):
    """A dagger that cannot start: the message names the stream, sink or SQL position at fault."""


class DaggerQueryError(RuntimeError):
    """The streaming query stopped with an error."""


# Where the Python exception lines of a worker's traceback start (`cimpl.`: confluent-kafka's own errors).
_PYTHON_ERROR_PREFIXES = ("jobs.", "pyspark.", "confluent_kafka.", "cimpl.")


_LOST_TASK = re.compile(r"most recent failure: Lost task [^(]*\([^)]*\) \([^)]*\): (?:[\w.$]+: )?(.*)")


def root_cause(message: str) -> str:
    """Spark wraps a task's error in JVM stack traces: keep the JVM task's own message, or the Python
    exception line(s) of a Python worker."""
    lost_task = _LOST_TASK.search(message)
    if lost_task and not lost_task.group(1).startswith("Traceback"):
        return lost_task.group(1).strip()
    lines = message.splitlines()
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].startswith(_PYTHON_ERROR_PREFIXES) or "Error: " in lines[index]:
            return lines[index].strip()
    return lines[0] if lines else message


def without_plan(message: str) -> str:
    """Spark appends the analysed plan (with every source option) after ';\n': users need the reason."""
    return message.split(";\n", 1)[0].strip()

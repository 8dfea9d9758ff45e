"""Where a Dagger job's settings come from: a Java `.properties` file, or environment variables.

The file format is `java.util.Properties.load(Reader)`'s: natural lines end with `\\n`, `\\r` or `\\r\\n`;
a line whose first non-blank character is `#` or `!` is a comment; a line ending in an odd number of
backslashes continues on the next one (whose leading blanks are dropped); the key ends at the first
unescaped `=`, `:` or blank; escapes are `\\t`, `\\n`, `\\r`, `\\f`, `\\uXXXX`, and a backslash before any
other character stands for that character. A key given twice keeps its last value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from jobs.model.spec import DaggerConfigError

_BLANKS = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_NATURAL_LINE = re.compile(r"\r\n|\r|\n")
_DAGGER_KEY_PREFIXES = (
    "STREAMS",
    "FLINK_",
    "SINK_",
    "SOURCE_",
    "PROCESSOR_",
    "SCHEMA_REGISTRY_",
    "PYTHON_UDF_",
    "UDF_",
    "METRIC_",
    "FUNCTION_FACTORY_",
    "INPUT_",
)


class PropertiesError(DaggerConfigError):
    """A properties file that cannot be read; the message names the file and the line."""


def looks_like_dagger_key(name: str) -> bool:
    """Whether an environment variable is meant for Dagger (the environment holds PATH, HOME... too)."""
    return name.startswith(_DAGGER_KEY_PREFIXES)


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Keys and values of a properties text, as `java.util.Properties.load` reads them."""
    properties: dict[str, str] = {}
    for line_number, logical_line in _logical_lines(text):
        key, value = _split_key_value(logical_line)
        try:
            properties[_unescape(key)] = _unescape(value)
        except ValueError as error:
            raise PropertiesError(f"{source}: line {line_number}: {error}") from None
    return properties


def read_properties_file(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PropertiesError(f"{path}: cannot read the job's properties file: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise PropertiesError(f"{path}: not UTF-8 text: {error}") from None
    return parse_properties(text, str(path))


def dagger_keys_from_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The Dagger settings among environment variables (Dagger's `ConfigSource=ENVIRONMENT`)."""
    return {name: value for name, value in environment.items() if looks_like_dagger_key(name)}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(number of the first natural line, logical line) for every line that is neither blank nor a comment.

    The continuation backslash and the leading blanks of the next natural line are removed here; the
    other escapes are left for `_unescape`, which sees the key and the value separately.
    """
    natural_lines = _NATURAL_LINE.split(text)
    logical: list[tuple[int, str]] = []
    index = 0
    while index < len(natural_lines):
        start = index
        line = natural_lines[index].lstrip(_BLANKS)
        index += 1
        if not line or line[0] in "#!":
            continue  # a comment is never continued: each of its lines needs its own marker
        parts = []
        while _continues(line) and index < len(natural_lines):
            parts.append(line[:-1])
            line = natural_lines[index].lstrip(_BLANKS)
            index += 1
        if _continues(line):  # a backslash at the very end of the text continues into nothing
            line = line[:-1]
        parts.append(line)
        logical.append((start + 1, "".join(parts)))
    return logical


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value: the key ends at an unescaped `=`, `:` or blank."""
    position = 0
    while position < len(line):
        character = line[position]
        if character == "\\":
            position += 2
            continue
        if character in "=:" or character in _BLANKS:
            break
        position += 1
    key = line[:position]
    rest = line[position:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return key, rest


def _unescape(raw: str) -> str:
    out: list[str] = []
    position = 0
    while position < len(raw):
        character = raw[position]
        if character != "\\" or position + 1 >= len(raw):
            out.append(character)
            position += 1
            continue
        escaped = raw[position + 1]
        if escaped == "u":
            digits = raw[position + 2 : position + 6]
            if len(digits) != 4 or not all(digit in "0123456789abcdefABCDEF" for digit in digits):
                raise ValueError(f"malformed \\uxxxx escape \\u{digits}")
            out.append(chr(int(digits, 16)))
            position += 6
            continue
        out.append(_SIMPLE_ESCAPES.get(escaped, escaped))
        position += 2
    return _join_surrogates("".join(out))


def _join_surrogates(text: str) -> str:
    """`\\ud83d\\ude00` escapes a character outside the BMP as two UTF-16 halves, as Java strings hold it."""
    if not any("\ud800" <= character <= "\udfff" for character in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")

"""Reading Dagger job settings: Java `.properties` files (checked against Java's own `Properties.load`)
and environment variables."""

from __future__ import annotations

import subprocess
import urllib.parse
from pathlib import Path

import pytest

from jobs.raystack.properties import PropertiesError, dagger_keys_from_environment, parse_properties

# Every rule of Properties.load(Reader): separators, blanks, comments, continuations, escapes.
TRICKY = (
    "# a comment\n"
    "! another comment, with a trailing backslash that does not continue it \\\n"
    "plain=value\n"
    "   indented.key   =   value with spaces   \n"
    "colon:value\n"
    "blank separated value\n"
    "equals=a=b:c\n"
    "key\\ with\\ spaces=escaped blanks\n"
    "escapes=tab\\tnewline\\nreturn\\rformfeed\\fquote\\'other\\q\n"
    "unicode=caf\\u00e9 \\ud83d\\ude00\n"
    'STREAMS=[{"a": 1, \\\n'
    '         "b": 2}]\n'
    "FLINK_SQL_QUERY=SELECT count(1) \\\n"
    "    FROM t \\\n"
    "# not a comment: a continued line\n"
    "two.backslashes=ends in one backslash\\\\\n"
    "empty=\n"
    "only.key\n"
    "dup=first\r\n"
    "dup=second\r"
    "  \t \n"
    "last=at the end without newline"
)
EXPECTED = {
    "plain": "value",
    "indented.key": "value with spaces   ",
    "colon": "value",
    "blank": "separated value",
    "equals": "a=b:c",
    "key with spaces": "escaped blanks",
    "escapes": "tab\tnewline\nreturn\rformfeed\fquote'otherq",
    "unicode": "café 😀",
    "STREAMS": '[{"a": 1, "b": 2}]',
    "FLINK_SQL_QUERY": "SELECT count(1) FROM t # not a comment: a continued line",
    "two.backslashes": "ends in one backslash\\",
    "empty": "",
    "only.key": "",
    "dup": "second",
    "last": "at the end without newline",
}

_JAVA_DUMP = """
import java.io.*;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class Dump {
    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        try (Reader reader = new InputStreamReader(new FileInputStream(args[0]), StandardCharsets.UTF_8)) {
            properties.load(reader);
        }
        for (String name : new TreeSet<>(properties.stringPropertyNames())) {
            System.out.println(URLEncoder.encode(name, StandardCharsets.UTF_8) + " "
                + URLEncoder.encode(properties.getProperty(name), StandardCharsets.UTF_8));
        }
    }
}
"""


def java_properties(text: str, folder: Path) -> dict[str, str]:
    """What java.util.Properties reads from `text` (the JDK's single-file source launcher runs it)."""
    (folder / "Dump.java").write_text(_JAVA_DUMP, encoding="utf-8")
    (folder / "job.properties").write_text(text, encoding="utf-8")
    result = subprocess.run(
        ["java", "Dump.java", "job.properties"], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"java failed (a JDK is needed, as for Spark): {result.stderr}"
    pairs = [line.split(" ") for line in result.stdout.splitlines()]
    return {urllib.parse.unquote_plus(name): urllib.parse.unquote_plus(value) for name, value in pairs}


def test_properties_are_read_by_javas_rules():
    assert parse_properties(TRICKY) == EXPECTED


def test_java_reads_the_same_keys_and_values(tmp_path):
    assert java_properties(TRICKY, tmp_path) == parse_properties(TRICKY)


def test_a_malformed_unicode_escape_names_the_line():
    with pytest.raises(PropertiesError, match=r"^job.properties: line 3: malformed \\uxxxx escape \\u12G4$"):
        parse_properties("a=1\n\nb=x\\u12G4\n", "job.properties")


def test_the_environment_gives_only_dagger_keys():
    environment = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "STREAMS": "[]",
        "FLINK_SQL_QUERY": "SELECT 1",
        "SINK_TYPE": "log",
        "SCHEMA_REGISTRY_STENCIL_ENABLE": "false",
        "PROCESSOR_PREPROCESSOR_ENABLE": "false",
    }
    assert dagger_keys_from_environment(environment) == {
        "STREAMS": "[]",
        "FLINK_SQL_QUERY": "SELECT 1",
        "SINK_TYPE": "log",
        "SCHEMA_REGISTRY_STENCIL_ENABLE": "false",
        "PROCESSOR_PREPROCESSOR_ENABLE": "false",
    }

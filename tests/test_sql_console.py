"""The SQL console: statements in, JSON lines out, positions on bad SQL; in process and as `dagger sql`."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from jobs.cli.console import ConsoleError, run_statements
from jobs.model.sql import analyse
from jobs.udfs import register_functions

PROJECT = Path(__file__).resolve().parent.parent
EXAMPLES = PROJECT / "examples" / "python_udfs"


@pytest.fixture(scope="module")
def functions(spark):
    register_functions(spark)
    return spark


def test_rows_as_json_lines_with_every_kind_of_value(functions):
    out = io.StringIO()
    text = """
        CREATE OR REPLACE TEMPORARY VIEW trips AS
          SELECT * FROM VALUES ('a', 1.5D), ('a', 2.5D), ('b', 4.0D) AS t(driver, km);
        SELECT driver, DistinctCount(driver) AS drivers, CollectArray(km) AS kms
          FROM trips GROUP BY driver ORDER BY driver;
        SELECT TIMESTAMP'2024-02-29 23:59:58.5' AS at, DATE'2024-03-01' AS day,
               CAST(12.30 AS DECIMAL(10, 2)) AS price, map('k', 1) AS m, named_struct('x', X'0AFF') AS s,
               double('NaN') AS nan, CAST(NULL AS STRING) AS nothing, 1 AS same, 2 AS same
    """
    assert run_statements(partial(analyse, functions), text, out) == 3
    lines = out.getvalue().splitlines()
    assert [json.loads(line) for line in lines[:2]] == [
        {"driver": "a", "drivers": 1, "kms": [1.5, 2.5]},
        {"driver": "b", "drivers": 1, "kms": [4.0]},
    ]
    assert lines[2] == (
        '{"at": "2024-02-29T23:59:58.500000Z", "day": "2024-03-01", "price": "12.30", "m": {"k": 1}, '
        '"s": {"x": "Cv8="}, "nan": "NaN", "nothing": null, "same": 1, "same": 2}'
    )


def test_bad_sql_names_statement_line_and_column_of_the_whole_input(functions):
    text = "SELECT 1 AS one;\n\nSELECT one,\n       no_such_col FROM VALUES (1) AS t(one)"
    out = io.StringIO()
    with pytest.raises(ConsoleError) as error:
        run_statements(partial(analyse, functions), text, out)
    assert out.getvalue() == '{"one": 1}\n'  # the first statement ran
    assert error.value.exit_status == 2
    assert str(error.value).startswith("statement 2: SQL error at line 4, column 8 ('no_such_col'): ")


def test_a_failure_while_computing_rows_gives_its_reason_and_status_1(functions):
    with pytest.raises(ConsoleError) as error:
        run_statements(
            partial(analyse, functions),
            "SELECT PercentileAggregator(200, x) FROM VALUES (1) AS t(x)",
            io.StringIO(),
        )
    assert error.value.exit_status == 1
    assert "out of bounds quantile value: 200.0, must be in (0, 100]" in str(error.value)
    assert "\tat " not in str(error.value)  # no JVM stack trace


def test_the_dagger_sql_command(tmp_path):
    (tmp_path / "darts" / "dart-get").mkdir(parents=True)
    (tmp_path / "darts" / "dart-get" / "tiers").write_text(json.dumps({"c1": "gold"}))
    script = tmp_path / "check.sql"
    script.write_text(
        "SELECT MULTIPLY(6, 7) AS product, DartGet('tiers', 'c1', 1) AS tier;\n"
        "SELECT Features('k', 1, 'j') AS f;\n"  # an odd argument count fails before anything runs
    )
    environment = {**os.environ, "DAGGER_SPARK_MASTER": "local[1]"}
    done = subprocess.run(
        [sys.executable, "-m", "jobs", "sql", "-f", str(script), "--darts", str(tmp_path / "darts"),
         "--python-udfs", str(EXAMPLES)],
        cwd=PROJECT, env=environment, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.stdout.splitlines() == ['{"product": 42.0, "tier": "gold"}']
    assert done.returncode == 2
    odd = "Odd number of arguments given to Udf. Requires even."
    assert f"error: statement 2: SQL error at line 2, column 8: {odd}" in done.stderr.splitlines()

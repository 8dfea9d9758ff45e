"""Spark's streaming checks run as a dagger is built: `dagger validate` refuses what `dagger run` would, in
the same words, and a query Spark can run as a stream still validates."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jobs.cli import main as cli
from jobs.model.errors import DaggerBuildError
from jobs.running import runner
from tests.test_parquet_stream import parquet_stream, write_orders

CHAINED_AGGREGATION = (
    "SELECT orders_per_amount, COUNT(*) AS amounts FROM "
    "(SELECT amount, COUNT(*) AS orders_per_amount FROM orders GROUP BY amount) GROUP BY orders_per_amount"
)
UNWINDOWED_COUNT = "SELECT amount, COUNT(*) AS orders FROM orders GROUP BY amount"


def dagger_file(folder: Path, descriptor_set: Path, sql: str, output_mode: str) -> Path:
    lake = folder / "lake"
    write_orders(lake / "dt=2024-05-01" / "hr=05" / "part-0.parquet", 0, 3)
    document = {
        "name": "checked-dagger",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "checkpoint_location": str(folder / "checkpoint"),
        "watermark_delay": "1s",
        "streams": [parquet_stream([str(lake)])],
        "sql": sql,
        "output_mode": output_mode,
        "sinks": [{"kind": "log"}],
    }
    path = folder / "dagger.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize(
    ("sql", "output_mode", "reason"),
    [
        (
            CHAINED_AGGREGATION,
            "update",
            "Detected pattern of possible 'correctness' issue due to global watermark",
        ),
        (UNWINDOWED_COUNT, "append", "Invalid streaming output mode: append"),
    ],
)
def test_validate_refuses_what_run_refuses_in_the_same_words(
    sql, output_mode, reason, spark, descriptor_set, tmp_path, capsys, monkeypatch, start_dagger
):
    path = dagger_file(tmp_path, descriptor_set, sql, output_mode)

    assert cli.main(["validate", str(path)]) == 1
    refused = capsys.readouterr().err.removesuffix("\n")  # print's own newline
    assert refused.startswith("dagger checked-dagger: the query cannot run as a stream: ")
    assert reason in refused

    # Without the check at build time, the query's start refuses it: with the very same message.
    monkeypatch.setattr(runner, "require_streamable", lambda *arguments: None)
    with pytest.raises(DaggerBuildError) as started:
        start_dagger(cli.load_dagger_or_job(path))
    assert str(started.value) == refused


def test_a_query_spark_streams_still_validates(spark, descriptor_set, tmp_path, capsys):
    path = dagger_file(tmp_path, descriptor_set, UNWINDOWED_COUNT, "update")
    assert cli.main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"{path}: ok")

"""The Analysis API over HTTP and `dagger sql --project`: read keys, answers, refusals, limits."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from jobs.analysis.api import QueryService, create_app
from jobs.analysis.engine import AnalysisEngine
from jobs.analysis.project import load_projects
from tests.analysis_lakes import plant
from tests.collector import served


@pytest.fixture(scope="module")
def lakes(tmp_path_factory, collector):
    return plant(tmp_path_factory.mktemp("analysis-api"), collector.database_url)


@pytest.fixture(scope="module")
def api(spark, lakes, collector):
    service = QueryService(AnalysisEngine(spark, load_projects(lakes.folder)), collector.registry)
    with served(create_app(service)) as url:
        yield url


@pytest.fixture(scope="module")
def shop_key(collector) -> str:
    return collector.registry.create_read_key("shop")


def query(api: str, key: str, sql: str, **extra) -> httpx.Response:
    return httpx.post(
        f"{api}/query/execute", json={"api": {"read_key": key}, "query": sql, **extra}, timeout=120
    )


def test_a_query_answers_columns_and_rows(api, shop_key):
    answer = query(
        api,
        shop_key,
        "SELECT user_id, count(*) AS views, max(at) AS last FROM pageview GROUP BY 1 ORDER BY 1",
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "columns": [
            {"name": "user_id", "type": "string"},
            {"name": "views", "type": "int64"},
            {"name": "last", "type": "timestamp[us, tz=UTC]"},
        ],
        "rows": [
            ["u1", 2, "2026-11-26T00:05:00Z"],
            ["u2", 2, "2026-11-26T00:30:00Z"],
            ["u3", 1, "2026-11-26T00:09:00Z"],
        ],
        "truncated": False,
    }


def test_a_limit_truncates_and_says_so(api, shop_key):
    answer = query(api, shop_key, "SELECT id FROM range(10) ORDER BY id", limit=3)
    assert answer.json()["rows"] == [[0], [1], [2]]
    assert answer.json()["truncated"] is True


def test_a_refused_query_is_a_400_naming_the_part(api, shop_key):
    answer = query(api, shop_key, "SELECT * FROM secrets")
    assert answer.status_code == 400
    assert "secrets" in answer.json()["error"]


def test_a_failure_while_computing_rows_is_a_422_with_its_reason(api, shop_key):
    answer = query(api, shop_key, "SELECT assert_true(user_id = 'nobody', 'a user showed up') FROM pageview")
    assert answer.status_code == 422, answer.text
    assert "a user showed up" in answer.json()["error"]
    assert "\tat " not in answer.json()["error"]


def test_keys_decide_the_project(api, collector, shop_key):
    rival_key = collector.registry.create_read_key("rival")
    answer = query(api, rival_key, "SELECT secret FROM secrets ORDER BY secret")
    assert answer.json()["rows"] == [["RIVAL-1"], ["RIVAL-2"]]
    assert query(api, "not-a-key", "SELECT 1").status_code == 403
    _, write_key = collector.new_project("writer")
    assert query(api, write_key, "SELECT 1").status_code == 403  # a write key reads nothing
    nowhere = collector.registry.create_read_key("no_project_file")
    assert query(api, nowhere, "SELECT 1").status_code == 404
    malformed = httpx.post(f"{api}/query/execute", content=b"{", timeout=30)
    assert malformed.status_code == 400
    assert "malformed JSON" in malformed.json()["error"]


def test_dagger_sql_with_a_project(lakes):
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "sql", "--project", "shop", "--projects", str(lakes.folder)],
        input="SELECT url FROM pageview WHERE user_id = 'u3'; SELECT * FROM secrets",
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DAGGER_COLLECTOR_DATABASE": ""},
    )
    assert [json.loads(line) for line in result.stdout.splitlines()] == [{"url": "/help"}]
    assert result.returncode == 2
    assert "statement 2: query refused" in result.stderr
    assert "secrets" in result.stderr

"""The Nexmark benchmark (`bench/nexmark.py`, `make nexmark`) at a small scale: one query, one run per
engine, a few thousand events on the session's Kafka; its report's fields, and both engines' outputs
compared by their digests. (Its figures at this scale mean nothing; `make nexmark` measures.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.nexmark import MARKERS, benchmark, parse_arguments, publish, run_figures, table
from bench.nexmark_dagger import digest
from jobs.tools.nexmark.config import NexmarkConfig
from jobs.tools.nexmark.oracle import comparable, verdict

EVENTS = 2000
QUERIES = ["q7"]
"""A windowed query (TUMBLE maximum joined back): it writes only at the final watermark, so its rows come at
the end of a bounded run, where the figures are cut. Each query costs a Flink and a Spark start-up."""


def test_run_figures_take_the_cpu_at_the_last_row_out() -> None:
    samples = [
        {"time": 10.0, "cpu_s": 1.0, "rss": 100 * 2**20},
        {"time": 12.0, "cpu_s": 3.0, "rss": 300 * 2**20},
        {"time": 14.0, "cpu_s": 4.0, "rss": 200 * 2**20},
        {"time": 16.0, "cpu_s": 9.0, "rss": 200 * 2**20},  # after the last row: writing its result
    ]
    figures = run_figures(8000, launched=10.0, samples=samples, first=11.0, last=13.5)
    assert figures == {
        "peak_rss_mib": 300,
        "cpu_s": 4.0,
        "launch_to_last_output_s": 3.5,
        "events_per_s_per_core": 2000,
        "events_per_s_launch_to_last": 2286,
        "events_per_s_first_to_last": 3200,
    }


def test_a_run_without_output_has_no_rates() -> None:
    assert run_figures(100, 1.0, [{"time": 2.0, "cpu_s": 1.0, "rss": 2**20}], None, None) == {
        "peak_rss_mib": 1
    }


def test_digests_tell_results_apart_by_row_value_and_type() -> None:
    base = digest(comparable(["a"], [[["int64", 1]], [["int64", 2]]]))
    assert base == digest(comparable(["a"], [[["int64", 2]], [["int64", 1]]]))  # a multiset: order aside
    assert base["rows"] == 2
    for other in ([[["int64", 1]], [["int64", 3]]], [[["int64", 1]], [["int32", 2]]], [[["int64", 1]]]):
        assert verdict(base, digest(comparable(["a"], other))) == "different"
    assert verdict(base, base) == "identical"
    assert verdict(digest(comparable(["a"], [])), base) == "compares nothing: no rows on Flink"
    assert digest({"error": "refused: x"}) == {"error": "refused: x"}


def test_the_cli_refuses_an_unknown_query_and_a_count_below_one() -> None:
    with pytest.raises(SystemExit):
        parse_arguments(["--only", "q0,q99"])
    with pytest.raises(SystemExit):
        parse_arguments(["--runs", "0"])


def test_publish_replaces_the_table_between_the_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"before\n{MARKERS[0]}\nold table\n{MARKERS[1]}\nafter\n")
    publish("| new |\n", [page])
    assert page.read_text() == f"before\n{MARKERS[0]}\n| new |\n{MARKERS[1]}\nafter\n"


def test_both_engines_run_each_query_and_their_outputs_are_compared(kafka, tmp_path: Path) -> None:
    topic = f"nexmark-bench-{kafka.new_topic('unused').rsplit('-', 1)[-1]}"  # a name no topic has yet
    config = NexmarkConfig(num_events=EVENTS, first_event_rate=100, next_event_rate=100)
    summary = benchmark(kafka.bootstrap_servers, topic, config, QUERIES, 1, tmp_path)

    assert summary["events"] == EVENTS
    assert list(summary["queries"]) == QUERIES
    for query, result in summary["queries"].items():
        assert result["verdict"] == "identical", (query, result["verdict"])
        flink, dagger = result["runs"]["flink"][0], result["runs"]["dagger"][0]
        assert flink["output"] == dagger["output"]
        assert flink["output"]["rows"] > 0
        for engine, run in (("flink", flink), ("dagger", dagger)):
            assert run["events_per_s_per_core"] == round(EVENTS / run["cpu_s"]), (query, engine)
            assert run["events_per_s_launch_to_last"] > 0
            assert run["peak_rss_mib"] > 100  # a JVM's at least
            assert result[engine]["events_per_s_per_core"] == run["events_per_s_per_core"]
            assert result[engine]["runs_agree"]
    assert (tmp_path / "nexmark.json").exists()
    rows = table(summary).splitlines()
    assert [row.split(" | ")[0] for row in rows[4:]] == ["| q7"]
    assert "identical" in rows[4] and "12.3 K" in rows[4]  # Nexmark's published figure beside q7

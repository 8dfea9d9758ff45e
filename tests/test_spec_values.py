"""Values in a dagger file: durations in their written forms and their bounds, and `${VAR}` environment
substitution (defaults, and a missing variable named by its key path)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobs.model.spec import DaggerConfigError, parse_dagger
from tests.spec_documents import SOURCE, document, kafka_stream, problems


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10s", timedelta(seconds=10)),
        ("500ms", timedelta(milliseconds=500)),
        ("2m", timedelta(minutes=2)),
        ("1h", timedelta(hours=1)),
        ("1d", timedelta(days=1)),
        ("1.5s", timedelta(seconds=1.5)),
        (" 3 s ", timedelta(seconds=3)),
        ("7", timedelta(seconds=7)),
        (5, timedelta(seconds=5)),
        (2.5, timedelta(seconds=2.5)),
        (0, timedelta(0)),
    ],
)
def test_durations(value: Any, expected: timedelta) -> None:
    data = document(watermark_delay=value, trigger_interval=value)
    data["schema_registry"]["fetch_timeout"] = value

    spec = parse_dagger(data, SOURCE)

    assert spec.watermark_delay == expected
    assert spec.trigger_interval == expected
    assert spec.schema_registry.fetch_timeout == expected


@pytest.mark.parametrize("value", ["10x", "ten seconds", "-1s", "1 s 2", "", "s", True, [10], None])
def test_bad_durations_name_the_key_and_the_expected_form(value: Any) -> None:
    (line,) = problems(document(watermark_delay=value))

    assert line.startswith("watermark_delay: expected a duration such as '10s', '500ms', '2m' or '1h'")
    assert line.endswith(f" (got {value!r})")


def test_bad_duration_message_shows_the_value_once() -> None:
    # BUG: the validator's message ends in "got '10x'" and the formatter appends "(got '10x')" again.
    assert problems(document(watermark_delay="10x")) == [
        "watermark_delay: expected a duration such as '10s', '500ms', '2m' or '1h' (got '10x')"
    ]


@pytest.mark.parametrize("value", [1e300, float("inf"), "99999999999d"])
def test_out_of_range_durations_are_config_errors(value: Any) -> None:
    # BUG: timedelta() raises OverflowError, which pydantic does not turn into a validation error.
    (line,) = problems(document(watermark_delay=value))

    assert line.startswith("watermark_delay: ")


def test_environment_variables_are_substituted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGGER_TEST_HOST", "kafka.internal")
    monkeypatch.setenv("DAGGER_TEST_PORT", "9093")
    monkeypatch.setenv("DAGGER_TEST_TOPIC", "bookings-v2")
    monkeypatch.setenv("DAGGER_TEST_BATCH", "250")
    monkeypatch.setenv("DAGGER_TEST_SASL", "secret")
    monkeypatch.delenv("DAGGER_TEST_UNSET", raising=False)
    data = document(
        description="${DAGGER_TEST_UNSET:-}",
        streams=[
            kafka_stream(
                bootstrap_servers="${DAGGER_TEST_HOST}:${DAGGER_TEST_PORT}",
                topics=["bookings", "${DAGGER_TEST_TOPIC}"],
                group_id="${DAGGER_TEST_UNSET:-fallback-group}",
                max_records_per_batch="${DAGGER_TEST_BATCH}",
                consumer_config={"sasl.password": "${DAGGER_TEST_SASL}", "fetch.max.bytes": 5},
            )
        ],
        sql="SELECT * FROM bookings -- ${DAGGER_TEST_PORT:-0}",
    )

    spec = parse_dagger(data, SOURCE)

    stream = spec.streams[0]
    assert spec.description == ""
    assert stream.bootstrap_servers == "kafka.internal:9093"
    assert stream.topics == ["bookings", "bookings-v2"]
    assert stream.group_id == "fallback-group"
    assert stream.max_records_per_batch == 250
    assert stream.consumer_config == {"sasl.password": "secret", "fetch.max.bytes": 5}
    assert spec.sql == "SELECT * FROM bookings -- 9093"


def test_a_set_variable_wins_over_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGGER_TEST_HOST", "from-env:1")

    spec = parse_dagger(
        document(streams=[kafka_stream(bootstrap_servers="${DAGGER_TEST_HOST:-default:2}")]), SOURCE
    )

    assert spec.streams[0].bootstrap_servers == "from-env:1"


@pytest.mark.parametrize(
    ("streams", "key_path"),
    [
        ([kafka_stream(bootstrap_servers="${DAGGER_TEST_MISSING}")], "streams[0].bootstrap_servers"),
        ([kafka_stream(topics=["a", "x-${DAGGER_TEST_MISSING}"])], "streams[0].topics[1]"),
        (
            [
                kafka_stream(),
                kafka_stream(table="t2", consumer_config={"sasl.password": "${DAGGER_TEST_MISSING}"}),
            ],
            "streams[1].consumer_config.sasl.password",
        ),
        (
            [kafka_stream(consumer_config={"\r": "${DAGGER_TEST_MISSING}"})],
            "streams[0].consumer_config.'\\r'",
        ),
    ],
)
def test_a_missing_variable_names_the_key_path(
    monkeypatch: pytest.MonkeyPatch, streams: list[dict[str, Any]], key_path: str
) -> None:
    monkeypatch.delenv("DAGGER_TEST_MISSING", raising=False)

    with pytest.raises(DaggerConfigError) as raised:
        parse_dagger(document(streams=streams), SOURCE)

    assert str(raised.value) == f"{SOURCE}: {key_path}: environment variable DAGGER_TEST_MISSING is not set"

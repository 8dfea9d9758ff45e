"""Demand-driven daggers: an instance runs only while someone reads its output topic.

A dagger with a `demand:` block is a template. The whole name of its output topic matches `demand.topic`,
a regular expression whose named groups are the instance's parameters: for `cpu\\.avg\\.(?P<seconds>\\d+)s`,
a subscriber reading `cpu.avg.30s` asks for the instance with `seconds = 30`, whose SQL, stream topics and
group ids have `{seconds}` replaced by `30` and whose Kafka sink writes `{topic}`, the instance's topic.

Who reads a topic is the broker's business: a consumer group with a live member assigned a partition of
the topic is a subscriber. (The project's own stream readers only `assign()` partitions and commit
offsets, so they never count as subscribers.) A running instance subscribes to its own Kafka inputs
through the group `dagger.demand.<dagger>.<topic>`, with its partitions paused, so demand for its output
becomes demand for another demand-driven dagger's output it reads: a chain starts and stops together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta

from pydantic import Field, field_validator

from jobs.model.config import ConfigModel, Duration

TOPIC_PARAMETER = "topic"
"""`{topic}` in a demand template's Kafka sink: the instance's own topic (not a parameter name)."""


class DemandConfig(ConfigModel):
    """Run an instance of this dagger per output topic that somebody subscribes to, only while they do."""

    topic: str = Field(min_length=1)
    """Regular expression matched against whole topic names; its named groups are the parameters that
    replace `{name}` in the SQL, the Kafka streams' topics and group ids."""
    idle_timeout: Duration = timedelta(minutes=1)
    """How long an instance's topic may have no subscriber before its run is stopped (gracefully: the
    running micro-batch finishes and the checkpoint is kept for the next subscriber)."""
    poll_interval: Duration = timedelta(seconds=10)
    """How often Dagster's demand sensor looks at the broker's consumer groups."""

    @field_validator("topic")
    @classmethod
    def _pattern_with_valid_parameters(cls, value: str) -> str:
        try:
            pattern = re.compile(value)
        except re.error as error:
            raise ValueError(f"not a valid regular expression: {error}") from None
        if TOPIC_PARAMETER in pattern.groupindex:
            raise ValueError(f"a parameter may not be named {TOPIC_PARAMETER!r}: '{{topic}}' is the topic")
        return value

    @field_validator("poll_interval")
    @classmethod
    def _at_least_a_second(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=1):
            raise ValueError("must be at least 1s")
        return value

    @property
    def parameter_names(self) -> list[str]:
        return list(re.compile(self.topic).groupindex)

    def parameters(self, topic: str) -> dict[str, str] | None:
        """The parameters of the instance whose output is `topic`, or None if the topic is not one."""
        match = re.fullmatch(self.topic, topic)
        return None if match is None else {name: value or "" for name, value in match.groupdict().items()}


def fill_parameters(text: str, values: Mapping[str, str]) -> str:
    """`text` with each `{name}` of `values` replaced by its value (other braces are left alone)."""
    for name, value in values.items():
        text = text.replace(f"{{{name}}}", value)
    return text

"""Value types shared by every part of a dagger file: strict models, durations, identifiers, URLs, paths."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
_SQL_IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
MAX_DURATION_S = 365 * 86400
_ISO_DURATION = TypeAdapter(timedelta)

FROM_RESOURCE = "(from the deployment's resource)"
"""Shown for a setting the dagger file leaves to the deployment's Dagster resource."""


class ConfigModel(BaseModel):
    """A part of a dagger file: unknown keys are errors, values never change after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _parse_duration(value: Any) -> Any:
    """Accept `10s`, `500ms`, `2m`, `1h`, `1d` or a number of seconds."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    elif isinstance(value, str) and value.startswith("P"):
        # ISO 8601 (`PT30S`): how a validated model's durations come back from JSON, e.g. on executors.
        try:
            seconds = _ISO_DURATION.validate_python(value).total_seconds()
        except ValidationError:
            raise ValueError("expected a duration such as '10s', '500ms', '2m' or '1h'") from None
    else:
        raise ValueError("expected a duration such as '10s', '500ms', '2m' or '1h'")
    if not 0 <= seconds <= MAX_DURATION_S:
        raise ValueError(f"duration must be between 0 and {MAX_DURATION_S // 86400} days")
    return timedelta(seconds=seconds)


Duration = Annotated[timedelta, BeforeValidator(_parse_duration)]
SqlIdentifier = Annotated[str, Field(pattern=_SQL_IDENTIFIER)]


def _client_config_value(value: Any) -> str | int | float | bool:
    if isinstance(value, str | int | float | bool):
        return value
    raise ValueError("expected a string, number or boolean")


ClientConfigValue = Annotated[str | int | float | bool, PlainValidator(_client_config_value)]
"""A librdkafka-style client setting, passed through as it is."""

KafkaConnector = Literal["python", "spark"]
"""Who reads or writes a Kafka stream or sink: `spark`, Spark's own Kafka connector with the JVM codec (the
records never enter Python); `python`, the project's Python data source and writer."""


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")) or len(value.split("://", 1)[1]) == 0:
        raise ValueError("expected an http:// or https:// URL")
    return value.rstrip("/")


HttpUrl = Annotated[str, AfterValidator(_http_url)]

_URL_CREDENTIALS = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@")
_SECRET_KEY = re.compile(
    r"(?i)password|passwd|secret|token|credential|authorization|api[-_.]?key|access[-_.]?key|private[-_.]?key"
)


def without_credentials(url: str) -> str:
    """`url` without the `user:password@` of `https://user:password@host:9200`, for messages and metadata."""
    return _URL_CREDENTIALS.sub(r"\1", url)


def is_secret_key(key: str) -> bool:
    """Whether a setting named `key` holds a credential (`password`, `sasl.password`, `Authorization`...)."""
    return _SECRET_KEY.search(key) is not None


def resolve_path(value: str, info: ValidationInfo) -> str:
    """Paths and URLs as given; relative local paths against the dagger file's folder."""
    return resolve_against(value, (info.context or {}).get("base_dir"))


def resolve_against(value: str, base_dir: str | Path | None) -> str:
    """`value` if it is a URL or an absolute path, else the path relative to `base_dir` (if any)."""
    if "://" in value or os.path.isabs(value) or not base_dir:
        return value
    return str(Path(base_dir, value).resolve())


class DeadLetterPolicy(ConfigModel):
    """Base of the policies that may copy a skipped record to a dead-letter topic."""

    action: str
    dead_letter_topic: str | None = None
    """The topic, on the stream's own cluster, that `dead_letter` copies the records to."""

    @model_validator(mode="after")
    def _dead_letter_needs_topic(self) -> Self:
        if self.action == "dead_letter" and not self.dead_letter_topic:
            raise ValueError("action 'dead_letter' needs 'dead_letter_topic'")
        return self

"""Dagger files on disk: relative paths resolved against the file's folder, and every error that comes of
reading one (YAML syntax, not a mapping, missing, not UTF-8) naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.model.spec import DaggerConfigError, load_dagger, parse_dagger
from tests.spec_documents import SOURCE, document, parquet_stream

DAGGER_WITH_PATHS = """\
name: paths
schema_registry:
  descriptor_sets:
    - ../protos/descriptor_set.pb
    - /opt/protos/absolute.pb
    - http://stencil.local/v1/descriptors/latest
    - file:///opt/protos/file-url.pb
streams:
  - kind: parquet
    table: history
    proto_message: dagger.examples.BookingLogMessage
    event_time_field: event_timestamp
    paths: [data/bookings, ./more, /srv/data, s3a://bucket/bookings]
sql: SELECT * FROM history
checkpoint_location: state/checkpoint
sinks:
  - kind: log
"""


def test_load_dagger_resolves_relative_paths_against_the_file_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "daggers"
    folder.mkdir()
    dagger_file = folder / "paths.yaml"
    dagger_file.write_text(DAGGER_WITH_PATHS)
    monkeypatch.chdir("/")  # the working folder does not matter
    root = tmp_path.resolve()

    spec = load_dagger(dagger_file)

    assert spec.schema_registry.descriptor_sets == [
        str(root / "protos" / "descriptor_set.pb"),
        "/opt/protos/absolute.pb",
        "http://stencil.local/v1/descriptors/latest",
        "file:///opt/protos/file-url.pb",
    ]
    assert spec.streams[0].paths == [
        str(root / "daggers" / "data" / "bookings"),
        str(root / "daggers" / "more"),
        "/srv/data",
        "s3a://bucket/bookings",
    ]
    assert spec.checkpoint_location == str(root / "daggers" / "state" / "checkpoint")
    assert spec.resolved_checkpoint_location == spec.checkpoint_location


def test_parse_dagger_without_base_dir_keeps_relative_paths() -> None:
    data = document(streams=[parquet_stream(paths=["data"])], checkpoint_location="ckpt")
    data["schema_registry"]["descriptor_sets"] = ["set.pb"]

    spec = parse_dagger(data, SOURCE)

    assert spec.schema_registry.descriptor_sets == ["set.pb"]
    assert spec.streams[0].paths == ["data"]
    assert spec.checkpoint_location == "ckpt"


def test_yaml_syntax_error_names_the_file(tmp_path: Path) -> None:
    dagger_file = tmp_path / "broken.yaml"
    dagger_file.write_text("name: broken\nstreams: [\n")

    with pytest.raises(DaggerConfigError, match=r"^.*broken\.yaml: not valid YAML: ") as raised:
        load_dagger(dagger_file)

    assert str(raised.value).startswith(f"{dagger_file}: not valid YAML: ")
    assert "line 3, column 1" in str(raised.value)


@pytest.mark.parametrize(
    ("text", "type_name"), [("- name: a\n- name: b\n", "list"), ("just a string\n", "str"), ("", "NoneType")]
)
def test_a_document_that_is_not_a_mapping_names_the_file(tmp_path: Path, text: str, type_name: str) -> None:
    dagger_file = tmp_path / "not-a-mapping.yaml"
    dagger_file.write_text(text)

    with pytest.raises(DaggerConfigError) as raised:
        load_dagger(dagger_file)

    assert str(raised.value) == f"{dagger_file}: a dagger file must be a mapping of keys, got {type_name}"


def test_a_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(DaggerConfigError) as raised:
        load_dagger(tmp_path / "absent.yaml")

    assert (
        str(raised.value) == f"{tmp_path / 'absent.yaml'}: cannot read dagger file: No such file or directory"
    )


def test_a_validation_error_from_a_file_names_the_file(tmp_path: Path) -> None:
    dagger_file = tmp_path / "typo.yaml"
    dagger_file.write_text(
        DAGGER_WITH_PATHS.replace("    table: history", "    table: history\n    topicz: [a]")
    )

    with pytest.raises(DaggerConfigError) as raised:
        load_dagger(dagger_file)

    assert (
        str(raised.value) == f"{dagger_file}: invalid dagger (1 problem(s))\n  streams[0].topicz: unknown key"
    )


def test_a_file_that_is_not_utf8_text_names_the_file(tmp_path: Path) -> None:
    # BUG: read_text() raises UnicodeDecodeError, which load_dagger does not catch.
    dagger_file = tmp_path / "binary.yaml"
    dagger_file.write_bytes(b"\xff\xfename: x\n")

    with pytest.raises(DaggerConfigError) as raised:
        load_dagger(dagger_file)

    assert str(raised.value).startswith(f"{dagger_file}: ")

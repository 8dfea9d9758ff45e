"""Schema registry loading: descriptor sets read from files and fetched over HTTP, and the errors that say
what is wrong (an unknown message, a missing or broken set, a set without its imports)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from jobs.model.schema_registry import SchemaRegistry, SchemaRegistryError
from tests.codec_samples import ALL_TYPES, BOOKING, PROJECTION


def test_registry_loads_the_built_descriptor_set(descriptor_set: Path) -> None:
    registry = SchemaRegistry.load([str(descriptor_set)])

    names = registry.message_names
    assert names == sorted(names)
    assert {ALL_TYPES, PROJECTION, BOOKING, "dagger.testing.Point", "google.protobuf.Timestamp"} <= set(names)
    assert "dagger.testing.AllTypes.LabelsEntry" not in names  # map entries are not messages users name
    assert registry.message(ALL_TYPES).full_name == ALL_TYPES
    assert registry.message(BOOKING).fields_by_name["pickup_location"].message_type.full_name == (
        "dagger.examples.Location"
    )
    assert registry.serialized_descriptor_sets == [descriptor_set.read_bytes()]


def test_registry_takes_a_file_defined_twice_from_the_first_set(descriptor_set: Path) -> None:
    registry = SchemaRegistry.load([str(descriptor_set), f"file://{descriptor_set}"])

    assert registry.message_names.count(ALL_TYPES) == 1
    assert len(registry.serialized_descriptor_sets) == 2


@dataclass
class DescriptorServer:
    """A real HTTP server on a free loopback port, serving the descriptor set at one path."""

    payload: bytes
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def descriptor_server(descriptor_set: Path) -> Iterator[DescriptorServer]:
    served = DescriptorServer(descriptor_set.read_bytes())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.requests.append((self.path, dict(self.headers)))
            if self.path != "/v1/descriptors/dagger.pb":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(served.payload)))
            self.end_headers()
            self.wfile.write(served.payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_registry_loads_from_an_http_url_with_headers_once(descriptor_server: DescriptorServer) -> None:
    url = f"{descriptor_server.url}/v1/descriptors/dagger.pb"

    registry = SchemaRegistry.load([url], timeout_s=5, headers={"Authorization": "Bearer token-1"})
    again = SchemaRegistry.load([url], timeout_s=5, headers={"Authorization": "Bearer token-1"})

    assert registry.message(ALL_TYPES).full_name == ALL_TYPES
    assert registry.serialized_descriptor_sets == [descriptor_server.payload]
    assert again.message_names == registry.message_names
    ((path, headers),) = descriptor_server.requests  # the second load came from the per-process cache
    assert path == "/v1/descriptors/dagger.pb"
    assert headers["Authorization"] == "Bearer token-1"


def test_registry_http_error_is_a_schema_registry_error(descriptor_server: DescriptorServer) -> None:
    url = f"{descriptor_server.url}/v1/descriptors/missing.pb"

    with pytest.raises(SchemaRegistryError) as raised:
        SchemaRegistry.load([url], timeout_s=5)

    assert str(raised.value) == f"cannot fetch descriptor set {url}: HTTP Error 404: Not Found"


def test_unknown_message_lists_close_names(registry: SchemaRegistry) -> None:
    with pytest.raises(SchemaRegistryError) as raised:
        registry.message("dagger.testing.AllTypez")

    message = str(raised.value)
    assert message.startswith(
        "protobuf message 'dagger.testing.AllTypez' is not defined; "
        "did you mean one of: dagger.testing.AllTypes, "
    )
    suggestions = message.split("did you mean one of: ")[1].split(", ")
    assert {"dagger.testing.Point", "dagger.testing.Segment", "dagger.testing.Projection"} <= set(suggestions)
    assert all(name.startswith("dagger.testing.") for name in suggestions)


def test_unqualified_message_name_suggests_the_full_name(registry: SchemaRegistry) -> None:
    with pytest.raises(SchemaRegistryError) as raised:
        registry.message("BookingLogMessage")

    assert str(raised.value) == (
        "protobuf message 'BookingLogMessage' is not defined; "
        "did you mean one of: dagger.examples.BookingLogMessage"
    )


def test_unknown_package_lists_known_packages(registry: SchemaRegistry) -> None:
    with pytest.raises(SchemaRegistryError) as raised:
        registry.message("nowhere.Thing")

    message = str(raised.value)
    assert message.startswith("protobuf message 'nowhere.Thing' is not defined; known packages: ")
    assert {"dagger.examples", "dagger.testing", "google.protobuf"} <= set(message.split(": ")[1].split(", "))


def test_missing_descriptor_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.pb"

    with pytest.raises(SchemaRegistryError) as raised:
        SchemaRegistry.load([str(missing)])

    assert str(raised.value) == (
        f"cannot read descriptor set {missing}: No such file or directory "
        "(descriptor sets are compiled from protos/ by `make protos`)"
    )


@pytest.mark.parametrize("payload", [b"hello world", b'{"file": []}', b"\n\x01x"])
def test_bytes_that_are_not_a_descriptor_set(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "not-a-set.pb"
    path.write_bytes(payload)

    with pytest.raises(SchemaRegistryError) as raised:
        SchemaRegistry.load([str(path)])

    assert str(raised.value).startswith(
        f"{path} is not a serialized FileDescriptorSet: Error parsing message"
    )


def test_an_empty_file_is_not_a_descriptor_set(tmp_path: Path) -> None:
    # Zero bytes would parse as an empty FileDescriptorSet: a truncated or empty download must fail here,
    # naming the file, not later as "not defined; known packages: ".
    path = tmp_path / "empty.pb"
    path.write_bytes(b"")

    with pytest.raises(SchemaRegistryError) as raised:
        SchemaRegistry.load([str(path)])

    assert str(raised.value).startswith(f"{path}")


def test_a_set_without_its_imports_is_rejected(tmp_path: Path, descriptor_set: Path) -> None:
    full_set = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes())
    partial = descriptor_pb2.FileDescriptorSet(
        file=[proto for proto in full_set.file if proto.name == "dagger/testing/all_types.proto"]
    )
    path = tmp_path / "no-imports.pb"
    path.write_bytes(partial.SerializeToString())

    with pytest.raises(SchemaRegistryError) as raised:
        SchemaRegistry.load([str(path)])

    message = str(raised.value)
    assert message.startswith(f"{path}: cannot load dagger/testing/all_types.proto: ")
    assert message.endswith("(was it compiled with --include_imports?)")

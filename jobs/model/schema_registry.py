"""Protobuf descriptors from FileDescriptorSet files, local or over HTTP(S), the way stencil serves them."""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor


class SchemaRegistryError(LookupError):
    """A descriptor set that cannot be loaded, or a message name it does not define."""


_fetch_cache: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}
_fetch_lock = threading.Lock()


def fetch_descriptor_set(
    location: str, timeout_s: float = 10.0, headers: Mapping[str, str] | None = None
) -> bytes:
    """The raw bytes of one descriptor set, cached per process (executors reuse them across batches)."""
    key = (location, tuple(sorted((headers or {}).items())))
    with _fetch_lock:
        if key in _fetch_cache:
            return _fetch_cache[key]
    payload = read_descriptor_set(location, timeout_s, headers)
    with _fetch_lock:
        _fetch_cache[key] = payload
    return payload


def read_descriptor_set(
    location: str, timeout_s: float = 10.0, headers: Mapping[str, str] | None = None
) -> bytes:
    """The current bytes of one descriptor set, uncached (for noticing that it changed)."""
    if location.startswith(("http://", "https://")):
        # Imported here: urllib.request brings http.client and email (~2 MB) into every Python worker that
        # rebuilds a registry from its descriptor-set option, and those never fetch.
        import urllib.error
        import urllib.request

        request = urllib.request.Request(location, headers=dict(headers or {}))
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.read()
        except (urllib.error.URLError, TimeoutError) as error:
            raise SchemaRegistryError(f"cannot fetch descriptor set {location}: {error}") from None
    path = Path(location.removeprefix("file://"))
    try:
        return path.read_bytes()
    except OSError as error:
        raise SchemaRegistryError(
            f"cannot read descriptor set {location}: {error.strerror} "
            "(descriptor sets are compiled from protos/ by `make protos`)"
        ) from None


class SchemaRegistry:
    """Messages by full name from one or more descriptor sets.

    Descriptor sets must be self-contained (`protoc --include_imports`); a file defined by several sets
    is taken from the first.
    """

    def __init__(self, descriptor_sets: Sequence[bytes], sources: Sequence[str] | None = None) -> None:
        self._pool = descriptor_pool.DescriptorPool()
        self._serialized = list(descriptor_sets)
        self._message_names: list[str] = []
        self._projections: dict[tuple[str, tuple[str, ...]], Descriptor] = {}
        added: set[str] = set()
        for index, payload in enumerate(descriptor_sets):
            source = sources[index] if sources else f"descriptor set #{index}"
            try:
                file_set = descriptor_pb2.FileDescriptorSet.FromString(payload)
            except Exception as error:
                raise SchemaRegistryError(
                    f"{source} is not a serialized FileDescriptorSet: {error}"
                ) from None
            if not file_set.file:
                raise SchemaRegistryError(f"{source} is not a FileDescriptorSet: it describes no .proto file")
            for file_proto in file_set.file:
                if file_proto.name in added:
                    continue
                try:
                    self._pool.Add(file_proto)
                except Exception as error:
                    raise SchemaRegistryError(
                        f"{source}: cannot load {file_proto.name}: {error} "
                        "(was it compiled with --include_imports?)"
                    ) from None
                added.add(file_proto.name)
                self._message_names.extend(_message_names(file_proto))

    @classmethod
    def load(
        cls, locations: Sequence[str], timeout_s: float = 10.0, headers: Mapping[str, str] | None = None
    ) -> SchemaRegistry:
        return cls([fetch_descriptor_set(location, timeout_s, headers) for location in locations], locations)

    @property
    def serialized_descriptor_sets(self) -> list[bytes]:
        """The sets this registry was built from, for shipping to executors."""
        return list(self._serialized)

    @property
    def message_names(self) -> list[str]:
        return sorted(self._message_names)

    def message(self, full_name: str) -> Descriptor:
        try:
            return self._pool.FindMessageTypeByName(full_name)
        except KeyError:
            raise SchemaRegistryError(self._not_found(full_name)) from None

    def projection(self, full_name: str, field_names: Collection[str]) -> Descriptor:
        """The message with only the named fields (same numbers and types), for decoding.

        A parser skips the bytes of fields its message does not declare, so decoding a projection costs
        only the fields a query reads. Unknown names are ignored; all fields kept gives the message itself.
        """
        original = self.message(full_name)
        kept = tuple(field.name for field in original.fields if field.name in field_names)
        if len(kept) == len(original.fields):
            return original
        key = (full_name, kept)
        if key not in self._projections:
            self._projections[key] = self._build_projection(original, kept)
        return self._projections[key]

    def _build_projection(self, original: Descriptor, kept: tuple[str, ...]) -> Descriptor:
        digest = hashlib.sha256(f"{original.full_name}:{','.join(kept)}".encode()).hexdigest()[:12]
        message = descriptor_pb2.DescriptorProto()
        original.CopyToProto(message)
        message.name = f"{original.name}_projection_{digest}"
        projected_name = f"{original.full_name.rpartition('.')[0]}.{message.name}".lstrip(".")
        fields = [field for field in message.field if field.name in kept]
        oneofs = sorted({field.oneof_index for field in fields if field.HasField("oneof_index")})
        oneof_decls = [message.oneof_decl[index] for index in oneofs]
        for field in fields:
            # map fields must use an entry type nested in their own message: point them at the copies
            if field.type_name.startswith(f".{original.full_name}."):
                field.type_name = field.type_name.replace(f".{original.full_name}.", f".{projected_name}.", 1)
            if field.HasField("oneof_index"):
                field.oneof_index = oneofs.index(field.oneof_index)
        del message.field[:]
        message.field.extend(fields)
        del message.oneof_decl[:]
        message.oneof_decl.extend(oneof_decls)
        source_file = descriptor_pb2.FileDescriptorProto()
        original.file.CopyToProto(source_file)
        file = descriptor_pb2.FileDescriptorProto(
            name=f"dagger/projections/{digest}.proto",
            package=source_file.package,
            syntax=source_file.syntax,
            edition=source_file.edition,
            dependency=[source_file.name, *source_file.dependency],
        )
        file.message_type.append(message)
        self._pool.Add(file)
        return self._pool.FindMessageTypeByName(projected_name)

    def _not_found(self, full_name: str) -> str:
        package = full_name.rpartition(".")[0]
        close = difflib.get_close_matches(full_name, self._message_names, n=5, cutoff=0.6)
        same_package = [name for name in self._message_names if name.rpartition(".")[0] == package]
        suggestions = list(dict.fromkeys(close + same_package))[:10]
        if not suggestions:
            packages = sorted({name.rpartition(".")[0] for name in self._message_names})
            return f"protobuf message {full_name!r} is not defined; known packages: {', '.join(packages)}"
        return f"protobuf message {full_name!r} is not defined; did you mean one of: {', '.join(suggestions)}"


def _message_names(file_proto: descriptor_pb2.FileDescriptorProto) -> list[str]:
    names: list[str] = []

    def walk(prefix: str, messages: Sequence[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            name = f"{prefix}.{message.name}" if prefix else message.name
            if not message.options.map_entry:
                names.append(name)
            walk(name, message.nested_type)

    walk(file_proto.package, file_proto.message_type)
    return names


def encode_descriptor_sets(payloads: Sequence[bytes]) -> str:
    """Descriptor sets as a data-source option (options are strings; executors rebuild the registry)."""
    return json.dumps([base64.b64encode(payload).decode("ascii") for payload in payloads])


_registries: dict[str, SchemaRegistry] = {}
_cache_lock = threading.Lock()


def registry_from_option(descriptor_sets_option: str) -> SchemaRegistry:
    """The registry behind an `encode_descriptor_sets` option, built once per process."""
    key = hashlib.sha256(descriptor_sets_option.encode()).hexdigest()
    with _cache_lock:
        registry = _registries.get(key)
        if registry is None:
            payloads = [base64.b64decode(item) for item in json.loads(descriptor_sets_option)]
            registry = _registries[key] = SchemaRegistry(payloads)
        return registry

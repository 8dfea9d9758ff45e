"""Protobuf decoding as a JVM function of the session (`ProtobufRowDecoder.java`), for streams whose
records never leave the JVM.

It gives the columns `jobs.codec.protobuf.ProtoDecoder` gives (tests/test_codec.py runs the decoding
tests against both), as a Spark column over the serialized messages: a struct of the fields asked for, or
NULL for a payload that is not a valid message. It runs on classic sessions (it is registered through the
session's JVM), not on Spark Connect.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FileDescriptor
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType


def descriptor_set_of(descriptor: Descriptor) -> bytes:
    """A serialized `FileDescriptorSet` holding the message's file and everything it imports."""
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}

    def add(file: FileDescriptor) -> None:
        if file.name in files:
            return
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        files[file.name] = proto

    add(descriptor.file)
    return descriptor_pb2.FileDescriptorSet(file=list(files.values())).SerializeToString()


def register_decoder(
    spark: SparkSession, function_name: str, descriptor: Descriptor, row_type: StructType
) -> None:
    """Registers `function_name(payload BINARY)`, which decodes a `descriptor` message into `row_type`
    (fields of the message by name, shaped as `row_type` says: see `ProtobufRowDecoder.java`), and
    `function_name`_error(payload BINARY), why a payload is not one (NULL when it is).

    `descriptor` may be a projection (`SchemaRegistry.projection`): the parser then skips the bytes of
    every field the query does not read."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    session = spark._jsparkSession  # type: ignore[attr-defined]
    java_row_type = session.parseDataType(row_type.json())
    codec = jvm.dagger.jobs.codec
    descriptor_set = descriptor_set_of(descriptor)
    decoder = codec.ProtobufRowDecoder(descriptor_set, descriptor.full_name, java_row_type)
    session.udf().register(function_name, decoder, java_row_type)
    parse_error = codec.ProtobufParseError(descriptor_set, descriptor.full_name)
    session.udf().register(f"{function_name}_error", parse_error, session.parseDataType('"string"'))

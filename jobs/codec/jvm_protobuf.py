"""Protobuf decoding and encoding as JVM functions of the session (`ProtobufRowDecoder.java`,
`ProtobufRowEncoder.java`), for streams whose records never leave the JVM.

The decoder gives the columns `jobs.codec.protobuf.ProtoDecoder` gives, as a Spark column over the
serialized messages: a struct of the fields asked for, or NULL for a payload that is not a valid message.
The encoder gives the messages `jobs.codec.protobuf_encoding.ProtoEncoder` gives, from a struct of the
result's columns. tests/test_codec.py and tests/test_codec_encoding.py run the decoding and encoding tests
against both codecs. They run on classic sessions (they are registered through the session's JVM), not on
Spark Connect.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FileDescriptor
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from jobs.codec.protobuf_types import EncodeError


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


def register_encoder(
    spark: SparkSession, function_name: str, descriptor: Descriptor, input_type: StructType
) -> None:
    """Registers `function_name(columns STRUCT)` -> BINARY, which encodes a struct of `input_type` (the
    result's columns) into a serialized `descriptor` message, as `ProtoEncoder.encode` does.

    A column whose type cannot fill its field is found here, from `input_type` alone, and raised as the
    `EncodeError` the native encoder raises, before any query runs. What only values show (an unknown enum
    name, an integer out of range, text that is not JSON) fails the query that encodes the row, with the
    same message in the IllegalArgumentException that causes Spark's error."""
    session = spark._jsparkSession  # type: ignore[attr-defined]
    java_input_type = session.parseDataType(input_type.json())
    encoder_class = spark._jvm.dagger.jobs.codec.ProtobufRowEncoder  # type: ignore[attr-defined]
    descriptor_set = descriptor_set_of(descriptor)
    # The constructor throws an IllegalArgumentException for these, but PySpark's py4j handler turns it
    # into a pyspark.errors.IllegalArgumentException whose message is not the Java one: ask for the text.
    problem = encoder_class.typeError(descriptor_set, descriptor.full_name, java_input_type)
    if problem is not None:
        raise EncodeError(problem)
    encoder = encoder_class(descriptor_set, descriptor.full_name, java_input_type)
    session.udf().register(function_name, encoder, session.parseDataType('"binary"'))

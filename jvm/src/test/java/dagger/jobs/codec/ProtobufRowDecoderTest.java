package dagger.jobs.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Timestamp;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

/** The decoder without Spark running: the well-known types of protobuf-java itself as the messages. */
class ProtobufRowDecoderTest {
  private static final byte[] TIMESTAMP_SET =
      FileDescriptorSet.newBuilder().addFile(Timestamp.getDescriptor().getFile().toProto()).build().toByteArray();

  private static StructType secondsAndNanos() {
    return new StructType().add("seconds", DataTypes.LongType).add("nanos", DataTypes.IntegerType);
  }

  @Test
  void decodesOnlyTheFieldsOfTheTargetType() {
    ProtobufRowDecoder decoder = new ProtobufRowDecoder(
        TIMESTAMP_SET, "google.protobuf.Timestamp", new StructType().add("nanos", DataTypes.IntegerType));
    byte[] payload = Timestamp.newBuilder().setSeconds(1_700_000_000L).setNanos(5).build().toByteArray();

    Row row = decoder.call(payload);

    assertEquals(1, row.length());
    assertEquals(5, row.getInt(0));
  }

  @Test
  void anInvalidPayloadIsNullAndItsReasonIsProtobufs() {
    ProtobufRowDecoder decoder = new ProtobufRowDecoder(TIMESTAMP_SET, "google.protobuf.Timestamp", secondsAndNanos());
    byte[] truncated = {0x08, (byte) 0x80};

    assertNull(decoder.call(truncated));
    assertEquals(
        "failed to decode Protobuf message: While parsing a protocol message, the input ended "
            + "unexpectedly in the middle of a field.",
        new ProtobufParseError(TIMESTAMP_SET, "google.protobuf.Timestamp").call(truncated).split("  ")[0]);
    assertNull(new ProtobufParseError(TIMESTAMP_SET, "google.protobuf.Timestamp").call(new byte[0]));
    assertEquals(
        "record has no value (tombstone)",
        new ProtobufParseError(TIMESTAMP_SET, "google.protobuf.Timestamp").call(null));
  }

  @Test
  void aFieldTheMessageLacksIsRefusedWhenTheDecoderIsMade() {
    IllegalArgumentException refused = assertThrows(IllegalArgumentException.class, () -> new ProtobufRowDecoder(
        TIMESTAMP_SET, "google.protobuf.Timestamp", new StructType().add("millis", DataTypes.LongType)));

    assertEquals("google.protobuf.Timestamp has no field millis", refused.getMessage());
  }

  @Test
  void anUnknownMessageIsNamed() {
    IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
        () -> new ProtobufRowDecoder(TIMESTAMP_SET, "google.protobuf.Nothing", secondsAndNanos()));

    assertEquals("no message google.protobuf.Nothing in the descriptor set", refused.getMessage());
  }

  @Test
  void aOneofHoldsTheMemberThatCameLastOnTheWire() {
    byte[] set = TestProtos.descriptorSet(TestProtos.ENCODER_TEST);
    String unordered = "dagger.encoder_test.Unordered";
    ProtobufRowDecoder both = new ProtobufRowDecoder(
        set, unordered, new StructType().add("word", DataTypes.StringType).add("number", DataTypes.LongType));
    ProtobufRowDecoder numberOnly =
        new ProtobufRowDecoder(set, unordered, new StructType().add("number", DataTypes.LongType));
    byte[] numberThenWord = {0x20, 0x05, 0x1a, 0x01, 'w'};
    byte[] wordThenZero = {0x1a, 0x01, 'w', 0x20, 0x00};

    assertEquals(RowFactory.create("w", null), both.call(numberThenWord));
    assertEquals(RowFactory.create(null, 0L), both.call(wordThenZero));
    assertEquals(RowFactory.create((Object) null), numberOnly.call(numberThenWord)); // cleared by `word`, unread
    assertEquals(RowFactory.create(0L), numberOnly.call(wordThenZero));
  }
}

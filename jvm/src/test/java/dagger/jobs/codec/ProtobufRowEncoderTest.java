package dagger.jobs.codec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.ListValue;
import com.google.protobuf.NullValue;
import com.google.protobuf.Struct;
import com.google.protobuf.Timestamp;
import com.google.protobuf.Value;
import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The encoder without Spark running: rows as a Java UDF receives them (arrays as Scala sequences, maps as
 * Scala maps), bytes checked exactly, against protobuf-java's serialization where it writes as the Python
 * encoder does, and spelled out where it would not (wrappers at their default, map entries).
 */
class ProtobufRowEncoderTest {
  private static final byte[] SET = TestProtos.descriptorSet(TestProtos.ENCODER_TEST);
  private static final String PACKAGE = "dagger.encoder_test.";
  private static final DataType POINT = new StructType()
      .add("x", DataTypes.DoubleType).add("y", DataTypes.DoubleType).add("label", DataTypes.StringType);

  // ---------------------------------------------------------------------------------------------------
  // Scalars and enums
  // ---------------------------------------------------------------------------------------------------

  @Test
  void scalarsAreWrittenInFieldNumberOrderAsProtobufWritesThem() {
    StructType input = new StructType()
        .add("colour", DataTypes.StringType) // declared after the others: written in field-number order
        .add("text", DataTypes.StringType)
        .add("int32_value", DataTypes.IntegerType)
        .add("int64_value", DataTypes.LongType)
        .add("uint32_value", DataTypes.LongType)
        .add("uint64_value", DataTypes.LongType)
        .add("sint32_value", DataTypes.IntegerType)
        .add("sint64_value", DataTypes.LongType)
        .add("fixed32_value", DataTypes.LongType)
        .add("fixed64_value", DataTypes.LongType)
        .add("sfixed32_value", DataTypes.IntegerType)
        .add("sfixed64_value", DataTypes.LongType)
        .add("float_value", DataTypes.FloatType)
        .add("double_value", DataTypes.DoubleType)
        .add("bool_value", DataTypes.BooleanType)
        .add("bytes_value", DataTypes.BinaryType)
        .add("maybe", DataTypes.IntegerType);
    Row row = RowFactory.create("GREEN", "héllo ☃", -7, 1L << 40, 4_000_000_000L, -1L, -5, -6L, 4_000_000_000L,
        -2L, -8, -9L, 1.5f, -2.25, true, new byte[] {0, 1, 2}, 3);

    byte[] encoded = encoder("Scalars", input).call(row);

    Descriptor scalars = descriptor("Scalars");
    DynamicMessage expected = DynamicMessage.newBuilder(scalars)
        .setField(scalars.findFieldByName("text"), "héllo ☃")
        .setField(scalars.findFieldByName("int32_value"), -7)
        .setField(scalars.findFieldByName("int64_value"), 1L << 40)
        .setField(scalars.findFieldByName("uint32_value"), (int) 4_000_000_000L)
        .setField(scalars.findFieldByName("uint64_value"), -1L) // 2^64 - 1, as decoding gave it
        .setField(scalars.findFieldByName("sint32_value"), -5)
        .setField(scalars.findFieldByName("sint64_value"), -6L)
        .setField(scalars.findFieldByName("fixed32_value"), (int) 4_000_000_000L)
        .setField(scalars.findFieldByName("fixed64_value"), -2L)
        .setField(scalars.findFieldByName("sfixed32_value"), -8)
        .setField(scalars.findFieldByName("sfixed64_value"), -9L)
        .setField(scalars.findFieldByName("float_value"), 1.5f)
        .setField(scalars.findFieldByName("double_value"), -2.25)
        .setField(scalars.findFieldByName("bool_value"), true)
        .setField(scalars.findFieldByName("bytes_value"), ByteString.copyFrom(new byte[] {0, 1, 2}))
        .setField(scalars.findFieldByName("colour"), scalars.findFieldByName("colour").getEnumType()
            .findValueByName("GREEN"))
        .setField(scalars.findFieldByName("maybe"), 3)
        .build();
    assertArrayEquals(expected.toByteArray(), encoded);
  }

  @Test
  void defaultsAreLeftOutButWhereTheFieldHasPresence() {
    StructType input = new StructType()
        .add("text", DataTypes.StringType)
        .add("int64_value", DataTypes.LongType)
        .add("float_value", DataTypes.FloatType)
        .add("double_value", DataTypes.DoubleType)
        .add("bool_value", DataTypes.BooleanType)
        .add("bytes_value", DataTypes.BinaryType)
        .add("colour", DataTypes.IntegerType)
        .add("maybe", DataTypes.IntegerType);

    ProtobufRowEncoder encoder = encoder("Scalars", input);

    // -0.0 is a default too, as the Python encoder sees it; `optional int32 maybe` has presence
    assertArrayEquals(hex("88 01 00"),
        encoder.call(RowFactory.create("", 0L, -0.0f, -0.0, false, new byte[0], 0, 0)));
    assertArrayEquals(new byte[0],
        encoder.call(RowFactory.create(null, null, null, null, null, null, null, null)));
    assertNull(encoder.call(null));
  }

  @Test
  void numbersConvertBetweenSqlAndProtobufTypes() {
    StructType input = new StructType()
        .add("int32_value", DataTypes.createDecimalType(10, 2))
        .add("int64_value", DataTypes.ShortType)
        .add("float_value", DataTypes.DoubleType)
        .add("double_value", DataTypes.IntegerType);

    byte[] encoded = encoder("Scalars", input).call(RowFactory.create(new BigDecimal("12.00"), (short) -3, 0.1,
        7));

    Descriptor scalars = descriptor("Scalars");
    DynamicMessage expected = DynamicMessage.newBuilder(scalars)
        .setField(scalars.findFieldByName("int32_value"), 12)
        .setField(scalars.findFieldByName("int64_value"), -3L)
        .setField(scalars.findFieldByName("float_value"), 0.1f)
        .setField(scalars.findFieldByName("double_value"), 7.0)
        .build();
    assertArrayEquals(expected.toByteArray(), encoded);
  }

  @Test
  void valuesOutOfTheFieldsRangeAreErrorsOfTheRow() {
    ProtobufRowEncoder int32 = encoder("Scalars", new StructType().add("int32_value", DataTypes.LongType));
    ProtobufRowEncoder uint32 = encoder("Scalars", new StructType().add("uint32_value", DataTypes.IntegerType));
    ProtobufRowEncoder decimal = encoder(
        "Scalars", new StructType().add("int64_value", DataTypes.createDecimalType(10, 2)));

    assertEquals("column 'int32_value': type mismatch, bigint cannot fill field "
        + "dagger.encoder_test.Scalars.int32_value of type int32: Integer value 1099511627776 not in range: "
        + "-2147483648 to 2147483647", rowError(int32, RowFactory.create(1L << 40)));
    assertEquals("column 'uint32_value': type mismatch, int cannot fill field "
        + "dagger.encoder_test.Scalars.uint32_value of type uint32: Integer value -1 not in range: 0 to "
        + "2147483647", rowError(uint32, RowFactory.create(-1)));
    assertEquals("column 'int64_value': type mismatch, decimal(10,2) cannot fill field "
        + "dagger.encoder_test.Scalars.int64_value of type int64: Rescaling Decimal value would cause data loss",
        rowError(decimal, RowFactory.create(new BigDecimal("1.50"))));
  }

  @Test
  void enumsAreWrittenFromTheirNamesOrNumbers() {
    ProtobufRowEncoder byName = encoder("Scalars", new StructType().add("colour", DataTypes.StringType));
    ProtobufRowEncoder byNumber = encoder("Scalars", new StructType().add("colour", DataTypes.LongType));

    assertArrayEquals(hex("80 01 01"), byName.call(RowFactory.create("RED")));
    assertArrayEquals(hex("80 01 02"), byNumber.call(RowFactory.create(2L)));
    assertEquals("column 'colour': 'BLUE' is not a value of enum dagger.encoder_test.Colour (field colour; "
        + "values: COLOUR_UNKNOWN, RED, GREEN)", rowError(byName, RowFactory.create("BLUE")));
    assertEquals("column 'colour': 5 is not a number of enum dagger.encoder_test.Colour (field colour; "
        + "numbers: [0, 1, 2])", rowError(byNumber, RowFactory.create(5L)));
    assertEquals("column 'colour': 4294967297 is not a number of enum dagger.encoder_test.Colour (field "
        + "colour; numbers: [0, 1, 2])", rowError(byNumber, RowFactory.create((1L << 32) + 1)));
  }

  @Test
  void aColumnWhoseTypeCannotFillItsFieldIsRefusedWhenTheEncoderIsMade() {
    StructType input = new StructType().add("text", DataTypes.LongType);

    IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
        () -> encoder("Scalars", input));

    String expected = "column 'text': type mismatch, bigint cannot fill field dagger.encoder_test.Scalars.text "
        + "of type string";
    assertEquals(expected, refused.getMessage());
    assertEquals(expected, ProtobufRowEncoder.typeError(SET, PACKAGE + "Scalars", input));
    assertNull(ProtobufRowEncoder.typeError(SET, PACKAGE + "Scalars", new StructType().add("text",
        DataTypes.StringType)));
  }

  // ---------------------------------------------------------------------------------------------------
  // Nested, repeated and map fields
  // ---------------------------------------------------------------------------------------------------

  @Test
  void dottedColumnsFillANestedMessageAndExtraColumnsAreIgnored() {
    StructType input = new StructType()
        .add("point.x", DataTypes.DoubleType)
        .add("unused", DataTypes.LongType)
        .add("point.label", DataTypes.StringType)
        .add("other.z", DataTypes.StringType);
    ProtobufRowEncoder encoder = encoder("Shapes", input);

    byte[] encoded = encoder.call(RowFactory.create(1.5, 9L, "here", "ignored"));

    assertArrayEquals(shapes("point", point(1.5, 0, "here")).toByteArray(), encoded);
    assertArrayEquals(hex("0a 00"), encoder.call(RowFactory.create(null, null, null, null))); // still present
  }

  @Test
  void aStructColumnFillsANestedMessage() {
    ProtobufRowEncoder encoder = encoder("Shapes", new StructType().add("point", POINT));

    assertArrayEquals(shapes("point", point(0, -1, "")).toByteArray(),
        encoder.call(RowFactory.create(RowFactory.create(0.0, -1.0, null))));
    assertArrayEquals(new byte[0], encoder.call(RowFactory.create((Object) null)));
  }

  @Test
  void aNestedColumnNamingNoFieldIsRefused() {
    StructType input = new StructType().add("point.x", DataTypes.DoubleType).add("point.z", DataTypes.DoubleType);

    assertEquals("column 'point.z': dagger.encoder_test.Point has no field 'z' (fields: x, y, label)",
        ProtobufRowEncoder.typeError(SET, PACKAGE + "Shapes", input));
  }

  @Test
  void repeatedFieldsWriteANullElementAsTheDefaultOrNotAtAll() {
    StructType input = new StructType()
        .add("numbers", DataTypes.createArrayType(DataTypes.LongType))
        .add("words", DataTypes.createArrayType(DataTypes.StringType))
        .add("colours", DataTypes.createArrayType(DataTypes.StringType))
        .add("points", DataTypes.createArrayType(POINT));
    ProtobufRowEncoder encoder = encoder("Shapes", input);

    byte[] encoded = encoder.call(RowFactory.create(
        seq(1L, null, 300L), seq("a", null, "b"), seq("RED", null, "COLOUR_UNKNOWN"),
        seq(RowFactory.create(2.0, null, "p"), null)));

    assertArrayEquals(hex("12 04 01 00 ac 02" // packed, NULL as 0
        + " 1a 01 61 1a 01 62" // NULL left out
        + " 22 02 01 00" // packed, NULL left out
        + " 2a 0c 09 00 00 00 00 00 00 00 40 1a 01 70 2a 00"), encoded); // NULL as an empty message
    assertArrayEquals(new byte[0], encoder.call(RowFactory.create(seq(), seq(), seq((Object) null), seq())));
  }

  @Test
  void mapEntriesHoldOnlyWhatIsNotADefault() {
    StructType input = new StructType()
        .add("counts", DataTypes.createMapType(DataTypes.StringType, DataTypes.LongType))
        .add("colour_by_name", DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType));
    Map<Object, Object> counts = new LinkedHashMap<>();
    counts.put("a", 0L);
    counts.put("", 5L);
    counts.put("n", null);

    byte[] encoded = encoder("Shapes", input).call(RowFactory.create(
        CollectionConverters.asScala(counts), CollectionConverters.asScala(Map.of("k", "COLOUR_UNKNOWN"))));

    assertArrayEquals(hex("32 03 0a 01 61" // the value 0 left out
        + " 32 04 0a 00 10 05" // an empty string key is written
        + " 32 03 0a 01 6e" // a NULL value: the key only
        + " 42 03 0a 01 6b"), encoded);
  }

  @Test
  void mapsInDaggersLayoutAreListsOfKeyValueStructs() {
    StructType entry = new StructType().add("key", DataTypes.IntegerType).add("value", POINT);
    ProtobufRowEncoder encoder = encoder(
        "Shapes", new StructType().add("points_by_id", DataTypes.createArrayType(entry)));

    byte[] encoded = encoder.call(RowFactory.create(seq(
        RowFactory.create(0, RowFactory.create(1.0, null, null)), RowFactory.create(7, null))));

    assertArrayEquals(hex("3a 0b 12 09 09 00 00 00 00 00 00 f0 3f" // key 0 left out
        + " 3a 02 08 07"), encoded);
    assertEquals("column 'points_by_id': Map cannot contain NULL valued keys",
        rowError(encoder, RowFactory.create(seq(RowFactory.create(null, null)))));
  }

  // ---------------------------------------------------------------------------------------------------
  // Well-known types
  // ---------------------------------------------------------------------------------------------------

  @Test
  void wrappersAreWrittenEvenHoldingTheDefault() {
    StructType input = new StructType()
        .add("count", DataTypes.LongType)
        .add("name", DataTypes.StringType)
        .add("ratio", DataTypes.FloatType)
        .add("flag", DataTypes.BooleanType);
    ProtobufRowEncoder encoder = encoder("WellKnown", input);

    assertArrayEquals(hex("12 02 08 00 1a 02 0a 00 22 05 0d 00 00 00 80 2a 02 08 00"),
        encoder.call(RowFactory.create(0L, "", -0.0f, false)));
    assertArrayEquals(hex("12 02 08 07 1a 03 0a 01 78 2a 02 08 01"),
        encoder.call(RowFactory.create(7L, "x", null, true)));
  }

  @Test
  void wrappersInDaggersLayoutAreStructsOfTheValue() {
    ProtobufRowEncoder encoder = encoder(
        "WellKnown", new StructType().add("count", new StructType().add("value", DataTypes.LongType)));

    assertArrayEquals(hex("12 02 08 00"), encoder.call(RowFactory.create(RowFactory.create(0L))));
    assertArrayEquals(new byte[0], encoder.call(RowFactory.create(RowFactory.create((Object) null))));
  }

  @Test
  void timestampsAndDurationsAtMicrosecondPrecision() {
    StructType input = new StructType()
        .add("at", DataTypes.TimestampType)
        .add("took", DataTypes.createDayTimeIntervalType())
        .add("times", DataTypes.createArrayType(DataTypes.TimestampNTZType));
    ProtobufRowEncoder encoder = encoder("WellKnown", input);

    byte[] encoded = encoder.call(RowFactory.create(
        Instant.ofEpochSecond(-2, 500_000_999), // before 1970: seconds floored, nanos positive
        Duration.ofMillis(-1500), // both negative
        seq(LocalDateTime.of(2024, 1, 1, 0, 0, 1), null)));

    Descriptor wellKnown = descriptor("WellKnown");
    FieldDescriptor times = wellKnown.findFieldByName("times");
    DynamicMessage expected = DynamicMessage.newBuilder(wellKnown)
        .setField(wellKnown.findFieldByName("at"), timestamp(-2, 500_000_000))
        .setField(wellKnown.findFieldByName("took"),
            com.google.protobuf.Duration.newBuilder().setSeconds(-1).setNanos(-500_000_000).build())
        .addRepeatedField(times, timestamp(1_704_067_201L, 0))
        .addRepeatedField(times, Timestamp.getDefaultInstance())
        .build();
    assertArrayEquals(expected.toByteArray(), encoded);
    assertArrayEquals(hex("32 06 08 ff ff ff ff 0f"), // a java.sql.Timestamp, as Spark gives without Java 8 types
        encoder.call(RowFactory.create(new java.sql.Timestamp(4_294_967_295_000L), null, null)));
  }

  @Test
  void timestampsInDaggersLayoutAreStructsOfSecondsAndNanos() {
    StructType secondsNanos = new StructType().add("seconds", DataTypes.LongType).add("nanos", DataTypes.IntegerType);
    ProtobufRowEncoder encoder = encoder("WellKnown", new StructType().add("at", secondsNanos));

    assertArrayEquals(hex("32 05 08 01 10 e8 07"), encoder.call(RowFactory.create(RowFactory.create(1L, 1999))));
    assertArrayEquals(hex("32 00"), encoder.call(RowFactory.create(RowFactory.create(0L, 0))));
    assertArrayEquals(new byte[0], encoder.call(RowFactory.create(RowFactory.create(5L, null))));
  }

  @Test
  void jsonColumnsAreWrittenAfterTheOtherFields() throws InvalidProtocolBufferException {
    StructType input = new StructType()
        .add("attributes", DataTypes.StringType)
        .add("id", DataTypes.StringType)
        .add("any_value", DataTypes.StringType)
        .add("items", DataTypes.StringType);
    ProtobufRowEncoder encoder = encoder("WellKnown", input);

    byte[] encoded = encoder.call(RowFactory.create(
        "{\"k\": [1, {\"n\": null}], \"s\": {\"\": \"\"}, \"b\": false}", "z", "null", "[0.5, \"two\", []]"));

    Struct attributes = Struct.newBuilder()
        .putFields("k", list(number(1), Value.newBuilder().setStructValue(
            Struct.newBuilder().putFields("n", Value.newBuilder().setNullValue(NullValue.NULL_VALUE).build()))
            .build()))
        .putFields("s", Value.newBuilder().setStructValue(Struct.newBuilder().putFields("", string(""))).build())
        .putFields("b", Value.newBuilder().setBoolValue(false).build())
        .build();
    byte[] id = hex("5a 01 7a");
    byte[] anyValue = hex("4a 02 08 00");
    assertArrayEquals(id, Arrays.copyOf(encoded, 3)); // field 11 first, then the JSON fields
    int attributesLength = encoded[4];
    assertEquals(0x0a, encoded[3]);
    assertEquals(attributes, Struct.parseFrom(Arrays.copyOfRange(encoded, 5, 5 + attributesLength)));
    int next = 5 + attributesLength;
    assertArrayEquals(anyValue, Arrays.copyOfRange(encoded, next, next + 4));
    next += 4;
    assertEquals(0x52, encoded[next]);
    assertEquals(ListValue.newBuilder().addValues(number(0.5)).addValues(string("two"))
            .addValues(Value.newBuilder().setListValue(ListValue.getDefaultInstance())).build(),
        ListValue.parseFrom(Arrays.copyOfRange(encoded, next + 2, encoded.length)));
    // One entry, so one order: the bytes exactly, an empty key and a zero included
    Struct zero = Struct.newBuilder().putFields("", number(0)).build();
    byte[] struct = encoder.call(RowFactory.create("{\"\": 0}", null, null, null));
    assertEquals(0x0a, struct[0]);
    assertArrayEquals(zero.toByteArray(), Arrays.copyOfRange(struct, 2, struct.length));
  }

  @Test
  void textThatIsNotJsonForTheMessageIsAnErrorOfTheRow() {
    ProtobufRowEncoder encoder = encoder(
        "WellKnown", new StructType().add("attributes", DataTypes.StringType).add("items", DataTypes.StringType));

    assertEquals("column 'attributes': '{not json' is not JSON for a google.protobuf.Struct: Failed to load "
        + "JSON: Expecting property name enclosed in double quotes (char 1)",
        rowError(encoder, RowFactory.create("{not json", null)));
    assertEquals("column 'items': '{}' is not JSON for a google.protobuf.ListValue: ListValue must be in a JSON "
        + "array", rowError(encoder, RowFactory.create(null, "{}")));
    assertEquals("column 'attributes': '{\"a\": 1, \"a\": 2}' is not JSON for a google.protobuf.Struct: Failed "
        + "to load JSON: duplicate key a (char 14)", rowError(encoder, RowFactory.create("{\"a\": 1, \"a\": 2}", null)));
  }

  // ---------------------------------------------------------------------------------------------------
  // Field order and oneofs
  // ---------------------------------------------------------------------------------------------------

  @Test
  void fieldsDeclaredOutOfNumberOrderAreWrittenInNumberOrder() {
    StructType input = new StructType().add("second", DataTypes.StringType).add("first", DataTypes.StringType);

    assertArrayEquals(hex("0a 01 61 12 01 62"), encoder("Unordered", input).call(RowFactory.create("b", "a")));
  }

  @Test
  void ofTwoFilledFieldsOfAOneofTheLastDeclaredIsWritten() {
    StructType input = new StructType().add("number", DataTypes.LongType).add("word", DataTypes.StringType);
    ProtobufRowEncoder encoder = encoder("Unordered", input);

    assertArrayEquals(hex("20 00"), encoder.call(RowFactory.create(0L, "w"))); // a oneof's default is written
    assertArrayEquals(hex("1a 01 77"), encoder.call(RowFactory.create(null, "w")));
  }

  @Test
  void threadsSharingAnEncoderWriteEachTheirOwnRows() throws InterruptedException {
    StructType input = new StructType()
        .add("point", POINT)
        .add("words", DataTypes.createArrayType(DataTypes.StringType))
        .add("counts", DataTypes.createMapType(DataTypes.StringType, DataTypes.LongType));
    Row[] rows = new Row[64];
    byte[][] expected = new byte[rows.length][];
    ProtobufRowEncoder alone = encoder("Shapes", input);
    for (int i = 0; i < rows.length; i++) {
      rows[i] = RowFactory.create(RowFactory.create((double) i, null, "p".repeat(i * 5)), seq("w".repeat(i * 7)),
          CollectionConverters.asScala(Map.of("k" + i, (long) i)));
      expected[i] = alone.call(rows[i]);
    }
    ProtobufRowEncoder shared = encoder("Shapes", input);
    List<Thread> threads = new ArrayList<>();
    List<Integer> wrong = Collections.synchronizedList(new ArrayList<>());

    for (int t = 0; t < 4; t++) {
      int offset = t;
      Thread thread = new Thread(() -> {
        for (int i = 0; i < 2000; i++) {
          int index = (i * 7 + offset) % rows.length;
          if (!Arrays.equals(expected[index], shared.call(rows[index]))) {
            wrong.add(index);
          }
        }
      });
      threads.add(thread);
      thread.start();
    }
    for (Thread thread : threads) {
      thread.join();
    }

    assertEquals(List.of(), wrong);
  }

  // ---------------------------------------------------------------------------------------------------
  // Helpers
  // ---------------------------------------------------------------------------------------------------

  private static ProtobufRowEncoder encoder(String message, StructType input) {
    return new ProtobufRowEncoder(SET, PACKAGE + message, input);
  }

  private static Descriptor descriptor(String message) {
    return TestProtos.message(TestProtos.ENCODER_TEST, message);
  }

  private static String rowError(ProtobufRowEncoder encoder, Row row) {
    return assertThrows(IllegalArgumentException.class, () -> encoder.call(row)).getMessage();
  }

  private static byte[] hex(String bytes) {
    return HexFormat.of().parseHex(bytes.replace(" ", ""));
  }

  private static scala.collection.Seq<Object> seq(Object... values) {
    return CollectionConverters.asScala(Arrays.asList(values)).toSeq();
  }

  private static DynamicMessage point(double x, double y, String label) {
    Descriptor point = descriptor("Point");
    return DynamicMessage.newBuilder(point)
        .setField(point.findFieldByName("x"), x)
        .setField(point.findFieldByName("y"), y)
        .setField(point.findFieldByName("label"), label)
        .build();
  }

  private static DynamicMessage shapes(String field, Object value) {
    Descriptor shapes = descriptor("Shapes");
    return DynamicMessage.newBuilder(shapes).setField(shapes.findFieldByName(field), value).build();
  }

  private static Timestamp timestamp(long seconds, int nanos) {
    return Timestamp.newBuilder().setSeconds(seconds).setNanos(nanos).build();
  }

  private static Value number(double number) {
    return Value.newBuilder().setNumberValue(number).build();
  }

  private static Value string(String text) {
    return Value.newBuilder().setStringValue(text).build();
  }

  private static Value list(Value... values) {
    return Value.newBuilder().setListValue(ListValue.newBuilder().addAllValues(List.of(values))).build();
  }
}

package dagger.jobs.codec;

import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_BOOL;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_BYTES;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_DOUBLE;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_ENUM;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_FIXED32;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_FIXED64;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_FLOAT;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_INT32;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_INT64;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_MESSAGE;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_SFIXED32;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_SFIXED64;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_SINT32;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_SINT64;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_STRING;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_UINT32;
import static com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type.TYPE_UINT64;

import com.google.protobuf.DescriptorProtos.DescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumDescriptorProto;
import com.google.protobuf.DescriptorProtos.EnumValueDescriptorProto;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Label;
import com.google.protobuf.DescriptorProtos.FieldDescriptorProto.Type;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.DescriptorProtos.MessageOptions;
import com.google.protobuf.DescriptorProtos.OneofDescriptorProto;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DurationProto;
import com.google.protobuf.StructProto;
import com.google.protobuf.TimestampProto;
import com.google.protobuf.WrappersProto;

/**
 * The messages of the JVM codec tests, built in Java as protoc builds them from the .proto text quoted
 * above each (the module's tests run before any protoc): {@code encoder_test.proto} for the encoder's cases
 * and the project's {@code dagger/examples/booking.proto} for its benchmark. Their imports are
 * protobuf-java's own well-known types, so a test can set those as generated messages.
 */
final class TestProtos {
  private TestProtos() {}

  private static final FileDescriptor[] WELL_KNOWN = {
    DurationProto.getDescriptor(), StructProto.getDescriptor(), TimestampProto.getDescriptor(),
    WrappersProto.getDescriptor(),
  };

  /*
   * syntax = "proto3";
   * package dagger.encoder_test;
   * enum Colour { COLOUR_UNKNOWN = 0; RED = 1; GREEN = 2; }
   * message Point { double x = 1; double y = 2; string label = 3; }
   * message Scalars {
   *   string text = 1; int32 int32_value = 2; int64 int64_value = 3; uint32 uint32_value = 4;
   *   uint64 uint64_value = 5; sint32 sint32_value = 6; sint64 sint64_value = 7; fixed32 fixed32_value = 8;
   *   fixed64 fixed64_value = 9; sfixed32 sfixed32_value = 10; sfixed64 sfixed64_value = 11;
   *   float float_value = 12; double double_value = 13; bool bool_value = 14; bytes bytes_value = 15;
   *   Colour colour = 16; optional int32 maybe = 17;
   * }
   * message Shapes {
   *   Point point = 1; repeated int64 numbers = 2; repeated string words = 3; repeated Colour colours = 4;
   *   repeated Point points = 5; map<string, int64> counts = 6; map<int32, Point> points_by_id = 7;
   *   map<string, Colour> colour_by_name = 8;
   * }
   * message WellKnown {
   *   google.protobuf.Struct attributes = 1; google.protobuf.Int64Value count = 2;
   *   google.protobuf.StringValue name = 3; google.protobuf.FloatValue ratio = 4;
   *   google.protobuf.BoolValue flag = 5; google.protobuf.Timestamp at = 6; google.protobuf.Duration took = 7;
   *   repeated google.protobuf.Timestamp times = 8; google.protobuf.Value any_value = 9;
   *   google.protobuf.ListValue items = 10; string id = 11;
   * }
   * message Unordered { string second = 2; string first = 1; oneof choice { string word = 3; int64 number = 4; } }
   */
  static final FileDescriptorProto ENCODER_TEST = proto3("encoder_test.proto", "dagger.encoder_test")
      .addEnumType(enumType("Colour", "COLOUR_UNKNOWN", "RED", "GREEN"))
      .addMessageType(message("Point")
          .addField(field("x", 1, TYPE_DOUBLE))
          .addField(field("y", 2, TYPE_DOUBLE))
          .addField(field("label", 3, TYPE_STRING)))
      .addMessageType(message("Scalars")
          .addField(field("text", 1, TYPE_STRING))
          .addField(field("int32_value", 2, TYPE_INT32))
          .addField(field("int64_value", 3, TYPE_INT64))
          .addField(field("uint32_value", 4, TYPE_UINT32))
          .addField(field("uint64_value", 5, TYPE_UINT64))
          .addField(field("sint32_value", 6, TYPE_SINT32))
          .addField(field("sint64_value", 7, TYPE_SINT64))
          .addField(field("fixed32_value", 8, TYPE_FIXED32))
          .addField(field("fixed64_value", 9, TYPE_FIXED64))
          .addField(field("sfixed32_value", 10, TYPE_SFIXED32))
          .addField(field("sfixed64_value", 11, TYPE_SFIXED64))
          .addField(field("float_value", 12, TYPE_FLOAT))
          .addField(field("double_value", 13, TYPE_DOUBLE))
          .addField(field("bool_value", 14, TYPE_BOOL))
          .addField(field("bytes_value", 15, TYPE_BYTES))
          .addField(field("colour", 16, TYPE_ENUM, ".dagger.encoder_test.Colour"))
          .addField(field("maybe", 17, TYPE_INT32).setOneofIndex(0).setProto3Optional(true))
          .addOneofDecl(OneofDescriptorProto.newBuilder().setName("_maybe")))
      .addMessageType(message("Shapes")
          .addField(field("point", 1, TYPE_MESSAGE, ".dagger.encoder_test.Point"))
          .addField(repeated(field("numbers", 2, TYPE_INT64)))
          .addField(repeated(field("words", 3, TYPE_STRING)))
          .addField(repeated(field("colours", 4, TYPE_ENUM, ".dagger.encoder_test.Colour")))
          .addField(repeated(field("points", 5, TYPE_MESSAGE, ".dagger.encoder_test.Point")))
          .addField(mapField(".dagger.encoder_test.Shapes", "counts", 6))
          .addNestedType(mapEntry("counts", field("value", 2, TYPE_INT64)))
          .addField(mapField(".dagger.encoder_test.Shapes", "points_by_id", 7))
          .addNestedType(mapEntry("points_by_id", field("value", 2, TYPE_MESSAGE, ".dagger.encoder_test.Point"))
              .setField(0, field("key", 1, TYPE_INT32)))
          .addField(mapField(".dagger.encoder_test.Shapes", "colour_by_name", 8))
          .addNestedType(mapEntry("colour_by_name", field("value", 2, TYPE_ENUM, ".dagger.encoder_test.Colour"))))
      .addMessageType(message("WellKnown")
          .addField(field("attributes", 1, TYPE_MESSAGE, ".google.protobuf.Struct"))
          .addField(field("count", 2, TYPE_MESSAGE, ".google.protobuf.Int64Value"))
          .addField(field("name", 3, TYPE_MESSAGE, ".google.protobuf.StringValue"))
          .addField(field("ratio", 4, TYPE_MESSAGE, ".google.protobuf.FloatValue"))
          .addField(field("flag", 5, TYPE_MESSAGE, ".google.protobuf.BoolValue"))
          .addField(field("at", 6, TYPE_MESSAGE, ".google.protobuf.Timestamp"))
          .addField(field("took", 7, TYPE_MESSAGE, ".google.protobuf.Duration"))
          .addField(repeated(field("times", 8, TYPE_MESSAGE, ".google.protobuf.Timestamp")))
          .addField(field("any_value", 9, TYPE_MESSAGE, ".google.protobuf.Value"))
          .addField(field("items", 10, TYPE_MESSAGE, ".google.protobuf.ListValue"))
          .addField(field("id", 11, TYPE_STRING)))
      .addMessageType(message("Unordered")
          .addField(field("second", 2, TYPE_STRING))
          .addField(field("first", 1, TYPE_STRING))
          .addField(field("word", 3, TYPE_STRING).setOneofIndex(0))
          .addField(field("number", 4, TYPE_INT64).setOneofIndex(0))
          .addOneofDecl(OneofDescriptorProto.newBuilder().setName("choice")))
      .addDependency("google/protobuf/duration.proto")
      .addDependency("google/protobuf/struct.proto")
      .addDependency("google/protobuf/timestamp.proto")
      .addDependency("google/protobuf/wrappers.proto")
      .build();

  /*
   * protos/dagger/examples/booking.proto: enums ServiceType and BookingStatus; Location {string name = 1;
   * double latitude = 2; double longitude = 3;}; BookingLogMessage (below); BookingSummary {string
   * order_number = 1; string customer_id = 2; float amount_paid_by_cash = 3; google.protobuf.Timestamp
   * event_timestamp = 4; ServiceType service_type = 5;}.
   */
  static final FileDescriptorProto BOOKING = proto3("dagger/examples/booking.proto", "dagger.examples")
      .addEnumType(enumType("ServiceType", "SERVICE_TYPE_UNKNOWN", "GO_RIDE", "GO_SEND", "GO_FOOD"))
      .addEnumType(enumType(
          "BookingStatus", "BOOKING_STATUS_UNKNOWN", "CREATED", "DRIVER_FOUND", "PICKED_UP", "COMPLETED",
          "CANCELLED"))
      .addMessageType(message("Location")
          .addField(field("name", 1, TYPE_STRING))
          .addField(field("latitude", 2, TYPE_DOUBLE))
          .addField(field("longitude", 3, TYPE_DOUBLE)))
      .addMessageType(message("BookingLogMessage")
          .addField(field("service_type", 1, TYPE_ENUM, ".dagger.examples.ServiceType"))
          .addField(field("order_number", 2, TYPE_STRING))
          .addField(field("status", 3, TYPE_ENUM, ".dagger.examples.BookingStatus"))
          .addField(field("event_timestamp", 4, TYPE_MESSAGE, ".google.protobuf.Timestamp"))
          .addField(field("customer_id", 5, TYPE_STRING))
          .addField(field("driver_id", 6, TYPE_STRING))
          .addField(field("service_area_id", 7, TYPE_STRING))
          .addField(field("amount_paid_by_cash", 8, TYPE_FLOAT))
          .addField(field("customer_price", 9, TYPE_DOUBLE))
          .addField(field("total_distance_meters", 10, TYPE_INT64))
          .addField(field("is_surge", 11, TYPE_BOOL))
          .addField(field("pickup_location", 12, TYPE_MESSAGE, ".dagger.examples.Location"))
          .addField(field("dropoff_location", 13, TYPE_MESSAGE, ".dagger.examples.Location"))
          .addField(repeated(field("tags", 14, TYPE_STRING)))
          .addField(mapField(".dagger.examples.BookingLogMessage", "metadata", 15))
          .addNestedType(mapEntry("metadata", field("value", 2, TYPE_STRING)))
          .addField(field("voucher_discount", 16, TYPE_MESSAGE, ".google.protobuf.DoubleValue")))
      .addMessageType(message("BookingSummary")
          .addField(field("order_number", 1, TYPE_STRING))
          .addField(field("customer_id", 2, TYPE_STRING))
          .addField(field("amount_paid_by_cash", 3, TYPE_FLOAT))
          .addField(field("event_timestamp", 4, TYPE_MESSAGE, ".google.protobuf.Timestamp"))
          .addField(field("service_type", 5, TYPE_ENUM, ".dagger.examples.ServiceType")))
      .addDependency("google/protobuf/timestamp.proto")
      .addDependency("google/protobuf/wrappers.proto")
      .build();

  /** A serialized FileDescriptorSet of the file and the well-known types, as the Python side ships it. */
  static byte[] descriptorSet(FileDescriptorProto file) {
    FileDescriptorSet.Builder set = FileDescriptorSet.newBuilder();
    for (FileDescriptor wellKnown : WELL_KNOWN) {
      set.addFile(wellKnown.toProto());
    }
    return set.addFile(file).build().toByteArray();
  }

  /** The file's message {@code name}, built on protobuf-java's own well-known types. */
  static Descriptor message(FileDescriptorProto file, String name) {
    try {
      return FileDescriptor.buildFrom(file, WELL_KNOWN).findMessageTypeByName(name);
    } catch (DescriptorValidationException e) {
      throw new IllegalStateException(e);
    }
  }

  private static FileDescriptorProto.Builder proto3(String name, String packageName) {
    return FileDescriptorProto.newBuilder().setName(name).setPackage(packageName).setSyntax("proto3");
  }

  private static EnumDescriptorProto enumType(String name, String... values) {
    EnumDescriptorProto.Builder type = EnumDescriptorProto.newBuilder().setName(name);
    for (int number = 0; number < values.length; number++) {
      type.addValue(EnumValueDescriptorProto.newBuilder().setName(values[number]).setNumber(number));
    }
    return type.build();
  }

  private static DescriptorProto.Builder message(String name) {
    return DescriptorProto.newBuilder().setName(name);
  }

  private static FieldDescriptorProto.Builder field(String name, int number, Type type) {
    return FieldDescriptorProto.newBuilder().setName(name).setNumber(number).setLabel(Label.LABEL_OPTIONAL)
        .setType(type);
  }

  private static FieldDescriptorProto.Builder field(String name, int number, Type type, String typeName) {
    return field(name, number, type).setTypeName(typeName);
  }

  private static FieldDescriptorProto.Builder repeated(FieldDescriptorProto.Builder field) {
    return field.setLabel(Label.LABEL_REPEATED);
  }

  /** A map field as protoc writes it: a repeated field of the nested entry type {@link #mapEntry} adds. */
  private static FieldDescriptorProto.Builder mapField(String messageName, String name, int number) {
    return repeated(field(name, number, TYPE_MESSAGE, messageName + "." + entryName(name)));
  }

  /** The entry type of map field {@code name}: a string key (replace field 0 for another) and the value. */
  private static DescriptorProto.Builder mapEntry(String name, FieldDescriptorProto.Builder value) {
    return message(entryName(name))
        .addField(field("key", 1, TYPE_STRING))
        .addField(value)
        .setOptions(MessageOptions.newBuilder().setMapEntry(true));
  }

  private static String entryName(String field) {
    StringBuilder name = new StringBuilder();
    for (String part : field.split("_")) {
      name.append(Character.toUpperCase(part.charAt(0))).append(part.substring(1));
    }
    return name.append("Entry").toString();
  }
}

package dagger.jobs.codec;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.EnumDescriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DayTimeIntervalType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Serialized protobuf messages to Spark rows, in the JVM: the {@code jobs.codec.protobuf} decoder's
 * results without a Python worker. A payload that is not a valid message decodes to null, which the
 * stream's invalid-record policy then judges.
 *
 * <p>The conversion is driven by the target row type the Python side computed for the query (only the
 * fields the SQL reads, in the native layout or in Dagger's): each target field names a message field,
 * and the target's type says how its value is shaped. So the same message field becomes a TIMESTAMP in
 * one layout and a {@code STRUCT<seconds, nanos>} in the other, and unread fields cost no conversion.
 *
 * <p>The fields are read straight from the wire ({@link WireFields}): those the target does not name are
 * skipped unparsed, and nested messages are read only for the fields asked of them. Descriptors are not
 * serializable: the decoder ships the descriptor set's bytes to the executors and plans its readers
 * there once, on first use.
 */
public final class ProtobufRowDecoder implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;

  private final byte[] descriptorSet;
  private final String messageName;
  private final StructType rowType;
  private transient MessageReader reader;

  public ProtobufRowDecoder(byte[] descriptorSet, String messageName, StructType rowType) {
    this.descriptorSet = descriptorSet;
    this.messageName = messageName;
    this.rowType = rowType;
    prepare(); // a message or field the type does not match fails here, on the driver
  }

  @Override
  public Row call(byte[] payload) {
    if (payload == null) {
      return null;
    }
    if (reader == null) {
      prepare();
    }
    try {
      return reader.read(CodedInputStream.newInstance(payload));
    } catch (IOException | UncheckedIOException e) { // malformed, at the top or in a nested message read
      return null;
    }
  }

  private void prepare() {
    reader = messageReader(findMessage(descriptorSet, messageName), rowType);
  }

  /** The message named {@code fullName} in a serialized {@code FileDescriptorSet} (with its imports). */
  public static Descriptor findMessage(byte[] descriptorSet, String fullName) {
    Map<String, FileDescriptorProto> protos = new LinkedHashMap<>();
    try {
      for (FileDescriptorProto file : FileDescriptorSet.parseFrom(descriptorSet).getFileList()) {
        protos.putIfAbsent(file.getName(), file); // a file defined twice: the first set wins, as in Python
      }
      Map<String, FileDescriptor> built = new HashMap<>();
      for (String name : protos.keySet()) {
        for (Descriptor message : build(name, protos, built).getMessageTypes()) {
          Descriptor found = find(message, fullName);
          if (found != null) {
            return found;
          }
        }
      }
    } catch (InvalidProtocolBufferException | DescriptorValidationException e) {
      throw new IllegalArgumentException("not a valid descriptor set: " + e.getMessage(), e);
    }
    throw new IllegalArgumentException("no message " + fullName + " in the descriptor set");
  }

  private static Descriptor find(Descriptor message, String fullName) {
    if (message.getFullName().equals(fullName)) {
      return message;
    }
    for (Descriptor nested : message.getNestedTypes()) {
      Descriptor found = find(nested, fullName);
      if (found != null) {
        return found;
      }
    }
    return null;
  }

  private static FileDescriptor build(
      String name, Map<String, FileDescriptorProto> protos, Map<String, FileDescriptor> built)
      throws DescriptorValidationException {
    FileDescriptor done = built.get(name);
    if (done != null) {
      return done;
    }
    FileDescriptorProto proto = protos.get(name);
    if (proto == null) {
      throw new IllegalArgumentException("the descriptor set lacks " + name + " (built without imports?)");
    }
    List<FileDescriptor> dependencies = new ArrayList<>();
    for (String dependency : proto.getDependencyList()) {
      dependencies.add(build(dependency, protos, built));
    }
    FileDescriptor file = FileDescriptor.buildFrom(proto, dependencies.toArray(new FileDescriptor[0]));
    built.put(name, file);
    return file;
  }

  // ---------------------------------------------------------------------------------------------------
  // Readers and converters, planned once per target type
  // ---------------------------------------------------------------------------------------------------

  /** One message type read into a row of the target type: the wire plan of its fields, and the row. */
  record MessageReader(WireFields.Plan plan, Function<WireFields, Row> toRow) {
    Row read(CodedInputStream in) throws IOException {
      return toRow.apply(plan.read(in));
    }

    Row read(ByteString message) {
      return toRow.apply(plan.read(message));
    }
  }

  static MessageReader messageReader(Descriptor message, StructType target) {
    StructField[] targetFields = target.fields();
    List<FieldDescriptor> fields = new ArrayList<>();
    for (StructField targetField : targetFields) {
      FieldDescriptor field = message.findFieldByName(targetField.name());
      if (field == null) {
        throw new IllegalArgumentException(message.getFullName() + " has no field " + targetField.name());
      }
      fields.add(field);
    }
    WireFields.Plan plan = new WireFields.Plan(fields);
    List<Function<WireFields, Object>> readers = new ArrayList<>();
    for (int i = 0; i < targetFields.length; i++) {
      readers.add(fieldReader(fields.get(i), plan.slot(fields.get(i)), targetFields[i].dataType()));
    }
    return new MessageReader(plan, read -> {
      Object[] values = new Object[readers.size()];
      for (int i = 0; i < values.length; i++) {
        values[i] = readers.get(i).apply(read);
      }
      return RowFactory.create(values);
    });
  }

  private static Function<WireFields, Object> fieldReader(FieldDescriptor field, int slot, DataType target) {
    if (field.isMapField()) {
      Function<Object, Object> entries = mapConverter(field, target);
      return read -> entries.apply(read.get(slot));
    }
    if (field.isRepeated()) {
      if (!(target instanceof ArrayType array)) {
        throw mismatch(field, target);
      }
      Function<Object, Object> element = valueConverter(field, array.elementType());
      return read -> {
        List<?> values = (List<?>) read.get(slot);
        List<Object> converted = new ArrayList<>(values.size());
        for (Object value : values) {
          converted.add(element.apply(value));
        }
        return converted;
      };
    }
    Function<Object, Object> convert = valueConverter(field, target);
    boolean nullWhenUnset = field.getJavaType() == FieldDescriptor.JavaType.MESSAGE || field.hasPresence();
    return read -> nullWhenUnset && !read.has(slot) ? null : convert.apply(read.get(slot));
  }

  private static Function<Object, Object> mapConverter(FieldDescriptor field, DataType target) {
    Descriptor entry = field.getMessageType();
    FieldDescriptor keyField = entry.findFieldByName("key");
    FieldDescriptor valueField = entry.findFieldByName("value");
    if (target instanceof MapType map) {
      WireFields.Plan plan = new WireFields.Plan(List.of(keyField, valueField));
      Function<Object, Object> key = valueConverter(keyField, map.keyType());
      Function<Object, Object> value = valueConverter(valueField, map.valueType());
      return entries -> {
        Map<Object, Object> converted = new LinkedHashMap<>();
        for (Object item : (List<?>) entries) {
          WireFields pair = plan.read((ByteString) item);
          converted.put(key.apply(pair.get(0)), value.apply(pair.get(1)));
        }
        return converted;
      };
    }
    // Dagger's layout: ARRAY<STRUCT<key, value>>, in the order the record holds the entries
    if (target instanceof ArrayType array && array.elementType() instanceof StructType struct) {
      MessageReader pair = messageReader(entry, struct);
      return entries -> {
        List<Object> converted = new ArrayList<>();
        for (Object item : (List<?>) entries) {
          converted.add(pair.read((ByteString) item));
        }
        return converted;
      };
    }
    throw mismatch(field, target);
  }

  private static Function<Object, Object> valueConverter(FieldDescriptor field, DataType target) {
    switch (field.getJavaType()) {
      case INT:
        if (target.equals(DataTypes.LongType)) { // uint32, fixed32: unsigned, widened exactly
          return value -> Integer.toUnsignedLong((Integer) value);
        }
        return Function.identity();
      case LONG: // uint64, fixed64 keep their two's complement bits, as Java and Dagger do
      case FLOAT:
      case DOUBLE:
      case BOOLEAN:
      case STRING:
        return Function.identity();
      case BYTE_STRING:
        return value -> ((ByteString) value).toByteArray();
      case ENUM:
        EnumDescriptor type = field.getEnumType();
        return value -> enumName(type, (Integer) value);
      case MESSAGE:
        return messageValueConverter(field, target);
      default:
        throw mismatch(field, target);
    }
  }

  private static String enumName(EnumDescriptor type, int number) {
    // A number the enum does not define (a newer writer) reads as its digits.
    EnumValueDescriptor known = type.findValueByNumber(number);
    return known == null ? Integer.toString(number) : known.getName();
  }

  private static Function<Object, Object> messageValueConverter(FieldDescriptor field, DataType target) {
    Descriptor message = field.getMessageType();
    switch (message.getFullName()) {
      case "google.protobuf.Timestamp":
      case "google.protobuf.Duration":
        return secondsNanosConverter(message, target, field);
      case "google.protobuf.Struct":
      case "google.protobuf.Value":
      case "google.protobuf.ListValue":
        if (!target.equals(DataTypes.StringType)) {
          throw mismatch(field, target);
        }
        return value -> {
          try {
            return WellKnownJson.write(DynamicMessage.parseFrom(message, (ByteString) value));
          } catch (InvalidProtocolBufferException e) {
            throw new UncheckedIOException(e);
          }
        };
      default:
        break;
    }
    if (WellKnownTypes.WRAPPERS.contains(message.getFullName())) {
      FieldDescriptor wrapped = message.findFieldByName("value");
      if (target instanceof StructType struct) { // Dagger's layout: STRUCT<value>
        MessageReader row = messageReader(message, struct);
        return value -> row.read((ByteString) value);
      }
      WireFields.Plan plan = new WireFields.Plan(List.of(wrapped));
      Function<Object, Object> scalar = valueConverter(wrapped, target);
      return value -> scalar.apply(plan.read((ByteString) value).get(0));
    }
    if (!(target instanceof StructType struct)) {
      throw mismatch(field, target);
    }
    MessageReader row = messageReader(message, struct);
    return value -> row.read((ByteString) value);
  }

  private static Function<Object, Object> secondsNanosConverter(
      Descriptor message, DataType target, FieldDescriptor field) {
    FieldDescriptor secondsField = message.findFieldByName("seconds");
    FieldDescriptor nanosField = message.findFieldByName("nanos");
    WireFields.Plan plan = new WireFields.Plan(List.of(secondsField, nanosField));
    Function<Object, long[]> secondsNanos = value -> {
      WireFields read = plan.read((ByteString) value);
      return new long[] {(Long) read.get(0), (Integer) read.get(1)};
    };
    if (target.equals(DataTypes.TimestampType)) {
      return value -> {
        long[] parts = secondsNanos.apply(value);
        return Instant.ofEpochSecond(parts[0], parts[1]);
      };
    }
    if (target instanceof DayTimeIntervalType) {
      return value -> {
        long[] parts = secondsNanos.apply(value);
        return Duration.ofSeconds(parts[0], parts[1]);
      };
    }
    if (target instanceof StructType) { // Dagger's layout, at microsecond precision like the native one
      boolean floor = message.getFullName().equals(WellKnownTypes.TIMESTAMP);
      return value -> {
        long[] parts = secondsNanos.apply(value);
        long micros = Math.addExact(Math.multiplyExact(parts[0], 1_000_000L), parts[1] / 1000);
        long wholeSeconds = floor ? Math.floorDiv(micros, 1_000_000L) : micros / 1_000_000L;
        long remainder = micros - wholeSeconds * 1_000_000L;
        return RowFactory.create(wholeSeconds, (int) (remainder * 1000));
      };
    }
    throw mismatch(field, target);
  }

  private static IllegalArgumentException mismatch(FieldDescriptor field, DataType target) {
    return new IllegalArgumentException(
        field.getFullName() + " cannot be read as " + target.simpleString());
  }
}

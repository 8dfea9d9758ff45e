package dagger.jobs.codec;

import com.google.protobuf.ByteString;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
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
 * <p>Descriptors are not serializable: the decoder ships the descriptor set's bytes to the executors
 * and builds its converters there once, on first use.
 */
public final class ProtobufRowDecoder implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;

  private final byte[] descriptorSet;
  private final String messageName;
  private final StructType rowType;
  private transient Descriptor descriptor;
  private transient Function<DynamicMessage, Row> toRow;

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
    if (toRow == null) {
      prepare();
    }
    try {
      return toRow.apply(DynamicMessage.parseFrom(descriptor, payload));
    } catch (InvalidProtocolBufferException e) {
      return null;
    }
  }

  private void prepare() {
    descriptor = findMessage(descriptorSet, messageName);
    toRow = messageConverter(descriptor, rowType);
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
  // Converters, planned once per target type
  // ---------------------------------------------------------------------------------------------------

  static Function<DynamicMessage, Row> messageConverter(Descriptor message, StructType target) {
    StructField[] targetFields = target.fields();
    FieldDescriptor[] fields = new FieldDescriptor[targetFields.length];
    List<Function<DynamicMessage, Object>> readers = new ArrayList<>();
    for (int i = 0; i < targetFields.length; i++) {
      FieldDescriptor field = message.findFieldByName(targetFields[i].name());
      if (field == null) {
        throw new IllegalArgumentException(
            message.getFullName() + " has no field " + targetFields[i].name());
      }
      fields[i] = field;
      readers.add(fieldReader(field, targetFields[i].dataType()));
    }
    return value -> {
      Object[] values = new Object[fields.length];
      for (int i = 0; i < values.length; i++) {
        values[i] = readers.get(i).apply(value);
      }
      return RowFactory.create(values);
    };
  }

  private static Function<DynamicMessage, Object> fieldReader(FieldDescriptor field, DataType target) {
    if (field.isMapField()) {
      Function<Object, Object> entries = mapConverter(field, target);
      return message -> entries.apply(message.getField(field));
    }
    if (field.isRepeated()) {
      if (!(target instanceof ArrayType array)) {
        throw mismatch(field, target);
      }
      Function<Object, Object> element = valueConverter(field, array.elementType());
      return message -> {
        List<?> values = (List<?>) message.getField(field);
        List<Object> converted = new ArrayList<>(values.size());
        for (Object value : values) {
          converted.add(element.apply(value));
        }
        return converted;
      };
    }
    Function<Object, Object> convert = valueConverter(field, target);
    boolean nullWhenUnset = field.getJavaType() == FieldDescriptor.JavaType.MESSAGE || field.hasPresence();
    return message ->
        nullWhenUnset && !message.hasField(field) ? null : convert.apply(message.getField(field));
  }

  private static Function<Object, Object> mapConverter(FieldDescriptor field, DataType target) {
    Descriptor entry = field.getMessageType();
    FieldDescriptor keyField = entry.findFieldByName("key");
    FieldDescriptor valueField = entry.findFieldByName("value");
    if (target instanceof MapType map) {
      Function<Object, Object> key = valueConverter(keyField, map.keyType());
      Function<Object, Object> value = valueConverter(valueField, map.valueType());
      return entries -> {
        Map<Object, Object> converted = new LinkedHashMap<>();
        for (Object item : (List<?>) entries) {
          DynamicMessage pair = (DynamicMessage) item;
          converted.put(key.apply(pair.getField(keyField)), value.apply(pair.getField(valueField)));
        }
        return converted;
      };
    }
    // Dagger's layout: ARRAY<STRUCT<key, value>>, in the order the record holds the entries
    if (target instanceof ArrayType array && array.elementType() instanceof StructType struct) {
      Function<DynamicMessage, Row> pair = messageConverter(entry, struct);
      return entries -> {
        List<Object> converted = new ArrayList<>();
        for (Object item : (List<?>) entries) {
          converted.add(pair.apply((DynamicMessage) item));
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
        return value -> enumName((EnumValueDescriptor) value);
      case MESSAGE:
        return messageValueConverter(field, target);
      default:
        throw mismatch(field, target);
    }
  }

  private static String enumName(EnumValueDescriptor value) {
    // A number the enum does not define (a newer writer) reads as its digits.
    EnumValueDescriptor known = value.getType().findValueByNumber(value.getNumber());
    return known == null ? Integer.toString(value.getNumber()) : value.getName();
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
        return value -> WellKnownJson.write((DynamicMessage) value);
      default:
        break;
    }
    if (WRAPPERS.contains(message.getFullName())) {
      FieldDescriptor wrapped = message.findFieldByName("value");
      if (target instanceof StructType struct) { // Dagger's layout: STRUCT<value>
        Function<DynamicMessage, Row> row = messageConverter(message, struct);
        return value -> row.apply((DynamicMessage) value);
      }
      Function<Object, Object> scalar = valueConverter(wrapped, target);
      return value -> scalar.apply(((DynamicMessage) value).getField(wrapped));
    }
    if (!(target instanceof StructType struct)) {
      throw mismatch(field, target);
    }
    Function<DynamicMessage, Row> row = messageConverter(message, struct);
    return value -> row.apply((DynamicMessage) value);
  }

  private static Function<Object, Object> secondsNanosConverter(
      Descriptor message, DataType target, FieldDescriptor field) {
    FieldDescriptor seconds = message.findFieldByName("seconds");
    FieldDescriptor nanos = message.findFieldByName("nanos");
    if (target.equals(DataTypes.TimestampType)) {
      return value -> {
        DynamicMessage m = (DynamicMessage) value;
        return Instant.ofEpochSecond((Long) m.getField(seconds), (Integer) m.getField(nanos));
      };
    }
    if (target instanceof DayTimeIntervalType) {
      return value -> {
        DynamicMessage m = (DynamicMessage) value;
        return Duration.ofSeconds((Long) m.getField(seconds), (Integer) m.getField(nanos));
      };
    }
    if (target instanceof StructType) { // Dagger's layout, at microsecond precision like the native one
      boolean floor = message.getFullName().equals("google.protobuf.Timestamp");
      return value -> {
        DynamicMessage m = (DynamicMessage) value;
        long micros = Math.addExact(
            Math.multiplyExact((Long) m.getField(seconds), 1_000_000L), (Integer) m.getField(nanos) / 1000);
        long wholeSeconds = floor ? Math.floorDiv(micros, 1_000_000L) : micros / 1_000_000L;
        long remainder = micros - wholeSeconds * 1_000_000L;
        return RowFactory.create(wholeSeconds, (int) (remainder * 1000));
      };
    }
    throw mismatch(field, target);
  }

  private static final java.util.Set<String> WRAPPERS = java.util.Set.of(
      "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
      "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
      "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue");

  private static IllegalArgumentException mismatch(FieldDescriptor field, DataType target) {
    return new IllegalArgumentException(
        field.getFullName() + " cannot be read as " + target.simpleString());
  }
}

package dagger.jobs.codec;

import static dagger.jobs.codec.WellKnownTypes.DURATION;
import static dagger.jobs.codec.WellKnownTypes.JSON_TYPES;
import static dagger.jobs.codec.WellKnownTypes.TIMESTAMP;
import static dagger.jobs.codec.WellKnownTypes.WRAPPERS;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumDescriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.UnknownFieldSet;
import com.google.protobuf.WireFormat;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.StringJoiner;
import java.util.TreeSet;
import java.util.function.Function;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DayTimeIntervalType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.NullType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A struct of SQL result columns to a serialized protobuf message, in the JVM: the {@code
 * jobs.codec.protobuf.ProtoEncoder} results without a Python worker (tests/test_codec.py runs the encoding
 * tests against both).
 *
 * <p>Columns fill fields by name, {@code a.b.c} columns fill nested fields, columns naming no field are
 * ignored, and values in Dagger's row layout are accepted as well as the native one. What the input type
 * alone shows to be wrong (a column whose type cannot fill its field) fails in the constructor, on the
 * driver, with the Python encoder's message; what only values show (an unknown enum name, an integer out of
 * range, text that is not JSON) fails when the row is encoded, with the same message.
 *
 * <p>The bytes are the Python encoder's: fields in field-number order, then the Struct/Value/ListValue
 * fields appended after them (concatenated protobuf is a merge), wrapper values written even when they are
 * the default, map entries without their default values. Only the entries of a Struct come in another
 * order (the Python runtime writes them in its map's order). Descriptors are not serializable: the encoder
 * ships the descriptor set's bytes and plans its converters on first use, once per executor.
 */
public final class ProtobufRowEncoder implements UDF1<Row, byte[]> {
  private static final long serialVersionUID = 1L;

  private final byte[] descriptorSet;
  private final String messageName;
  private final StructType inputType;
  private transient Function<Row, byte[]> encode;

  public ProtobufRowEncoder(byte[] descriptorSet, String messageName, StructType inputType) {
    this.descriptorSet = descriptorSet;
    this.messageName = messageName;
    this.inputType = inputType;
    prepare(); // a column whose type cannot fill its field fails here, on the driver
  }

  @Override
  public byte[] call(Row row) {
    if (row == null) {
      return null;
    }
    if (encode == null) {
      prepare();
    }
    return encode.apply(row);
  }

  private void prepare() {
    encode = plan(ProtobufRowDecoder.findMessage(descriptorSet, messageName), inputType);
  }

  /**
   * Why the constructor would reject {@code inputType} (null when it would not): the message of its
   * IllegalArgumentException, for callers that cannot read a Java exception's message (through py4j, PySpark
   * turns it into an exception whose message is the JVM's stack trace, or nothing).
   */
  public static String typeError(byte[] descriptorSet, String messageName, StructType inputType) {
    try {
      plan(ProtobufRowDecoder.findMessage(descriptorSet, messageName), inputType);
      return null;
    } catch (IllegalArgumentException e) {
      return e.getMessage();
    }
  }

  // ---------------------------------------------------------------------------------------------------
  // The output message, planned once per input type
  // ---------------------------------------------------------------------------------------------------

  private record Column(DataType type, Function<Row, Object> get) {}

  private record Writer(FieldDescriptor field, Function<Row, Object> get, Function<Object, Object> convert) {}

  private record JsonWriter(FieldDescriptor field, Function<Row, Object> get, JsonMessages messages) {}

  private static Function<Row, byte[]> plan(Descriptor message, StructType input) {
    Map<String, Column> columns = columnsByField(message, input);
    List<Writer> writers = new ArrayList<>();
    List<FieldDescriptor> jsonFields = new ArrayList<>();
    for (FieldDescriptor field : message.getFields()) {
      Column column = columns.get(field.getName());
      if (column == null) {
        continue;
      }
      if (field.getJavaType() == FieldDescriptor.JavaType.MESSAGE
          && JSON_TYPES.contains(field.getMessageType().getFullName())) {
        jsonFields.add(field);
        continue;
      }
      writers.add(new Writer(field, column.get(), conformField(field, column.type(), field.getName())));
    }
    List<JsonWriter> jsonWriters = new ArrayList<>();
    for (FieldDescriptor field : jsonFields) {
      Column column = columns.get(field.getName());
      if (column.type() instanceof NullType) {
        continue;
      }
      if (!(column.type() instanceof StringType)) {
        throw mismatch(
            field.getName(), column.type(), field, protoTypeName(field, false), " (expects a JSON string)");
      }
      jsonWriters.add(new JsonWriter(field, column.get(), new JsonMessages(field.getMessageType())));
    }
    return row -> {
      DynamicMessage.Builder builder = DynamicMessage.newBuilder(message);
      List<MapValue> maps = new ArrayList<>();
      for (Writer writer : writers) {
        Object value = writer.get().apply(row);
        if (value != null) {
          put(builder, maps, writer.field(), writer.convert().apply(value));
        }
      }
      byte[] encoded = build(builder, maps).toByteArray();
      return jsonWriters.isEmpty() ? encoded : appendJson(encoded, jsonWriters, row);
    };
  }

  private static byte[] appendJson(byte[] encoded, List<JsonWriter> jsonWriters, Row row) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(encoded.length + 64);
    CodedOutputStream out = CodedOutputStream.newInstance(bytes);
    try {
      out.writeRawBytes(encoded);
      for (JsonWriter writer : jsonWriters) {
        Object text = writer.get().apply(row);
        if (text == null) {
          continue;
        }
        byte[] payload = writer.messages().serialized((String) text, writer.field().getName());
        out.writeTag(writer.field().getNumber(), WireFormat.WIRETYPE_LENGTH_DELIMITED);
        out.writeUInt32NoTag(payload.length);
        out.writeRawBytes(payload);
      }
      out.flush();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  /** Top-level columns by name, with {@code a.b.c} columns gathered into a struct column for field a. */
  @SuppressWarnings("unchecked")
  private static Map<String, Column> columnsByField(Descriptor message, StructType input) {
    Map<String, Column> columns = new LinkedHashMap<>();
    Map<String, Map<String, Object>> nested = new LinkedHashMap<>(); // leaves are Columns
    StructField[] fields = input.fields();
    for (int i = 0; i < fields.length; i++) {
      int index = i;
      String name = fields[i].name();
      Column column = new Column(fields[i].dataType(), row -> row.get(index));
      if (!name.contains(".")) {
        columns.put(name, column);
        continue;
      }
      String[] parts = name.split("\\.", -1);
      if (message.findFieldByName(parts[0]) == null) {
        continue; // an extra column, like any other
      }
      Map<String, Object> node = nested.computeIfAbsent(parts[0], head -> new LinkedHashMap<>());
      for (int p = 1; p < parts.length - 1; p++) {
        Object child = node.computeIfAbsent(parts[p], part -> new LinkedHashMap<String, Object>());
        if (!(child instanceof Map)) {
          throw new IllegalArgumentException(
              "column " + repr(name) + ": " + String.join(".", java.util.Arrays.copyOf(parts, p + 1))
                  + " is a column too; keep one of them");
        }
        node = (Map<String, Object>) child;
      }
      node.put(parts[parts.length - 1], column);
    }
    for (Map.Entry<String, Map<String, Object>> entry : nested.entrySet()) {
      String head = entry.getKey();
      if (columns.containsKey(head)) {
        throw new IllegalArgumentException(
            "columns " + repr(head) + " and " + head + ".* both fill field " + repr(head)
                + "; keep one of them");
      }
      columns.put(head, treeColumn(entry.getValue()));
    }
    return columns;
  }

  @SuppressWarnings("unchecked")
  private static Column treeColumn(Map<String, Object> tree) {
    List<StructField> fields = new ArrayList<>();
    List<Function<Row, Object>> getters = new ArrayList<>();
    for (Map.Entry<String, Object> entry : tree.entrySet()) {
      Column child = entry.getValue() instanceof Column column
          ? column
          : treeColumn((Map<String, Object>) entry.getValue());
      fields.add(new StructField(entry.getKey(), child.type(), true, Metadata.empty()));
      getters.add(child.get());
    }
    return new Column(new StructType(fields.toArray(new StructField[0])), row -> {
      Object[] values = new Object[getters.size()];
      for (int i = 0; i < values.length; i++) {
        values[i] = getters.get(i).apply(row);
      }
      return RowFactory.create(values);
    });
  }

  // ---------------------------------------------------------------------------------------------------
  // Converters: a non-null Spark value to the value protobuf-java sets (null = leave the field unset)
  // ---------------------------------------------------------------------------------------------------

  private static Function<Object, Object> conformField(FieldDescriptor field, DataType type, String column) {
    if (type instanceof NullType) { // `SELECT NULL AS x`: leave the field unset
      return value -> null;
    }
    if (field.isMapField()) {
      return conformMap(field, type, column);
    }
    if (field.isRepeated()) {
      if (!(type instanceof ArrayType array)) {
        throw mismatch(column, type, field, protoTypeName(field, false), "");
      }
      Function<Object, Object> element = conformValue(field, array.elementType(), column + "[]");
      Object nullElement = nullElement(field);
      return value -> {
        List<?> items = asList(value);
        List<Object> converted = new ArrayList<>(items.size());
        for (Object item : items) {
          Object one = item == null ? null : element.apply(item);
          if (one != null) {
            converted.add(one);
          } else if (nullElement != null) {
            converted.add(nullElement);
          }
        }
        return converted;
      };
    }
    return conformValue(field, type, column);
  }

  /** What the Python encoder writes for a NULL element of a repeated field (null: nothing). */
  private static Object nullElement(FieldDescriptor field) {
    return switch (field.getJavaType()) {
      case INT -> 0;
      case LONG -> 0L;
      case FLOAT -> 0f;
      case DOUBLE -> 0d;
      case BOOLEAN -> false;
      case MESSAGE -> DynamicMessage.getDefaultInstance(field.getMessageType());
      default -> null; // strings, bytes and enums: skipped
    };
  }

  private static Function<Object, Object> conformMap(FieldDescriptor field, DataType type, String column) {
    Descriptor entry = field.getMessageType();
    FieldDescriptor keyField = entry.findFieldByName("key");
    FieldDescriptor valueField = entry.findFieldByName("value");
    boolean entryList = isEntryList(type); // Dagger's layout: ARRAY<STRUCT<key, value>>
    DataType keyType;
    DataType valueType;
    if (entryList) {
      StructField[] pair = ((StructType) ((ArrayType) type).elementType()).fields();
      keyType = pair[0].dataType();
      valueType = pair[1].dataType();
    } else if (type instanceof MapType map) {
      keyType = map.keyType();
      valueType = map.valueType();
    } else {
      throw mismatch(column, type, field, protoTypeName(field, false), "");
    }
    Function<Object, Object> key = conformScalar(keyField, keyField, keyType, column + " key");
    Function<Object, Object> item = conformValue(valueField, valueType, column + " value");
    return value -> {
      List<Object> entries = new ArrayList<>();
      if (entryList) {
        for (Object pair : asList(value)) {
          Row row = (Row) pair;
          entries.add(mapEntry(keyField, valueField, key, item, row == null ? null : row.get(0),
              row == null ? null : row.get(1), column));
        }
      } else {
        for (Map.Entry<?, ?> pair : asMap(value).entrySet()) {
          entries.add(mapEntry(keyField, valueField, key, item, pair.getKey(), pair.getValue(), column));
        }
      }
      return entries;
    };
  }

  /**
   * One serialized map entry. A default scalar value is left out of it, as the Python encoder writes it, and
   * so is a NULL value (an entry of the key only), and a default key but for a string one; protobuf-java
   * would write both of them always.
   */
  private static ByteString mapEntry(FieldDescriptor keyField, FieldDescriptor valueField,
      Function<Object, Object> key, Function<Object, Object> item, Object k, Object v, String column) {
    if (k == null) {
      throw new IllegalArgumentException("column " + repr(column) + ": Map cannot contain NULL valued keys");
    }
    ByteString.Output bytes = ByteString.newOutput();
    CodedOutputStream out = CodedOutputStream.newInstance(bytes);
    try {
      Object keyValue = key.apply(k);
      if (!isDefault(keyValue) || keyValue instanceof String) { // an empty string key is written
        writeField(out, keyField, keyValue);
      }
      Object itemValue = v == null ? null : item.apply(v);
      if (itemValue != null && !isDefault(itemValue)) {
        writeField(out, valueField, itemValue);
      }
      out.flush();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteString();
  }

  private static void writeField(CodedOutputStream out, FieldDescriptor field, Object value)
      throws IOException {
    int number = field.getNumber();
    switch (field.getType()) {
      case INT32 -> out.writeInt32(number, (Integer) value);
      case SINT32 -> out.writeSInt32(number, (Integer) value);
      case SFIXED32 -> out.writeSFixed32(number, (Integer) value);
      case UINT32 -> out.writeUInt32(number, (Integer) value);
      case FIXED32 -> out.writeFixed32(number, (Integer) value);
      case INT64 -> out.writeInt64(number, (Long) value);
      case SINT64 -> out.writeSInt64(number, (Long) value);
      case SFIXED64 -> out.writeSFixed64(number, (Long) value);
      case UINT64 -> out.writeUInt64(number, (Long) value);
      case FIXED64 -> out.writeFixed64(number, (Long) value);
      case FLOAT -> out.writeFloat(number, (Float) value);
      case DOUBLE -> out.writeDouble(number, (Double) value);
      case BOOL -> out.writeBool(number, (Boolean) value);
      case STRING -> out.writeString(number, (String) value);
      case BYTES -> out.writeBytes(number, (ByteString) value);
      case ENUM -> out.writeEnum(number, ((EnumValueDescriptor) value).getNumber());
      default -> out.writeMessage(number, (DynamicMessage) value);
    }
  }

  private static boolean isEntryList(DataType type) {
    if (type instanceof ArrayType array && array.elementType() instanceof StructType struct) {
      StructField[] fields = struct.fields();
      return fields.length == 2 && fields[0].name().equals("key") && fields[1].name().equals("value");
    }
    return false;
  }

  /** One value of a field (an element of a repeated one): the field seen as singular. */
  private static Function<Object, Object> conformValue(FieldDescriptor field, DataType type, String column) {
    if (field.getJavaType() != FieldDescriptor.JavaType.MESSAGE) {
      return conformScalar(field, field, type, column);
    }
    Descriptor message = field.getMessageType();
    String name = message.getFullName();
    if (JSON_TYPES.contains(name)) {
      throw new IllegalArgumentException("column " + repr(column) + ": " + name
          + " fields are written only at the top level of the output message, not inside "
          + field.getContainingType().getFullName());
    }
    boolean timestamp = name.equals(TIMESTAMP);
    if ((timestamp || name.equals(DURATION)) && isSecondsNanos(type)) {
      return secondsNanosConverter(message, (StructType) type, field, column);
    }
    if (WRAPPERS.contains(name)) {
      FieldDescriptor wrapped = message.findFieldByName("value");
      if (type instanceof StructType struct) { // Dagger's layout: STRUCT<value>
        StructField[] fields = struct.fields();
        if (fields.length != 1 || !fields[0].name().equals("value")) {
          throw mismatch(
              column, type, field, protoTypeName(field, true), " (expects a value or a STRUCT<value>)");
        }
        Function<Object, Object> scalar = conformScalar(field, wrapped, fields[0].dataType(), column);
        return value -> {
          Object inner = ((Row) value).get(0);
          return inner == null ? null : wrapper(message, wrapped, scalar.apply(inner));
        };
      }
      Function<Object, Object> scalar = conformScalar(field, wrapped, type, column);
      return value -> wrapper(message, wrapped, scalar.apply(value));
    }
    if (timestamp) {
      if (!(type instanceof TimestampType || type instanceof TimestampNTZType)) {
        throw mismatch(column, type, field, protoTypeName(field, true), "");
      }
      return value -> secondsNanos(message, true, micros(value));
    }
    if (name.equals(DURATION)) {
      if (!(type instanceof DayTimeIntervalType)) {
        throw mismatch(column, type, field, protoTypeName(field, true), "");
      }
      return value -> {
        Duration duration = (Duration) value;
        return secondsNanos(message, false, duration.getSeconds() * 1_000_000L + duration.getNano() / 1000);
      };
    }
    return messageConverter(field, message, type, column);
  }

  private static Function<Object, Object> messageConverter(
      FieldDescriptor field, Descriptor message, DataType type, String column) {
    if (!(type instanceof StructType struct)) {
      throw mismatch(column, type, field, protoTypeName(field, true), "");
    }
    Map<String, Integer> present = new LinkedHashMap<>();
    StructField[] fields = struct.fields();
    for (int i = 0; i < fields.length; i++) {
      present.put(fields[i].name(), i);
    }
    for (String name : present.keySet()) {
      if (message.findFieldByName(name) == null) {
        StringJoiner names = new StringJoiner(", ");
        message.getFields().forEach(known -> names.add(known.getName()));
        throw new IllegalArgumentException("column " + repr(column + "." + name) + ": "
            + message.getFullName() + " has no field " + repr(name) + " (fields: " + names + ")");
      }
    }
    List<Writer> children = new ArrayList<>();
    for (FieldDescriptor child : message.getFields()) {
      Integer index = present.get(child.getName());
      if (index != null) {
        DataType childType = fields[index].dataType();
        Function<Object, Object> convert = conformField(child, childType, column + "." + child.getName());
        children.add(new Writer(child, row -> row.get(index), convert));
      }
    }
    return value -> {
      Row row = (Row) value;
      DynamicMessage.Builder builder = DynamicMessage.newBuilder(message);
      List<MapValue> maps = new ArrayList<>();
      for (Writer child : children) {
        Object childValue = child.get().apply(row);
        if (childValue != null) {
          put(builder, maps, child.field(), child.convert().apply(childValue));
        }
      }
      return build(builder, maps);
    };
  }

  private static boolean isSecondsNanos(DataType type) {
    if (type instanceof StructType struct) {
      StructField[] fields = struct.fields();
      return fields.length == 2 && fields[0].name().equals("seconds") && fields[1].name().equals("nanos");
    }
    return false;
  }

  /** Dagger's STRUCT<seconds, nanos>, at microsecond precision as the Python encoder reads it. */
  private static Function<Object, Object> secondsNanosConverter(
      Descriptor message, StructType type, FieldDescriptor field, String column) {
    for (StructField part : type.fields()) {
      if (!isIntegral(part.dataType())) {
        throw mismatch(column, type, field, protoTypeName(field, true), "");
      }
    }
    boolean timestamp = message.getFullName().equals(TIMESTAMP);
    return value -> {
      Row row = (Row) value;
      if (row.isNullAt(0) || row.isNullAt(1)) {
        return null;
      }
      long micros = ((Number) row.get(0)).longValue() * 1_000_000L + ((Number) row.get(1)).longValue() / 1000;
      return secondsNanos(message, timestamp, micros);
    };
  }

  private static long micros(Object value) {
    if (value instanceof Timestamp timestamp) {
      return Math.floorDiv(timestamp.getTime(), 1000L) * 1_000_000L + timestamp.getNanos() / 1000;
    }
    if (value instanceof Instant instant) {
      return instant.getEpochSecond() * 1_000_000L + instant.getNano() / 1000;
    }
    LocalDateTime local = (LocalDateTime) value; // TIMESTAMP_NTZ: a wall-clock time, read as UTC
    return local.toEpochSecond(ZoneOffset.UTC) * 1_000_000L + local.getNano() / 1000;
  }

  /** A Timestamp (seconds floored, nanos positive) or a Duration (both with the sign) from microseconds. */
  private static DynamicMessage secondsNanos(Descriptor message, boolean timestamp, long micros) {
    long seconds = timestamp ? Math.floorDiv(micros, 1_000_000L) : micros / 1_000_000L;
    int nanos = (int) (micros - seconds * 1_000_000L) * 1000;
    DynamicMessage.Builder builder = DynamicMessage.newBuilder(message);
    put(builder, null, message.findFieldByName("seconds"), seconds);
    put(builder, null, message.findFieldByName("nanos"), nanos);
    return builder.buildPartial();
  }

  /** A wrapper holding {@code value}, which is written even when it is the default, as Python writes it. */
  private static DynamicMessage wrapper(Descriptor message, FieldDescriptor wrapped, Object value) {
    DynamicMessage.Builder builder = DynamicMessage.newBuilder(message);
    if (!isDefault(value)) {
      return builder.setField(wrapped, value).buildPartial();
    }
    UnknownFieldSet.Field.Builder field = UnknownFieldSet.Field.newBuilder();
    switch (wrapped.getJavaType()) {
      case FLOAT -> field.addFixed32(Float.floatToRawIntBits((Float) value));
      case DOUBLE -> field.addFixed64(Double.doubleToRawLongBits((Double) value));
      case STRING, BYTE_STRING -> field.addLengthDelimited(ByteString.EMPTY);
      default -> field.addVarint(0);
    }
    return builder
        .setUnknownFields(UnknownFieldSet.newBuilder().addField(wrapped.getNumber(), field.build()).build())
        .buildPartial();
  }

  // ---------------------------------------------------------------------------------------------------
  // Scalars and enums
  // ---------------------------------------------------------------------------------------------------

  /**
   * A scalar into {@code target}'s type; {@code field} names the field in errors (a wrapper field for its
   * wrapped value). Integers are range-checked like Arrow's safe casts, except int64 into uint64, which wraps
   * back what decoding wrapped; floats narrow as Java does.
   */
  private static Function<Object, Object> conformScalar(
      FieldDescriptor field, FieldDescriptor target, DataType source, String column) {
    if (field.getJavaType() == FieldDescriptor.JavaType.ENUM) {
      return conformEnum(field, source, column);
    }
    String fieldType = protoTypeName(field, true);
    FieldDescriptor.Type kind = target.getType();
    switch (target.getJavaType()) {
      case STRING:
        if (source instanceof StringType) {
          return Function.identity();
        }
        break;
      case BYTE_STRING:
        if (source instanceof BinaryType) {
          return value -> ByteString.copyFrom((byte[]) value);
        }
        break;
      case BOOLEAN:
        if (source instanceof BooleanType) {
          return Function.identity();
        }
        break;
      case FLOAT:
      case DOUBLE:
        boolean isFloat = target.getJavaType() == FieldDescriptor.JavaType.FLOAT;
        if (source instanceof FloatType || source instanceof DoubleType) {
          return isFloat
              ? value -> ((Number) value).floatValue()
              : value -> ((Number) value).doubleValue();
        }
        if (isIntegral(source)) {
          long exact = isFloat ? 1L << 24 : 1L << 53; // integers a float holds exactly
          long[] range = intersect(integralRange(source), new long[] {-exact, exact});
          return value -> {
            long number = checkedRange(((Number) value).longValue(), range, column, source, field, fieldType);
            return isFloat ? (Object) (float) number : (Object) (double) number;
          };
        }
        if (source instanceof DecimalType) {
          return isFloat
              ? value -> ((BigDecimal) value).floatValue()
              : value -> ((BigDecimal) value).doubleValue();
        }
        break;
      case INT:
      case LONG:
        boolean unsigned = kind == FieldDescriptor.Type.UINT32 || kind == FieldDescriptor.Type.FIXED32
            || kind == FieldDescriptor.Type.UINT64 || kind == FieldDescriptor.Type.FIXED64;
        boolean isInt = target.getJavaType() == FieldDescriptor.JavaType.INT;
        BigInteger low = unsigned ? BigInteger.ZERO : BigInteger.ONE.shiftLeft(isInt ? 31 : 63).negate();
        BigInteger high = BigInteger.ONE.shiftLeft(unsigned ? (isInt ? 32 : 64) : (isInt ? 31 : 63))
            .subtract(BigInteger.ONE);
        if (isIntegral(source)) {
          if (!isInt && unsigned && source instanceof LongType) { // wraps back what decoding wrapped
            return Function.identity();
          }
          long[] range = intersect(integralRange(source), new long[] {
              low.max(BigInteger.valueOf(Long.MIN_VALUE)).longValue(),
              high.min(BigInteger.valueOf(Long.MAX_VALUE)).longValue()});
          return value -> {
            long number = checkedRange(((Number) value).longValue(), range, column, source, field, fieldType);
            return isInt ? (Object) (int) number : (Object) number;
          };
        }
        if (source instanceof DecimalType) {
          return value -> {
            BigDecimal decimal = (BigDecimal) value;
            if (decimal.signum() != 0 && decimal.stripTrailingZeros().scale() > 0) {
              throw mismatch(
                  column, source, field, fieldType, ": Rescaling Decimal value would cause data loss");
            }
            BigInteger number = decimal.toBigInteger();
            if (number.compareTo(low) < 0 || number.compareTo(high) > 0) {
              throw mismatch(column, source, field, fieldType, ": Integer value out of bounds");
            }
            return isInt ? (Object) number.intValue() : (Object) number.longValue();
          };
        }
        break;
      default:
        break;
    }
    throw mismatch(column, source, field, fieldType, "");
  }

  private static long checkedRange(
      long number, long[] range, String column, DataType source, FieldDescriptor field, String fieldType) {
    if (number < range[0] || number > range[1]) {
      throw mismatch(column, source, field, fieldType,
          ": Integer value " + number + " not in range: " + range[0] + " to " + range[1]);
    }
    return number;
  }

  private static boolean isIntegral(DataType type) {
    return type instanceof ByteType || type instanceof ShortType || type instanceof IntegerType
        || type instanceof LongType;
  }

  private static long[] integralRange(DataType type) {
    if (type instanceof ByteType) {
      return new long[] {Byte.MIN_VALUE, Byte.MAX_VALUE};
    }
    if (type instanceof ShortType) {
      return new long[] {Short.MIN_VALUE, Short.MAX_VALUE};
    }
    if (type instanceof IntegerType) {
      return new long[] {Integer.MIN_VALUE, Integer.MAX_VALUE};
    }
    return new long[] {Long.MIN_VALUE, Long.MAX_VALUE};
  }

  private static long[] intersect(long[] a, long[] b) {
    return new long[] {Math.max(a[0], b[0]), Math.min(a[1], b[1])};
  }

  /** Enum values from their names or numbers; one the enum does not define is an error naming them all. */
  private static Function<Object, Object> conformEnum(FieldDescriptor field, DataType source, String column) {
    EnumDescriptor enumType = field.getEnumType();
    if (isIntegral(source)) {
      TreeSet<Integer> numbers = new TreeSet<>();
      enumType.getValues().forEach(value -> numbers.add(value.getNumber()));
      return value -> {
        long number = ((Number) value).longValue();
        EnumValueDescriptor known = number == (int) number ? enumType.findValueByNumber((int) number) : null;
        if (known == null) {
          StringJoiner list = new StringJoiner(", ", "[", "]");
          numbers.forEach(n -> list.add(n.toString()));
          throw new IllegalArgumentException("column " + repr(column) + ": " + number
              + " is not a number of enum " + enumType.getFullName() + " (field " + field.getName()
              + "; numbers: " + list + ")");
        }
        return known;
      };
    }
    if (source instanceof StringType) {
      return value -> {
        EnumValueDescriptor known = enumType.findValueByName((String) value);
        if (known == null) {
          StringJoiner names = new StringJoiner(", ");
          enumType.getValues().forEach(v -> names.add(v.getName()));
          throw new IllegalArgumentException("column " + repr(column) + ": " + repr((String) value)
              + " is not a value of enum " + enumType.getFullName() + " (field " + field.getName()
              + "; values: " + names + ")");
        }
        return known;
      };
    }
    throw mismatch(column, source, field, protoTypeName(field, true), "");
  }

  // ---------------------------------------------------------------------------------------------------
  // Helpers
  // ---------------------------------------------------------------------------------------------------

  private record MapValue(FieldDescriptor field, List<?> entries) {}

  /**
   * Sets a converted value; a default in a field without presence stays unset, as protobuf writes it. Map
   * entries go to {@code maps}, for {@link #build}.
   */
  private static void put(
      DynamicMessage.Builder builder, List<MapValue> maps, FieldDescriptor field, Object value) {
    if (value == null) {
      return;
    }
    if (field.isMapField()) {
      if (!((List<?>) value).isEmpty()) {
        maps.add(new MapValue(field, (List<?>) value));
      }
      return;
    }
    if (field.isRepeated()) {
      if (!((List<?>) value).isEmpty()) {
        builder.setField(field, value);
      }
      return;
    }
    if (!field.hasPresence() && isDefault(value)) {
      return;
    }
    builder.setField(field, value);
  }

  /**
   * The message, with its map entries as the Python encoder writes them: each entry holding only what is
   * not a default. protobuf-java writes every map entry's key and value, so the entries are written here
   * as length-delimited fields, and the message's fields are carried as unknown fields (written in field
   * number order, like known ones) to keep the fields in order.
   */
  private static DynamicMessage build(DynamicMessage.Builder builder, List<MapValue> maps) {
    DynamicMessage message = builder.buildPartial();
    if (maps.isEmpty()) {
      return message;
    }
    UnknownFieldSet.Builder fields = UnknownFieldSet.newBuilder();
    try {
      fields.mergeFrom(message.toByteString());
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalStateException(e);
    }
    for (MapValue map : maps) {
      UnknownFieldSet.Field.Builder field = UnknownFieldSet.Field.newBuilder();
      for (Object entry : map.entries()) {
        field.addLengthDelimited((ByteString) entry);
      }
      fields.mergeField(map.field().getNumber(), field.build());
    }
    return DynamicMessage.newBuilder(message.getDescriptorForType())
        .setUnknownFields(fields.build())
        .buildPartial();
  }

  private static boolean isDefault(Object value) {
    if (value instanceof Float f) {
      return f == 0f; // -0.0 too, as the Python encoder writes it
    }
    if (value instanceof Double d) {
      return d == 0d;
    }
    if (value instanceof Integer i) {
      return i == 0;
    }
    if (value instanceof Long l) {
      return l == 0L;
    }
    if (value instanceof Boolean b) {
      return !b;
    }
    if (value instanceof String s) {
      return s.isEmpty();
    }
    if (value instanceof ByteString bytes) {
      return bytes.isEmpty();
    }
    if (value instanceof EnumValueDescriptor e) {
      return e.getNumber() == 0;
    }
    return false;
  }

  private static List<?> asList(Object value) {
    if (value instanceof scala.collection.Seq<?> seq) {
      return CollectionConverters.asJava(seq);
    }
    return (List<?>) value;
  }

  private static Map<?, ?> asMap(Object value) {
    if (value instanceof scala.collection.Map<?, ?> map) {
      return CollectionConverters.asJava(map);
    }
    return (Map<?, ?>) value;
  }

  /** The field's type as the Python encoder names it ({@code singular}: one element of a repeated field). */
  static String protoTypeName(FieldDescriptor field, boolean singular) {
    if (field.isMapField()) {
      Descriptor entry = field.getMessageType();
      return "map<" + protoTypeName(entry.findFieldByName("key"), true) + ", "
          + protoTypeName(entry.findFieldByName("value"), true) + ">";
    }
    String name = switch (field.getJavaType()) {
      case MESSAGE -> field.getMessageType().getFullName();
      case ENUM -> field.getEnumType().getFullName();
      default -> field.getType().name().toLowerCase(Locale.ROOT);
    };
    return !singular && field.isRepeated() ? "repeated " + name : name;
  }

  /** A Spark type as PySpark's {@code simpleString()} writes it (the JVM's truncates wide structs). */
  static String sqlTypeName(DataType type) {
    if (type instanceof StructType struct) {
      StringJoiner fields = new StringJoiner(",", "struct<", ">");
      for (StructField field : struct.fields()) {
        fields.add(field.name() + ":" + sqlTypeName(field.dataType()));
      }
      return fields.toString();
    }
    if (type instanceof ArrayType array) {
      return "array<" + sqlTypeName(array.elementType()) + ">";
    }
    if (type instanceof MapType map) {
      return "map<" + sqlTypeName(map.keyType()) + "," + sqlTypeName(map.valueType()) + ">";
    }
    return type.simpleString();
  }

  private static IllegalArgumentException mismatch(
      String column, DataType source, FieldDescriptor field, String fieldType, String detail) {
    return new IllegalArgumentException("column " + repr(column) + ": type mismatch, " + sqlTypeName(source)
        + " cannot fill field " + field.getContainingType().getFullName() + "." + field.getName()
        + " of type " + fieldType + detail);
  }

  /** A string as Python's {@code repr} writes it, so that messages read as the Python encoder's. */
  static String repr(String text) {
    char quote = text.indexOf('\'') >= 0 && text.indexOf('"') < 0 ? '"' : '\'';
    StringBuilder out = new StringBuilder().append(quote);
    text.codePoints().forEach(c -> {
      if (c == quote || c == '\\') {
        out.append('\\').appendCodePoint(c);
      } else if (c == '\n') {
        out.append("\\n");
      } else if (c == '\r') {
        out.append("\\r");
      } else if (c == '\t') {
        out.append("\\t");
      } else if (c < 0x20 || c == 0x7f || (c > 0x7f && !isPrintable(c))) {
        out.append(c <= 0xff ? String.format("\\x%02x", c)
            : c <= 0xffff ? String.format("\\u%04x", c) : String.format("\\U%08x", c));
      } else {
        out.appendCodePoint(c);
      }
    });
    return out.append(quote).toString();
  }

  private static boolean isPrintable(int c) {
    return switch (Character.getType(c)) {
      case Character.CONTROL, Character.FORMAT, Character.SURROGATE, Character.PRIVATE_USE,
          Character.UNASSIGNED, Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR,
          Character.SPACE_SEPARATOR -> c == ' ';
      default -> true;
    };
  }


  // ---------------------------------------------------------------------------------------------------
  // JSON text into Struct / Value / ListValue
  // ---------------------------------------------------------------------------------------------------

  /**
   * JSON text parsed into a serialized Struct, Value or ListValue, as Python's {@code json_format.Parse}
   * does: numbers as doubles (NaN and Infinity accepted, as Python's json does), a duplicate key an error.
   */
  private static final class JsonMessages {
    private static final int MAX_DEPTH = 100;
    private final Descriptor target;
    private final Descriptor struct;
    private final Descriptor value;
    private final Descriptor list;

    JsonMessages(Descriptor target) {
      this.target = target;
      Descriptor valueType = switch (target.getFullName()) {
        case "google.protobuf.Struct" ->
            target.findFieldByName("fields").getMessageType().findFieldByName("value").getMessageType();
        case "google.protobuf.ListValue" -> target.findFieldByName("values").getMessageType();
        default -> target;
      };
      this.value = valueType;
      this.struct = valueType.findFieldByName("struct_value").getMessageType();
      this.list = valueType.findFieldByName("list_value").getMessageType();
    }

    byte[] serialized(String text, String column) {
      try {
        Object parsed = new Parser(text).document();
        DynamicMessage message;
        if (target == struct) {
          if (!(parsed instanceof Map<?, ?> object)) {
            throw new JsonError("Struct must be in a JSON object");
          }
          message = structMessage(object);
        } else if (target == list) {
          if (!(parsed instanceof List<?> array)) {
            throw new JsonError("ListValue must be in a JSON array");
          }
          message = listMessage(array);
        } else {
          message = valueMessage(parsed);
        }
        return message.toByteArray();
      } catch (JsonError error) {
        int end = text.offsetByCodePoints(0, Math.min(80, text.codePointCount(0, text.length())));
        throw new IllegalArgumentException("column " + repr(column) + ": " + repr(text.substring(0, end))
            + " is not JSON for a " + target.getFullName() + ": " + error.getMessage());
      }
    }

    private DynamicMessage structMessage(Map<?, ?> object) {
      FieldDescriptor fields = struct.findFieldByName("fields");
      Descriptor entry = fields.getMessageType();
      DynamicMessage.Builder builder = DynamicMessage.newBuilder(struct);
      for (Map.Entry<?, ?> pair : object.entrySet()) {
        builder.addRepeatedField(fields, DynamicMessage.newBuilder(entry)
            .setField(entry.findFieldByName("key"), pair.getKey())
            .setField(entry.findFieldByName("value"), valueMessage(pair.getValue()))
            .build());
      }
      return builder.build();
    }

    private DynamicMessage listMessage(List<?> array) {
      FieldDescriptor values = list.findFieldByName("values");
      DynamicMessage.Builder builder = DynamicMessage.newBuilder(list);
      for (Object item : array) {
        builder.addRepeatedField(values, valueMessage(item));
      }
      return builder.build();
    }

    private DynamicMessage valueMessage(Object parsed) {
      DynamicMessage.Builder builder = DynamicMessage.newBuilder(value);
      if (parsed == NULL) {
        FieldDescriptor field = value.findFieldByName("null_value");
        builder.setField(field, field.getEnumType().findValueByNumber(0));
      } else if (parsed instanceof Double number) {
        builder.setField(value.findFieldByName("number_value"), number);
      } else if (parsed instanceof String text) {
        builder.setField(value.findFieldByName("string_value"), text);
      } else if (parsed instanceof Boolean flag) {
        builder.setField(value.findFieldByName("bool_value"), flag);
      } else if (parsed instanceof Map<?, ?> object) {
        builder.setField(value.findFieldByName("struct_value"), structMessage(object));
      } else {
        builder.setField(value.findFieldByName("list_value"), listMessage((List<?>) parsed));
      }
      return builder.build();
    }

    private static final Object NULL = new Object();

    private static final class JsonError extends RuntimeException {
      private static final long serialVersionUID = 1L;

      JsonError(String message) {
        super(message, null, false, false);
      }
    }

    /** Python's json grammar: RFC 8259 plus NaN, Infinity and -Infinity. */
    private static final class Parser {
      private final String text;
      private int at;
      private int depth;

      Parser(String text) {
        this.text = text;
      }

      Object document() {
        skipSpace();
        Object parsed = value();
        skipSpace();
        if (at < text.length()) {
          throw error("Extra data");
        }
        return parsed;
      }

      private JsonError error(String what) {
        return new JsonError("Failed to load JSON: " + what + " (char " + at + ")");
      }

      private void skipSpace() {
        while (at < text.length() && " \t\n\r".indexOf(text.charAt(at)) >= 0) {
          at++;
        }
      }

      private Object value() {
        if (at >= text.length()) {
          throw error("Expecting value");
        }
        char c = text.charAt(at);
        switch (c) {
          case '{':
            return object();
          case '[':
            return array();
          case '"':
            return string();
          default:
            break;
        }
        for (String word : new String[] {"null", "true", "false", "NaN", "Infinity", "-Infinity"}) {
          if (text.startsWith(word, at)) {
            at += word.length();
            return switch (word) {
              case "null" -> NULL;
              case "true" -> Boolean.TRUE;
              case "false" -> Boolean.FALSE;
              case "NaN" -> Double.NaN;
              case "Infinity" -> Double.POSITIVE_INFINITY;
              default -> Double.NEGATIVE_INFINITY;
            };
          }
        }
        return number();
      }

      private void enter() {
        if (++depth > MAX_DEPTH) {
          throw error("nested deeper than " + MAX_DEPTH + " levels");
        }
      }

      private Map<String, Object> object() {
        enter();
        at++; // {
        Map<String, Object> object = new LinkedHashMap<>();
        skipSpace();
        if (at < text.length() && text.charAt(at) == '}') {
          at++;
          depth--;
          return object;
        }
        while (true) {
          skipSpace();
          if (at >= text.length() || text.charAt(at) != '"') {
            throw error("Expecting property name enclosed in double quotes");
          }
          String key = string();
          skipSpace();
          if (at >= text.length() || text.charAt(at) != ':') {
            throw error("Expecting ':' delimiter");
          }
          at++;
          skipSpace();
          if (object.containsKey(key)) {
            throw error("duplicate key " + key);
          }
          object.put(key, value());
          skipSpace();
          if (at < text.length() && text.charAt(at) == ',') {
            at++;
            continue;
          }
          if (at < text.length() && text.charAt(at) == '}') {
            at++;
            depth--;
            return object;
          }
          throw error("Expecting ',' delimiter");
        }
      }

      private List<Object> array() {
        enter();
        at++; // [
        List<Object> array = new ArrayList<>();
        skipSpace();
        if (at < text.length() && text.charAt(at) == ']') {
          at++;
          depth--;
          return array;
        }
        while (true) {
          skipSpace();
          array.add(value());
          skipSpace();
          if (at < text.length() && text.charAt(at) == ',') {
            at++;
            continue;
          }
          if (at < text.length() && text.charAt(at) == ']') {
            at++;
            depth--;
            return array;
          }
          throw error("Expecting ',' delimiter");
        }
      }

      private String string() {
        at++; // "
        StringBuilder out = new StringBuilder();
        while (true) {
          if (at >= text.length()) {
            throw error("Unterminated string");
          }
          char c = text.charAt(at++);
          if (c == '"') {
            return out.toString();
          }
          if (c < 0x20) {
            at--;
            throw error("Invalid control character");
          }
          if (c != '\\') {
            out.append(c);
            continue;
          }
          if (at >= text.length()) {
            throw error("Unterminated string");
          }
          char escaped = text.charAt(at++);
          switch (escaped) {
            case '"', '\\', '/' -> out.append(escaped);
            case 'b' -> out.append('\b');
            case 'f' -> out.append('\f');
            case 'n' -> out.append('\n');
            case 'r' -> out.append('\r');
            case 't' -> out.append('\t');
            case 'u' -> {
              if (at + 4 > text.length()) {
                throw error("Invalid \\uXXXX escape");
              }
              try {
                out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
              } catch (NumberFormatException e) {
                throw error("Invalid \\uXXXX escape");
              }
              at += 4;
            }
            default -> {
              at--;
              throw error("Invalid \\escape");
            }
          }
        }
      }

      private Double number() {
        int start = at;
        if (at < text.length() && text.charAt(at) == '-') {
          at++;
        }
        if (at < text.length() && text.charAt(at) == '0') {
          at++;
        } else if (!digits()) {
          at = start;
          throw error("Expecting value");
        }
        if (at < text.length() && text.charAt(at) == '.') {
          int point = at++;
          if (!digits()) {
            at = point; // `1.` is the number 1 followed by extra data, as in Python
          }
        }
        if (at < text.length() && (text.charAt(at) == 'e' || text.charAt(at) == 'E')) {
          int exponent = at++;
          if (at < text.length() && (text.charAt(at) == '+' || text.charAt(at) == '-')) {
            at++;
          }
          if (!digits()) {
            at = exponent;
          }
        }
        return Double.parseDouble(text.substring(start, at));
      }

      private boolean digits() {
        int start = at;
        while (at < text.length() && Character.isDigit(text.charAt(at)) && text.charAt(at) < 0x80) {
          at++;
        }
        return at > start;
      }
    }
  }
}

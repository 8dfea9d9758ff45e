package dagger.jobs.codec;

import static dagger.jobs.codec.WellKnownTypes.DURATION;
import static dagger.jobs.codec.WellKnownTypes.JSON_TYPES;
import static dagger.jobs.codec.WellKnownTypes.TIMESTAMP;
import static dagger.jobs.codec.WellKnownTypes.WRAPPERS;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumDescriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.OneofDescriptor;
import com.google.protobuf.WireFormat;
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
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.StringJoiner;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import java.util.function.ToLongFunction;
import java.util.stream.IntStream;
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
 * order (the Python runtime writes them in its map's order).
 *
 * <p>Rows are written straight to the wire: each field's writer, planned once per input type, converts its
 * column's value and writes the tag and the value to a {@link CodedOutputStream}; no message object is
 * built. A length-delimited value (a nested message, a map entry, packed elements) is written into a buffer
 * of its nesting depth first, as its length comes before it; the buffers are reused from row to row.
 * Descriptors are not serializable: the encoder ships the descriptor set's bytes and plans its writers on
 * first use, once per executor.
 */
public final class ProtobufRowEncoder implements UDF1<Row, byte[]> {
  private static final long serialVersionUID = 1L;

  private final byte[] descriptorSet;
  private final String messageName;
  private final StructType inputType;
  private transient RowWriter writer;

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
    if (writer == null) {
      prepare();
    }
    return writer.encode(row);
  }

  private void prepare() {
    writer = plan(ProtobufRowDecoder.findMessage(descriptorSet, messageName), inputType);
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

  /** Writes one field, its tag and its value, from its column's value (never null). */
  @FunctionalInterface
  private interface FieldWriter {
    void write(CodedOutputStream out, Object value, Buffers buffers) throws IOException;
  }

  /** A field of the message, the column value it is written from, and its writer. */
  private record Field(FieldDescriptor descriptor, Function<Row, Object> get, FieldWriter writer) {}

  private static RowWriter plan(Descriptor message, StructType input) {
    Map<String, Column> columns = columnsByField(message, input);
    List<Field> fields = new ArrayList<>();
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
      FieldWriter writer = conformField(field, column.type(), field.getName());
      if (writer != null) {
        fields.add(new Field(field, column.get(), writer));
      }
    }
    List<Field> json = new ArrayList<>();
    for (FieldDescriptor field : jsonFields) {
      Column column = columns.get(field.getName());
      if (column.type() instanceof NullType) {
        continue;
      }
      if (!(column.type() instanceof StringType)) {
        throw mismatch(
            field.getName(), column.type(), field, protoTypeName(field, false), " (expects a JSON string)");
      }
      JsonMessages messages = new JsonMessages(field.getMessageType());
      int number = field.getNumber();
      String name = field.getName();
      json.add(new Field(field, column.get(),
          (out, text, buffers) -> messages.write(out, number, (String) text, name, buffers)));
    }
    return new RowWriter(new MessageFields(fields), json.toArray(new Field[0]));
  }

  /** The encoder of one input type: the message's fields, then its JSON fields appended after them. */
  private static final class RowWriter implements Content {
    private final MessageFields fields;
    private final Field[] jsonFields;
    /** The buffers between rows. A row takes them, so two threads sharing the encoder never share them. */
    private final AtomicReference<Buffers> idle = new AtomicReference<>();

    RowWriter(MessageFields fields, Field[] jsonFields) {
      this.fields = fields;
      this.jsonFields = jsonFields;
    }

    byte[] encode(Row row) {
      Buffers buffers = idle.getAndSet(null);
      if (buffers == null) {
        buffers = new Buffers();
      }
      try {
        return buffers.fill(this, row).toByteArray();
      } catch (IOException e) {
        throw new UncheckedIOException(e); // not expected: the buffers grow
      } finally {
        idle.set(buffers);
      }
    }

    @Override
    public boolean write(CodedOutputStream out, Object value, Buffers buffers) throws IOException {
      Row row = (Row) value;
      fields.write(out, row, buffers);
      for (Field json : jsonFields) {
        Object text = json.get().apply(row);
        if (text != null) {
          json.writer().write(out, text, buffers);
        }
      }
      return true;
    }
  }

  /**
   * The fields of one message type a row fills, written in field-number order, as protobuf writes them.
   * They are written as declared when that is their number order: the order in which a row's values are
   * converted, and so which of several bad values raises the error, is the declaration order.
   */
  private static final class MessageFields {
    private final Field[] fields;
    /** The field indices in number order, when the fields must be reordered; null when not. */
    private final int[] numberOrder;

    MessageFields(List<Field> fields) {
      this.fields = fields.toArray(new Field[0]);
      boolean reorder = false;
      Set<OneofDescriptor> oneofs = new HashSet<>();
      for (int i = 0; i < this.fields.length; i++) {
        FieldDescriptor field = this.fields[i].descriptor();
        reorder |= i > 0 && field.getNumber() < this.fields[i - 1].descriptor().getNumber();
        reorder |= field.getContainingOneof() != null && !oneofs.add(field.getContainingOneof());
      }
      numberOrder = !reorder ? null : IntStream.range(0, this.fields.length).boxed()
          .sorted(Comparator.comparingInt(i -> this.fields[i].descriptor().getNumber()))
          .mapToInt(Integer::intValue).toArray();
    }

    void write(CodedOutputStream out, Row row, Buffers buffers) throws IOException {
      if (numberOrder != null) {
        writeReordered(out, row, buffers);
        return;
      }
      for (Field field : fields) {
        Object value = field.get().apply(row);
        if (value != null) {
          field.writer().write(out, value, buffers);
        }
      }
    }

    /**
     * Fields declared out of number order, or several filling one oneof: each is written into a buffer in
     * declaration order, then copied out in number order. Of the fields of one oneof, only the last written
     * is kept: setting one clears the others.
     */
    private void writeReordered(CodedOutputStream out, Row row, Buffers buffers) throws IOException {
      int[] ends = new int[fields.length];
      Buffer written = buffers.fill((declared, value, nested) -> {
        for (int i = 0; i < fields.length; i++) {
          Object fieldValue = fields[i].get().apply((Row) value);
          if (fieldValue != null) {
            fields[i].writer().write(declared, fieldValue, nested);
          }
          ends[i] = declared.getTotalBytesWritten();
        }
        return true;
      }, row);
      boolean[] kept = new boolean[fields.length];
      Set<OneofDescriptor> set = new HashSet<>();
      for (int i = fields.length - 1; i >= 0; i--) {
        OneofDescriptor oneof = fields[i].descriptor().getContainingOneof();
        kept[i] = ends[i] > (i == 0 ? 0 : ends[i - 1]) && (oneof == null || set.add(oneof));
      }
      for (int i : numberOrder) {
        if (kept[i]) {
          int from = i == 0 ? 0 : ends[i - 1];
          out.writeRawBytes(written.bytes, from, ends[i] - from);
        }
      }
    }
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
  // Buffers for length-delimited values
  // ---------------------------------------------------------------------------------------------------

  /** Writes a length-delimited value's bytes into a buffer: false when it stands for nothing at all. */
  @FunctionalInterface
  private interface Content {
    boolean write(CodedOutputStream out, Object value, Buffers buffers) throws IOException;
  }

  /**
   * The buffers of one row, one per nesting depth: a length-delimited value is written into the buffer of
   * its depth, then copied after its tag and length into its parent's.
   */
  private static final class Buffers {
    private static final int MAX_SIZE = Integer.MAX_VALUE - 8;
    private final List<Buffer> depths = new ArrayList<>();
    private int depth;

    /**
     * The next depth's buffer, holding what {@code content} writes for {@code value}, or null when that is
     * nothing at all. A buffer too small is grown and written again: writing has no other effect.
     */
    Buffer fill(Content content, Object value) throws IOException {
      int at = depth;
      if (at == depths.size()) {
        depths.add(new Buffer());
      }
      Buffer buffer = depths.get(at);
      depth = at + 1;
      try {
        while (true) {
          CodedOutputStream out = CodedOutputStream.newInstance(buffer.bytes);
          try {
            if (!content.write(out, value, this)) {
              return null;
            }
            buffer.size = out.getTotalBytesWritten();
            return buffer;
          } catch (CodedOutputStream.OutOfSpaceException full) {
            if (buffer.bytes.length == MAX_SIZE) {
              throw full;
            }
            buffer.bytes = new byte[(int) Math.min(2L * buffer.bytes.length, MAX_SIZE)];
          }
        }
      } finally {
        depth = at;
      }
    }
  }

  /** One depth's bytes: kept until the depth is filled again. */
  private static final class Buffer {
    private byte[] bytes = new byte[256];
    private int size;

    /** Its bytes as the value of field {@code number}, after the tag and their length. */
    void writeDelimited(CodedOutputStream target, int number) throws IOException {
      target.writeTag(number, WireFormat.WIRETYPE_LENGTH_DELIMITED);
      target.writeUInt32NoTag(size);
      target.writeRawBytes(bytes, 0, size);
    }

    /** Its bytes as a group, field {@code number}. */
    void writeGroup(CodedOutputStream target, int number) throws IOException {
      target.writeTag(number, WireFormat.WIRETYPE_START_GROUP);
      target.writeRawBytes(bytes, 0, size);
      target.writeTag(number, WireFormat.WIRETYPE_END_GROUP);
    }

    byte[] toByteArray() {
      return Arrays.copyOf(bytes, size);
    }
  }

  // ---------------------------------------------------------------------------------------------------
  // Field writers: a non-null Spark value converted and written
  // ---------------------------------------------------------------------------------------------------

  /** The writer of a field from a column of {@code type}; null when nothing is ever written (a NULL type). */
  private static FieldWriter conformField(FieldDescriptor field, DataType type, String column) {
    if (type instanceof NullType) { // `SELECT NULL AS x`: leave the field unset
      return null;
    }
    if (field.isMapField()) {
      return conformMap(field, type, column);
    }
    int number = field.getNumber();
    boolean isMessage = field.getJavaType() == FieldDescriptor.JavaType.MESSAGE;
    if (field.isRepeated()) {
      if (!(type instanceof ArrayType array)) {
        throw mismatch(column, type, field, protoTypeName(field, false), "");
      }
      if (isMessage) {
        MessageValue element = conformMessage(field, array.elementType(), column + "[]");
        boolean group = isGroup(field);
        return (out, value, buffers) -> {
          for (Object item : asList(value)) {
            if (item == null || !element.write(out, number, group, item, buffers)) {
              writeEmptyMessage(out, number, group); // the Python encoder's NULL element
            }
          }
        };
      }
      Scalar element = conformScalar(field, field, array.elementType(), column + "[]");
      // The Python encoder writes a NULL element as 0 or false, and leaves it out of strings, bytes, enums.
      boolean nullAsDefault = switch (field.getJavaType()) {
        case STRING, BYTE_STRING, ENUM -> false;
        default -> true;
      };
      if (field.isPacked()) {
        Content elements = (out, items, buffers) -> {
          for (Object item : (List<?>) items) {
            if (item != null) {
              element.writeNoTag(out, item);
            } else if (nullAsDefault) {
              element.writeDefaultNoTag(out);
            }
          }
          return true;
        };
        return (out, value, buffers) -> {
          List<?> items = asList(value);
          if (items.isEmpty()) {
            return;
          }
          Buffer packed = buffers.fill(elements, items);
          if (packed.size > 0) { // not when every element was left out
            packed.writeDelimited(out, number);
          }
        };
      }
      return (out, value, buffers) -> {
        for (Object item : asList(value)) {
          if (item != null) {
            element.write(out, number, item, false);
          } else if (nullAsDefault) {
            element.writeDefault(out, number);
          }
        }
      };
    }
    if (isMessage) {
      MessageValue message = conformMessage(field, type, column);
      boolean group = isGroup(field);
      return (out, value, buffers) -> message.write(out, number, group, value, buffers);
    }
    Scalar scalar = conformScalar(field, field, type, column);
    boolean skipDefault = !field.hasPresence(); // as protobuf writes a field without presence
    return (out, value, buffers) -> scalar.write(out, number, value, skipDefault);
  }

  private static boolean isGroup(FieldDescriptor field) {
    return field.getType() == FieldDescriptor.Type.GROUP;
  }

  private static void writeEmptyMessage(CodedOutputStream out, int number, boolean group) throws IOException {
    if (group) {
      out.writeTag(number, WireFormat.WIRETYPE_START_GROUP);
      out.writeTag(number, WireFormat.WIRETYPE_END_GROUP);
    } else {
      out.writeTag(number, WireFormat.WIRETYPE_LENGTH_DELIMITED);
      out.writeUInt32NoTag(0);
    }
  }

  private static FieldWriter conformMap(FieldDescriptor field, DataType type, String column) {
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
    Scalar key = conformScalar(keyField, keyField, keyType, column + " key");
    int valueNumber = valueField.getNumber();
    FieldWriter item;
    if (valueField.getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
      MessageValue message = conformMessage(valueField, valueType, column + " value");
      item = (out, value, buffers) -> message.write(out, valueNumber, false, value, buffers); // never a group
    } else {
      Scalar scalar = conformScalar(valueField, valueField, valueType, column + " value");
      item = (out, value, buffers) -> scalar.write(out, valueNumber, value, true);
    }
    return new MapEntries(field.getNumber(), entryList, key, keyField, item, column);
  }

  /**
   * The entries of a map field, from a map or Dagger's list of key-value structs. A default scalar value is
   * left out of an entry, as the Python encoder writes it, and so is a NULL value (an entry of the key
   * only), and a default key but for a string one.
   */
  private static final class MapEntries implements FieldWriter {
    private final int number;
    private final boolean entryList;
    private final Scalar key;
    private final int keyNumber;
    private final boolean skipDefaultKey;
    private final FieldWriter value;
    private final String nullKeyError;
    private final Content entry = this::writeEntry;

    MapEntries(int number, boolean entryList, Scalar key, FieldDescriptor keyField, FieldWriter value,
        String column) {
      this.number = number;
      this.entryList = entryList;
      this.key = key;
      this.keyNumber = keyField.getNumber();
      this.skipDefaultKey = keyField.getJavaType() != FieldDescriptor.JavaType.STRING;
      this.value = value;
      this.nullKeyError = "column " + repr(column) + ": Map cannot contain NULL valued keys";
    }

    @Override
    public void write(CodedOutputStream out, Object map, Buffers buffers) throws IOException {
      for (Object pair : entryList ? asList(map) : asMap(map).entrySet()) {
        if (pair == null || key(pair) == null) {
          throw new IllegalArgumentException(nullKeyError);
        }
        buffers.fill(entry, pair).writeDelimited(out, number);
      }
    }

    private boolean writeEntry(CodedOutputStream out, Object pair, Buffers buffers) throws IOException {
      key.write(out, keyNumber, key(pair), skipDefaultKey);
      Object v = entryList ? ((Row) pair).get(1) : ((Map.Entry<?, ?>) pair).getValue();
      if (v != null) {
        value.write(out, v, buffers);
      }
      return true;
    }

    private Object key(Object pair) {
      return entryList ? ((Row) pair).get(0) : ((Map.Entry<?, ?>) pair).getKey();
    }
  }

  private static boolean isEntryList(DataType type) {
    if (type instanceof ArrayType array && array.elementType() instanceof StructType struct) {
      StructField[] fields = struct.fields();
      return fields.length == 2 && fields[0].name().equals("key") && fields[1].name().equals("value");
    }
    return false;
  }

  // ---------------------------------------------------------------------------------------------------
  // Message values
  // ---------------------------------------------------------------------------------------------------

  /** The values of a message-typed field (or its elements): messages written from Spark values. */
  private abstract static class MessageValue {
    private final Content fields = this::writeFields;

    /**
     * Writes the fields of the message {@code value} stands for; false, having written nothing, when it
     * stands for no message (a value in Dagger's layout with a NULL part).
     */
    abstract boolean writeFields(CodedOutputStream out, Object value, Buffers buffers) throws IOException;

    /** Writes the message as field {@code number}, length-delimited or a group; false when there is none. */
    boolean write(CodedOutputStream out, int number, boolean group, Object value, Buffers buffers)
        throws IOException {
      Buffer message = buffers.fill(fields, value);
      if (message != null && group) {
        message.writeGroup(out, number);
      } else if (message != null) {
        message.writeDelimited(out, number);
      }
      return message != null;
    }
  }

  /** One value of a message-typed field (an element of a repeated one): the field seen as singular. */
  private static MessageValue conformMessage(FieldDescriptor field, DataType type, String column) {
    Descriptor message = field.getMessageType();
    String name = message.getFullName();
    if (JSON_TYPES.contains(name)) {
      throw new IllegalArgumentException("column " + repr(column) + ": " + name
          + " fields are written only at the top level of the output message, not inside "
          + field.getContainingType().getFullName());
    }
    boolean timestamp = name.equals(TIMESTAMP);
    if ((timestamp || name.equals(DURATION)) && isSecondsNanos(type)) {
      return secondsNanosStruct(message, (StructType) type, field, column);
    }
    if (WRAPPERS.contains(name)) {
      FieldDescriptor wrapped = message.findFieldByName("value");
      if (type instanceof StructType struct) { // Dagger's layout: STRUCT<value>
        StructField[] fields = struct.fields();
        if (fields.length != 1 || !fields[0].name().equals("value")) {
          throw mismatch(
              column, type, field, protoTypeName(field, true), " (expects a value or a STRUCT<value>)");
        }
        return new Wrapper(conformScalar(field, wrapped, fields[0].dataType(), column), wrapped, true);
      }
      return new Wrapper(conformScalar(field, wrapped, type, column), wrapped, false);
    }
    if (timestamp) {
      if (!(type instanceof TimestampType || type instanceof TimestampNTZType)) {
        throw mismatch(column, type, field, protoTypeName(field, true), "");
      }
      return new SecondsNanos(message, false, ProtobufRowEncoder::micros);
    }
    if (name.equals(DURATION)) {
      if (!(type instanceof DayTimeIntervalType)) {
        throw mismatch(column, type, field, protoTypeName(field, true), "");
      }
      return new SecondsNanos(message, false, value -> {
        Duration duration = (Duration) value;
        return duration.getSeconds() * 1_000_000L + duration.getNano() / 1000;
      });
    }
    return nestedMessage(field, message, type, column);
  }

  /** A message of its own fields, from a struct column. */
  private static MessageValue nestedMessage(
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
    List<Field> children = new ArrayList<>();
    for (FieldDescriptor child : message.getFields()) {
      Integer index = present.get(child.getName());
      if (index != null) {
        FieldWriter writer = conformField(child, fields[index].dataType(), column + "." + child.getName());
        if (writer != null) {
          children.add(new Field(child, row -> row.get(index), writer));
        }
      }
    }
    MessageFields messageFields = new MessageFields(children);
    return new MessageValue() {
      @Override
      boolean writeFields(CodedOutputStream out, Object value, Buffers buffers) throws IOException {
        messageFields.write(out, (Row) value, buffers);
        return true; // a struct is a message, even when all its fields are NULL
      }
    };
  }

  /** A wrapper holding its value, which is written even when it is the default, as Python writes it. */
  private static final class Wrapper extends MessageValue {
    private final Scalar scalar;
    private final int number;
    private final boolean daggerLayout; // STRUCT<value>: NULL inside is no message

    Wrapper(Scalar scalar, FieldDescriptor wrapped, boolean daggerLayout) {
      this.scalar = scalar;
      this.number = wrapped.getNumber();
      this.daggerLayout = daggerLayout;
    }

    @Override
    boolean writeFields(CodedOutputStream out, Object value, Buffers buffers) throws IOException {
      Object wrapped = daggerLayout ? ((Row) value).get(0) : value;
      if (wrapped == null) {
        return false;
      }
      scalar.write(out, number, wrapped, false);
      return true;
    }
  }

  private static boolean isSecondsNanos(DataType type) {
    if (type instanceof StructType struct) {
      StructField[] fields = struct.fields();
      return fields.length == 2 && fields[0].name().equals("seconds") && fields[1].name().equals("nanos");
    }
    return false;
  }

  /** Dagger's STRUCT<seconds, nanos>, at microsecond precision as the Python encoder reads it. */
  private static MessageValue secondsNanosStruct(
      Descriptor message, StructType type, FieldDescriptor field, String column) {
    for (StructField part : type.fields()) {
      if (!isIntegral(part.dataType())) {
        throw mismatch(column, type, field, protoTypeName(field, true), "");
      }
    }
    return new SecondsNanos(message, true, value -> {
      Row row = (Row) value;
      return ((Number) row.get(0)).longValue() * 1_000_000L + ((Number) row.get(1)).longValue() / 1000;
    });
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

  /**
   * A Timestamp (seconds floored, nanos positive) or a Duration (both with the sign) from microseconds; its
   * size is known from the two numbers, so it is written without a buffer.
   */
  private static final class SecondsNanos extends MessageValue {
    private final boolean timestamp;
    private final boolean daggerLayout; // STRUCT<seconds, nanos>: a NULL part is no message
    private final ToLongFunction<Object> micros;
    private final int secondsNumber;
    private final int nanosNumber;

    SecondsNanos(Descriptor message, boolean daggerLayout, ToLongFunction<Object> micros) {
      this.timestamp = message.getFullName().equals(TIMESTAMP);
      this.daggerLayout = daggerLayout;
      this.micros = micros;
      this.secondsNumber = message.findFieldByName("seconds").getNumber();
      this.nanosNumber = message.findFieldByName("nanos").getNumber();
    }

    @Override
    boolean write(CodedOutputStream out, int number, boolean group, Object value, Buffers buffers)
        throws IOException {
      if (group) {
        return super.write(out, number, group, value, buffers);
      }
      if (isNull(value)) {
        return false;
      }
      long micros = this.micros.applyAsLong(value);
      long seconds = seconds(micros);
      int nanos = nanos(micros, seconds);
      out.writeTag(number, WireFormat.WIRETYPE_LENGTH_DELIMITED);
      out.writeUInt32NoTag((seconds == 0 ? 0 : CodedOutputStream.computeInt64Size(secondsNumber, seconds))
          + (nanos == 0 ? 0 : CodedOutputStream.computeInt32Size(nanosNumber, nanos)));
      writeParts(out, seconds, nanos);
      return true;
    }

    @Override
    boolean writeFields(CodedOutputStream out, Object value, Buffers buffers) throws IOException {
      if (isNull(value)) {
        return false;
      }
      long micros = this.micros.applyAsLong(value);
      long seconds = seconds(micros);
      writeParts(out, seconds, nanos(micros, seconds));
      return true;
    }

    private boolean isNull(Object value) {
      return daggerLayout && (((Row) value).isNullAt(0) || ((Row) value).isNullAt(1));
    }

    private long seconds(long micros) {
      return timestamp ? Math.floorDiv(micros, 1_000_000L) : micros / 1_000_000L;
    }

    private static int nanos(long micros, long seconds) {
      return (int) (micros - seconds * 1_000_000L) * 1000;
    }

    /** Both parts but a zero, which protobuf leaves out of a field without presence. */
    private void writeParts(CodedOutputStream out, long seconds, int nanos) throws IOException {
      if (seconds != 0) {
        out.writeInt64(secondsNumber, seconds);
      }
      if (nanos != 0) {
        out.writeInt32(nanosNumber, nanos);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------------
  // Scalars and enums
  // ---------------------------------------------------------------------------------------------------

  /** A scalar field's values: a Spark value converted into the field's type and written in its encoding. */
  private interface Scalar {
    /** Writes {@code value} as field {@code number}; a default value not when {@code skipDefault}. */
    void write(CodedOutputStream out, int number, Object value, boolean skipDefault) throws IOException;

    /** {@code value} without a tag, as an element of a packed field (numbers, bools and enums). */
    default void writeNoTag(CodedOutputStream out, Object value) throws IOException {
      throw new UnsupportedOperationException("not a packed type");
    }

    /** The type's default (0 or false) as field {@code number}. */
    default void writeDefault(CodedOutputStream out, int number) throws IOException {
      throw new UnsupportedOperationException("no default written");
    }

    /** The type's default without a tag. */
    default void writeDefaultNoTag(CodedOutputStream out) throws IOException {
      throw new UnsupportedOperationException("no default written");
    }
  }

  private static final Scalar STRING = (out, number, value, skipDefault) -> {
    String text = (String) value;
    if (!skipDefault || !text.isEmpty()) {
      out.writeString(number, text);
    }
  };

  private static final Scalar BYTES = (out, number, value, skipDefault) -> {
    byte[] bytes = (byte[]) value;
    if (!skipDefault || bytes.length > 0) {
      out.writeByteArray(number, bytes);
    }
  };

  /**
   * Numbers, bools and enums: a Spark value converted into the bits of the field's type (an integer, sign
   * extended; a float's or a double's raw bits; 1 or 0; an enum's number), then written in its encoding.
   */
  private static final class Bits implements Scalar {
    private final FieldDescriptor.Type type;
    private final ToLongFunction<Object> convert;
    /** The bits that must be 0 in a default: -0.0 is a default too, as the Python encoder sees it. */
    private final long defaultMask;

    Bits(FieldDescriptor.Type type, ToLongFunction<Object> convert) {
      this.type = type;
      this.convert = convert;
      this.defaultMask = switch (type) {
        case FLOAT -> 0x7fff_ffffL;
        case DOUBLE -> Long.MAX_VALUE;
        default -> -1L;
      };
    }

    @Override
    public void write(CodedOutputStream out, int number, Object value, boolean skipDefault)
        throws IOException {
      long bits = convert.applyAsLong(value);
      if (!skipDefault || (bits & defaultMask) != 0) {
        writeBits(out, number, bits);
      }
    }

    @Override
    public void writeNoTag(CodedOutputStream out, Object value) throws IOException {
      writeBitsNoTag(out, convert.applyAsLong(value));
    }

    @Override
    public void writeDefault(CodedOutputStream out, int number) throws IOException {
      writeBits(out, number, 0);
    }

    @Override
    public void writeDefaultNoTag(CodedOutputStream out) throws IOException {
      writeBitsNoTag(out, 0);
    }

    private void writeBits(CodedOutputStream out, int number, long bits) throws IOException {
      switch (type) {
        case INT32 -> out.writeInt32(number, (int) bits);
        case SINT32 -> out.writeSInt32(number, (int) bits);
        case SFIXED32 -> out.writeSFixed32(number, (int) bits);
        case UINT32 -> out.writeUInt32(number, (int) bits);
        case FIXED32, FLOAT -> out.writeFixed32(number, (int) bits);
        case INT64 -> out.writeInt64(number, bits);
        case SINT64 -> out.writeSInt64(number, bits);
        case SFIXED64 -> out.writeSFixed64(number, bits);
        case UINT64 -> out.writeUInt64(number, bits);
        case FIXED64, DOUBLE -> out.writeFixed64(number, bits);
        case BOOL -> out.writeBool(number, bits != 0);
        case ENUM -> out.writeEnum(number, (int) bits);
        default -> throw new IllegalStateException("not a number type: " + type);
      }
    }

    private void writeBitsNoTag(CodedOutputStream out, long bits) throws IOException {
      switch (type) {
        case INT32 -> out.writeInt32NoTag((int) bits);
        case SINT32 -> out.writeSInt32NoTag((int) bits);
        case SFIXED32 -> out.writeSFixed32NoTag((int) bits);
        case UINT32 -> out.writeUInt32NoTag((int) bits);
        case FIXED32, FLOAT -> out.writeFixed32NoTag((int) bits);
        case INT64 -> out.writeInt64NoTag(bits);
        case SINT64 -> out.writeSInt64NoTag(bits);
        case SFIXED64 -> out.writeSFixed64NoTag(bits);
        case UINT64 -> out.writeUInt64NoTag(bits);
        case FIXED64, DOUBLE -> out.writeFixed64NoTag(bits);
        case BOOL -> out.writeBoolNoTag(bits != 0);
        case ENUM -> out.writeEnumNoTag((int) bits);
        default -> throw new IllegalStateException("not a number type: " + type);
      }
    }
  }

  /**
   * A scalar into {@code target}'s type; {@code field} names the field in errors (a wrapper field for its
   * wrapped value). Integers are range-checked like Arrow's safe casts, except int64 into uint64, which wraps
   * back what decoding wrapped; floats narrow as Java does.
   */
  private static Scalar conformScalar(
      FieldDescriptor field, FieldDescriptor target, DataType source, String column) {
    if (field.getJavaType() == FieldDescriptor.JavaType.ENUM) {
      return conformEnum(field, source, column);
    }
    String fieldType = protoTypeName(field, true);
    FieldDescriptor.Type kind = target.getType();
    switch (target.getJavaType()) {
      case STRING:
        if (source instanceof StringType) {
          return STRING;
        }
        break;
      case BYTE_STRING:
        if (source instanceof BinaryType) {
          return BYTES;
        }
        break;
      case BOOLEAN:
        if (source instanceof BooleanType) {
          return new Bits(kind, value -> (Boolean) value ? 1 : 0);
        }
        break;
      case FLOAT:
      case DOUBLE:
        boolean isFloat = target.getJavaType() == FieldDescriptor.JavaType.FLOAT;
        if (source instanceof FloatType || source instanceof DoubleType) {
          return isFloat
              ? new Bits(kind, value -> Float.floatToRawIntBits(((Number) value).floatValue()))
              : new Bits(kind, value -> Double.doubleToRawLongBits(((Number) value).doubleValue()));
        }
        if (isIntegral(source)) {
          long exact = isFloat ? 1L << 24 : 1L << 53; // integers a float holds exactly
          long[] range = intersect(integralRange(source), new long[] {-exact, exact});
          return new Bits(kind, value -> {
            long number = checkedRange(((Number) value).longValue(), range, column, source, field, fieldType);
            return isFloat ? Float.floatToRawIntBits(number) : Double.doubleToRawLongBits(number);
          });
        }
        if (source instanceof DecimalType) {
          return isFloat
              ? new Bits(kind, value -> Float.floatToRawIntBits(((BigDecimal) value).floatValue()))
              : new Bits(kind, value -> Double.doubleToRawLongBits(((BigDecimal) value).doubleValue()));
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
            return new Bits(kind, value -> (Long) value);
          }
          long[] range = intersect(integralRange(source), new long[] {
              low.max(BigInteger.valueOf(Long.MIN_VALUE)).longValue(),
              high.min(BigInteger.valueOf(Long.MAX_VALUE)).longValue()});
          return new Bits(kind, value -> {
            long number = checkedRange(((Number) value).longValue(), range, column, source, field, fieldType);
            return isInt ? (int) number : number;
          });
        }
        if (source instanceof DecimalType) {
          return new Bits(kind, value -> {
            BigDecimal decimal = (BigDecimal) value;
            if (decimal.signum() != 0 && decimal.stripTrailingZeros().scale() > 0) {
              throw mismatch(
                  column, source, field, fieldType, ": Rescaling Decimal value would cause data loss");
            }
            BigInteger number = decimal.toBigInteger();
            if (number.compareTo(low) < 0 || number.compareTo(high) > 0) {
              throw mismatch(column, source, field, fieldType, ": Integer value out of bounds");
            }
            return isInt ? number.intValue() : number.longValue();
          });
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
  private static Scalar conformEnum(FieldDescriptor field, DataType source, String column) {
    EnumDescriptor enumType = field.getEnumType();
    if (isIntegral(source)) {
      TreeSet<Integer> numbers = new TreeSet<>();
      enumType.getValues().forEach(value -> numbers.add(value.getNumber()));
      return new Bits(FieldDescriptor.Type.ENUM, value -> {
        long number = ((Number) value).longValue();
        EnumValueDescriptor known = number == (int) number ? enumType.findValueByNumber((int) number) : null;
        if (known == null) {
          StringJoiner list = new StringJoiner(", ", "[", "]");
          numbers.forEach(n -> list.add(n.toString()));
          throw new IllegalArgumentException("column " + repr(column) + ": " + number
              + " is not a number of enum " + enumType.getFullName() + " (field " + field.getName()
              + "; numbers: " + list + ")");
        }
        return known.getNumber();
      });
    }
    if (source instanceof StringType) {
      // The names looked up here rather than with findValueByName, which builds the value's full name.
      Map<String, Integer> numbers = new HashMap<>();
      enumType.getValues().forEach(value -> numbers.put(value.getName(), value.getNumber()));
      return new Bits(FieldDescriptor.Type.ENUM, value -> {
        Integer known = numbers.get((String) value);
        if (known == null) {
          StringJoiner names = new StringJoiner(", ");
          enumType.getValues().forEach(v -> names.add(v.getName()));
          throw new IllegalArgumentException("column " + repr(column) + ": " + repr((String) value)
              + " is not a value of enum " + enumType.getFullName() + " (field " + field.getName()
              + "; values: " + names + ")");
        }
        return known;
      });
    }
    throw mismatch(column, source, field, protoTypeName(field, true), "");
  }

  // ---------------------------------------------------------------------------------------------------
  // Helpers
  // ---------------------------------------------------------------------------------------------------

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
   * JSON text parsed and written as a Struct, Value or ListValue, as Python's {@code json_format.Parse}
   * reads it: numbers as doubles (NaN and Infinity accepted, as Python's json does), a duplicate key an
   * error. A Struct's entries are written in the text's order, each with its key (an empty one too) and its
   * value; a Value holds the one field of its kind, written even when it is the default (a oneof's).
   */
  private static final class JsonMessages {
    private static final int MAX_DEPTH = 100;
    private final Descriptor target;
    private final Descriptor struct;
    private final Descriptor list;
    private final int structFields;
    private final int entryKey;
    private final int entryValue;
    private final int listValues;
    private final int nullValue;
    private final int numberValue;
    private final int stringValue;
    private final int boolValue;
    private final int structValue;
    private final int listValue;

    JsonMessages(Descriptor target) {
      this.target = target;
      Descriptor value = switch (target.getFullName()) {
        case "google.protobuf.Struct" ->
            target.findFieldByName("fields").getMessageType().findFieldByName("value").getMessageType();
        case "google.protobuf.ListValue" -> target.findFieldByName("values").getMessageType();
        default -> target;
      };
      this.struct = value.findFieldByName("struct_value").getMessageType();
      this.list = value.findFieldByName("list_value").getMessageType();
      FieldDescriptor fields = struct.findFieldByName("fields");
      this.structFields = fields.getNumber();
      this.entryKey = fields.getMessageType().findFieldByName("key").getNumber();
      this.entryValue = fields.getMessageType().findFieldByName("value").getNumber();
      this.listValues = list.findFieldByName("values").getNumber();
      this.nullValue = value.findFieldByName("null_value").getNumber();
      this.numberValue = value.findFieldByName("number_value").getNumber();
      this.stringValue = value.findFieldByName("string_value").getNumber();
      this.boolValue = value.findFieldByName("bool_value").getNumber();
      this.structValue = value.findFieldByName("struct_value").getNumber();
      this.listValue = value.findFieldByName("list_value").getNumber();
    }

    /** The message {@code text} holds, as field {@code number}. */
    void write(CodedOutputStream out, int number, String text, String column, Buffers buffers)
        throws IOException {
      Object parsed;
      try {
        parsed = new Parser(text).document();
        if (target == struct && !(parsed instanceof Map)) {
          throw new JsonError("Struct must be in a JSON object");
        }
        if (target == list && !(parsed instanceof List)) {
          throw new JsonError("ListValue must be in a JSON array");
        }
      } catch (JsonError error) {
        int end = text.offsetByCodePoints(0, Math.min(80, text.codePointCount(0, text.length())));
        throw new IllegalArgumentException("column " + repr(column) + ": " + repr(text.substring(0, end))
            + " is not JSON for a " + target.getFullName() + ": " + error.getMessage());
      }
      Content message =
          target == struct ? this::writeStruct : target == list ? this::writeList : this::writeValue;
      buffers.fill(message, parsed).writeDelimited(out, number);
    }

    private boolean writeStruct(CodedOutputStream out, Object object, Buffers buffers) throws IOException {
      for (Map.Entry<?, ?> member : ((Map<?, ?>) object).entrySet()) {
        buffers.fill(this::writeEntry, member).writeDelimited(out, structFields);
      }
      return true;
    }

    private boolean writeEntry(CodedOutputStream out, Object member, Buffers buffers) throws IOException {
      out.writeString(entryKey, (String) ((Map.Entry<?, ?>) member).getKey());
      buffers.fill(this::writeValue, ((Map.Entry<?, ?>) member).getValue()).writeDelimited(out, entryValue);
      return true;
    }

    private boolean writeList(CodedOutputStream out, Object array, Buffers buffers) throws IOException {
      for (Object item : (List<?>) array) {
        buffers.fill(this::writeValue, item).writeDelimited(out, listValues);
      }
      return true;
    }

    private boolean writeValue(CodedOutputStream out, Object parsed, Buffers buffers) throws IOException {
      if (parsed == NULL) {
        out.writeEnum(nullValue, 0);
      } else if (parsed instanceof Double number) {
        out.writeDouble(numberValue, number);
      } else if (parsed instanceof String text) {
        out.writeString(stringValue, text);
      } else if (parsed instanceof Boolean flag) {
        out.writeBool(boolValue, flag);
      } else if (parsed instanceof Map) {
        buffers.fill(this::writeStruct, parsed).writeDelimited(out, structValue);
      } else {
        buffers.fill(this::writeList, parsed).writeDelimited(out, listValue);
      }
      return true;
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

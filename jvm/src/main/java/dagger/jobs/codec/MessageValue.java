package dagger.jobs.codec;

import static dagger.jobs.codec.EncodingErrors.mismatch;
import static dagger.jobs.codec.EncodingErrors.protoTypeName;
import static dagger.jobs.codec.EncodingErrors.repr;
import static dagger.jobs.codec.WellKnownTypes.JSON_TYPES;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import dagger.jobs.codec.Buffers.Buffer;
import dagger.jobs.codec.Buffers.Content;
import dagger.jobs.codec.MessageFields.Field;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** The values of a message-typed field (or its elements): messages written from Spark values. */
abstract class MessageValue {
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

  /** One value of a message-typed field (an element of a repeated one): the field seen as singular. */
  static MessageValue of(FieldDescriptor field, DataType type, String column) {
    Descriptor message = field.getMessageType();
    String name = message.getFullName();
    if (JSON_TYPES.contains(name)) {
      throw new IllegalArgumentException("column " + repr(column) + ": " + name
          + " fields are written only at the top level of the output message, not inside "
          + field.getContainingType().getFullName());
    }
    MessageValue wellKnown = WellKnownValues.of(field, message, type, column);
    return wellKnown != null ? wellKnown : nestedMessage(field, message, type, column);
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
        FieldWriter writer = FieldWriters.of(child, fields[index].dataType(), column + "." + child.getName());
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
}

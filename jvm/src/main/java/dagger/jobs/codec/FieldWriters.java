package dagger.jobs.codec;

import static dagger.jobs.codec.EncodingErrors.mismatch;
import static dagger.jobs.codec.EncodingErrors.protoTypeName;
import static dagger.jobs.codec.SparkCollections.asList;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.WireFormat;
import dagger.jobs.codec.Buffers.Buffer;
import dagger.jobs.codec.Buffers.Content;
import java.io.IOException;
import java.util.List;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.NullType;

/**
 * The writer of a field by its cardinality: a singular value, a repeated field's elements one by one or
 * packed, or a map's entries ({@link MapEntries}); the values themselves are {@link MessageValue}s and
 * {@link Scalar}s.
 */
final class FieldWriters {
  private FieldWriters() {}

  /** The writer of a field from a column of {@code type}; null when nothing is ever written (a NULL type). */
  static FieldWriter of(FieldDescriptor field, DataType type, String column) {
    if (type instanceof NullType) { // `SELECT NULL AS x`: leave the field unset
      return null;
    }
    if (field.isMapField()) {
      return MapEntries.of(field, type, column);
    }
    int number = field.getNumber();
    boolean isMessage = field.getJavaType() == FieldDescriptor.JavaType.MESSAGE;
    if (field.isRepeated()) {
      if (!(type instanceof ArrayType array)) {
        throw mismatch(column, type, field, protoTypeName(field, false), "");
      }
      return isMessage
          ? repeatedMessages(field, array.elementType(), column)
          : repeatedScalars(field, array.elementType(), column);
    }
    if (isMessage) {
      MessageValue message = MessageValue.of(field, type, column);
      boolean group = isGroup(field);
      return (out, value, buffers) -> message.write(out, number, group, value, buffers);
    }
    Scalar scalar = ScalarConversions.of(field, field, type, column);
    boolean skipDefault = !field.hasPresence(); // as protobuf writes a field without presence
    return (out, value, buffers) -> scalar.write(out, number, value, skipDefault);
  }

  private static FieldWriter repeatedMessages(FieldDescriptor field, DataType elementType, String column) {
    int number = field.getNumber();
    MessageValue element = MessageValue.of(field, elementType, column + "[]");
    boolean group = isGroup(field);
    return (out, value, buffers) -> {
      for (Object item : asList(value)) {
        if (item == null || !element.write(out, number, group, item, buffers)) {
          writeEmptyMessage(out, number, group); // the Python encoder's NULL element
        }
      }
    };
  }

  private static FieldWriter repeatedScalars(FieldDescriptor field, DataType elementType, String column) {
    int number = field.getNumber();
    Scalar element = ScalarConversions.of(field, field, elementType, column + "[]");
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
        if (packed.size() > 0) { // not when every element was left out
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
}

package dagger.jobs.codec;

import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import java.util.Locale;
import java.util.StringJoiner;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The encoder's errors, worded as the Python encoder's word them, names and types included: the codec
 * tests expect the same message from both encoders.
 */
final class EncodingErrors {
  private EncodingErrors() {}

  /** A column whose type (or value, as {@code detail} says) cannot fill its field. */
  static IllegalArgumentException mismatch(
      String column, DataType source, FieldDescriptor field, String fieldType, String detail) {
    return new IllegalArgumentException("column " + repr(column) + ": type mismatch, " + sqlTypeName(source)
        + " cannot fill field " + field.getContainingType().getFullName() + "." + field.getName()
        + " of type " + fieldType + detail);
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
}

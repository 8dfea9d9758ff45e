package dagger.jobs.codec;

import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.DynamicMessage;
import java.math.BigDecimal;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * {@code google.protobuf.Struct}, {@code Value} and {@code ListValue} as the JSON text the Python codec
 * gives them: keys sorted, no spaces, non-ASCII characters escaped, numbers written as Python writes a
 * float. A column holds the same text whichever codec decoded it.
 */
final class WellKnownJson {
  private WellKnownJson() {}

  static String write(DynamicMessage message) {
    StringBuilder out = new StringBuilder();
    switch (message.getDescriptorForType().getFullName()) {
      case "google.protobuf.Struct" -> writeStruct(message, out);
      case "google.protobuf.ListValue" -> writeList(message, out);
      default -> writeValue(message, out);
    }
    return out.toString();
  }

  private static void writeStruct(DynamicMessage struct, StringBuilder out) {
    FieldDescriptor fields = struct.getDescriptorForType().findFieldByName("fields");
    Map<String, DynamicMessage> sorted = new TreeMap<>();
    for (Object entry : (List<?>) struct.getField(fields)) {
      DynamicMessage pair = (DynamicMessage) entry;
      FieldDescriptor key = pair.getDescriptorForType().findFieldByName("key");
      FieldDescriptor value = pair.getDescriptorForType().findFieldByName("value");
      sorted.put((String) pair.getField(key), (DynamicMessage) pair.getField(value));
    }
    out.append('{');
    boolean first = true;
    for (Map.Entry<String, DynamicMessage> entry : sorted.entrySet()) {
      if (!first) {
        out.append(',');
      }
      first = false;
      writeString(entry.getKey(), out);
      out.append(':');
      writeValue(entry.getValue(), out);
    }
    out.append('}');
  }

  private static void writeList(DynamicMessage list, StringBuilder out) {
    FieldDescriptor values = list.getDescriptorForType().findFieldByName("values");
    out.append('[');
    boolean first = true;
    for (Object value : (List<?>) list.getField(values)) {
      if (!first) {
        out.append(',');
      }
      first = false;
      writeValue((DynamicMessage) value, out);
    }
    out.append(']');
  }

  private static void writeValue(DynamicMessage value, StringBuilder out) {
    FieldDescriptor kind = value.getOneofFieldDescriptor(value.getDescriptorForType().getOneofs().get(0));
    if (kind == null) {
      out.append("null");
      return;
    }
    Object held = value.getField(kind);
    switch (kind.getName()) {
      case "number_value" -> out.append(pythonFloat((Double) held));
      case "string_value" -> writeString((String) held, out);
      case "bool_value" -> out.append((Boolean) held ? "true" : "false");
      case "struct_value" -> writeStruct((DynamicMessage) held, out);
      case "list_value" -> writeList((DynamicMessage) held, out);
      default -> out.append("null"); // null_value
    }
  }

  private static void writeString(String text, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        default -> {
          if (c < ' ' || c > '~') {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }

  /** A double as Python's {@code repr} writes it: the shortest digits, positional from 1e-4 to 1e16. */
  static String pythonFloat(double value) {
    if (Double.isNaN(value)) {
      return "NaN";
    }
    if (Double.isInfinite(value)) {
      return value > 0 ? "Infinity" : "-Infinity";
    }
    if (value == 0) {
      return 1 / value < 0 ? "-0.0" : "0.0";
    }
    BigDecimal shortest = new BigDecimal(Double.toString(Math.abs(value))).stripTrailingZeros();
    String digits = shortest.unscaledValue().toString();
    int point = digits.length() - shortest.scale(); // value = 0.<digits> x 10^point
    StringBuilder out = new StringBuilder(value < 0 ? "-" : "");
    if (point > -4 && point <= 16) {
      if (point <= 0) {
        out.append("0.").append("0".repeat(-point)).append(digits);
      } else if (point >= digits.length()) {
        out.append(digits).append("0".repeat(point - digits.length())).append(".0");
      } else {
        out.append(digits, 0, point).append('.').append(digits.substring(point));
      }
    } else {
      out.append(digits.charAt(0));
      if (digits.length() > 1) {
        out.append('.').append(digits.substring(1));
      }
      int exponent = point - 1;
      out.append('e').append(exponent < 0 ? '-' : '+').append(String.format("%02d", Math.abs(exponent)));
    }
    return out.toString();
  }
}

package dagger.jobs.codec;

import static dagger.jobs.codec.EncodingErrors.repr;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import dagger.jobs.codec.Buffers.Content;
import dagger.jobs.codec.PythonJsonParser.JsonError;
import java.io.IOException;
import java.util.List;
import java.util.Map;

/**
 * JSON text parsed and written as a Struct, Value or ListValue, as Python's {@code json_format.Parse}
 * reads it: numbers as doubles (NaN and Infinity accepted, as Python's json does), a duplicate key an
 * error. A Struct's entries are written in the text's order, each with its key (an empty one too) and its
 * value; a Value holds the one field of its kind, written even when it is the default (a oneof's).
 */
final class JsonMessages {
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
      parsed = PythonJsonParser.parse(text);
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
    if (parsed == PythonJsonParser.NULL) {
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
}

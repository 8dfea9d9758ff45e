package dagger.jobs.codec;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.WireFormat;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The fields a query reads of one serialized message, read straight from the wire: every other field is
 * skipped without being parsed, and nothing is built but the values asked for.
 *
 * <p>Values are what protobuf-java's reflection gives (Integer, Long, Float, Double, Boolean, String,
 * ByteString, an enum's number as Integer), except that a message field's value is its serialized bytes,
 * read by the plan of its own type only when it is converted; several occurrences of a message field are
 * concatenated, which is protobuf's merge. A repeated field's value is a List, packed or not. A field sent
 * with another wire type than its declared one is skipped, as protobuf-java treats it (an unknown field).
 */
final class WireFields {
  /** Which fields to read of one message type: slot {@code i} holds field {@code fields[i]}. */
  static final class Plan {
    private final FieldDescriptor[] fields;
    private final Map<Integer, Integer> slotByNumber = new HashMap<>();

    Plan(List<FieldDescriptor> fields) {
      this.fields = fields.toArray(new FieldDescriptor[0]);
      for (int slot = 0; slot < this.fields.length; slot++) {
        slotByNumber.put(this.fields[slot].getNumber(), slot);
      }
    }

    /** Reads a whole message; a malformed one is an InvalidProtocolBufferException. */
    WireFields read(CodedInputStream in) throws IOException {
      WireFields read = new WireFields(fields.length);
      while (true) {
        int tag = in.readTag();
        if (tag == 0) {
          return read;
        }
        Integer slot = slotByNumber.get(WireFormat.getTagFieldNumber(tag));
        if (slot == null) {
          in.skipField(tag);
          continue;
        }
        FieldDescriptor field = fields[slot];
        int wireType = WireFormat.getTagWireType(tag);
        int declared = field.getLiteType().getWireType();
        if (field.isRepeated()) {
          @SuppressWarnings("unchecked")
          List<Object> values = (List<Object>) read.values[slot];
          if (values == null) {
            values = new ArrayList<>();
            read.values[slot] = values;
            read.present[slot] = true;
          }
          if (wireType == WireFormat.WIRETYPE_LENGTH_DELIMITED && declared != wireType && field.isPackable()) {
            int limit = in.pushLimit(in.readRawVarint32());
            while (in.getBytesUntilLimit() > 0) {
              values.add(value(in, field));
            }
            in.popLimit(limit);
          } else if (wireType == declared) {
            values.add(value(in, field));
          } else {
            in.skipField(tag);
          }
        } else if (wireType == declared) {
          Object value = value(in, field);
          if (read.present[slot] && value instanceof ByteString more) { // a message sent twice: merged
            value = ((ByteString) read.values[slot]).concat(more);
          }
          read.values[slot] = value;
          read.present[slot] = true;
        } else {
          in.skipField(tag);
        }
      }
    }

    WireFields read(ByteString message) {
      try {
        return read(message.newCodedInput());
      } catch (IOException e) {
        throw new UncheckedIOException(e); // a malformed nested message: the record is invalid
      }
    }

    int slot(FieldDescriptor field) {
      return slotByNumber.get(field.getNumber());
    }
  }

  private final Object[] values;
  private final boolean[] present;

  private WireFields(int size) {
    values = new Object[size];
    present = new boolean[size];
  }

  boolean has(int slot) {
    return present[slot];
  }

  /** The slot's value; a field the message did not hold reads as its default (an empty list if repeated). */
  Object get(int slot, FieldDescriptor field) {
    if (present[slot]) {
      return values[slot];
    }
    if (field.isRepeated()) {
      return List.of();
    }
    if (field.getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
      return ByteString.EMPTY;
    }
    if (field.getJavaType() == FieldDescriptor.JavaType.ENUM) {
      return field.getEnumType().getValues().get(0).getNumber();
    }
    return field.getDefaultValue();
  }

  private static Object value(CodedInputStream in, FieldDescriptor field) throws IOException {
    return switch (field.getType()) {
      case DOUBLE -> in.readDouble();
      case FLOAT -> in.readFloat();
      case INT64 -> in.readInt64();
      case UINT64 -> in.readUInt64();
      case INT32 -> in.readInt32();
      case FIXED64 -> in.readFixed64();
      case FIXED32 -> in.readFixed32();
      case BOOL -> in.readBool();
      case STRING -> in.readStringRequireUtf8();
      case BYTES, MESSAGE -> in.readBytes();
      case UINT32 -> in.readUInt32();
      case ENUM -> in.readEnum();
      case SFIXED32 -> in.readSFixed32();
      case SFIXED64 -> in.readSFixed64();
      case SINT32 -> in.readSInt32();
      case SINT64 -> in.readSInt64();
      case GROUP -> throw new IOException("group fields are not supported: " + field.getFullName());
    };
  }
}

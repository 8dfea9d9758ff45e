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
  /**
   * Which fields to read of one message type: slot {@code i} holds field {@code fields[i]}. What the read
   * asks of each field (its type, wire type, repeated, packable) is looked up once here: protobuf-java
   * works some of it out again on every call (a field's type goes through its features), and a profile
   * of the window benchmark had those calls and the boxed slot lookup at a tenth of the executors' time.
   */
  static final class Plan {
    /** Field numbers up to this are found through an array; any larger one in a plan, through a map. */
    private static final int DENSE_NUMBERS = 1 << 12;

    private final FieldDescriptor[] fields;
    private final FieldDescriptor.Type[] types;
    private final int[] declaredWireTypes;
    private final boolean[] repeated;
    private final boolean[] packable;
    private final Object[] defaults;
    private final int[] slotByDenseNumber; // slot + 1; 0: not read
    private final Map<Integer, Integer> slotByNumber = new HashMap<>();

    Plan(List<FieldDescriptor> fields) {
      this.fields = fields.toArray(new FieldDescriptor[0]);
      int count = this.fields.length;
      types = new FieldDescriptor.Type[count];
      declaredWireTypes = new int[count];
      repeated = new boolean[count];
      packable = new boolean[count];
      defaults = new Object[count];
      int largest = 0;
      for (int slot = 0; slot < count; slot++) {
        FieldDescriptor field = this.fields[slot];
        types[slot] = field.getType();
        declaredWireTypes[slot] = field.getLiteType().getWireType();
        repeated[slot] = field.isRepeated();
        packable[slot] = field.isPackable();
        defaults[slot] = defaultValue(field);
        slotByNumber.put(field.getNumber(), slot);
        largest = Math.max(largest, field.getNumber());
      }
      slotByDenseNumber = new int[Math.min(largest, DENSE_NUMBERS) + 1];
      for (int slot = 0; slot < count; slot++) {
        if (this.fields[slot].getNumber() <= DENSE_NUMBERS) {
          slotByDenseNumber[this.fields[slot].getNumber()] = slot + 1;
        }
      }
    }

    /** The slot of field {@code number}, or -1 when the plan does not read it. */
    private int slotOf(int number) {
      if (number < slotByDenseNumber.length) {
        return slotByDenseNumber[number] - 1;
      }
      if (number <= DENSE_NUMBERS) {
        return -1;
      }
      Integer slot = slotByNumber.get(number);
      return slot == null ? -1 : slot;
    }

    /** Reads a whole message; a malformed one is an InvalidProtocolBufferException. */
    WireFields read(CodedInputStream in) throws IOException {
      WireFields read = new WireFields(defaults);
      while (true) {
        int tag = in.readTag();
        if (tag == 0) {
          return read;
        }
        int slot = slotOf(WireFormat.getTagFieldNumber(tag));
        if (slot < 0) {
          in.skipField(tag);
          continue;
        }
        int wireType = WireFormat.getTagWireType(tag);
        int declared = declaredWireTypes[slot];
        if (repeated[slot]) {
          @SuppressWarnings("unchecked")
          List<Object> values = (List<Object>) read.values[slot];
          if (values == null) {
            values = new ArrayList<>();
            read.values[slot] = values;
            read.present[slot] = true;
          }
          if (wireType == WireFormat.WIRETYPE_LENGTH_DELIMITED && declared != wireType && packable[slot]) {
            int limit = in.pushLimit(in.readRawVarint32());
            while (in.getBytesUntilLimit() > 0) {
              values.add(value(in, slot));
            }
            in.popLimit(limit);
          } else if (wireType == declared) {
            values.add(value(in, slot));
          } else {
            in.skipField(tag);
          }
        } else if (wireType == declared) {
          Object value = value(in, slot);
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

    private Object value(CodedInputStream in, int slot) throws IOException {
      return switch (types[slot]) {
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
        case GROUP -> throw new IOException("group fields are not supported: " + fields[slot].getFullName());
      };
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
  private final Object[] defaults;

  private WireFields(Object[] defaults) {
    values = new Object[defaults.length];
    present = new boolean[defaults.length];
    this.defaults = defaults;
  }

  boolean has(int slot) {
    return present[slot];
  }

  /** The slot's value; a field the message did not hold reads as its default (an empty list if repeated). */
  Object get(int slot) {
    return present[slot] ? values[slot] : defaults[slot];
  }

  private static Object defaultValue(FieldDescriptor field) {
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
}

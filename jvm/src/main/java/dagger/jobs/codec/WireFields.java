package dagger.jobs.codec;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.OneofDescriptor;
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
 * A oneof holds the member that came last, as protobuf-java reads it: a member clears the others read
 * before it, and so does a member the plan does not read (a query that reads one member of a oneof sees
 * NULL when another one was set after it).
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
    /** The slots of the other members of the slot's oneof, which reading it clears (most: none). */
    private final int[][] oneofSiblings;
    /** The members of those oneofs that the plan does not read: what each clears, when its wire type fits. */
    private final Map<Integer, UnreadMember> unreadMembers = new HashMap<>();

    private record UnreadMember(int wireType, int[] clears) {}

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
      oneofSiblings = new int[count][];
      for (int slot = 0; slot < count; slot++) {
        OneofDescriptor oneof = this.fields[slot].getRealContainingOneof();
        oneofSiblings[slot] = oneof == null ? new int[0] : readMembers(oneof, this.fields[slot].getNumber());
        if (oneof != null) {
          for (FieldDescriptor member : oneof.getFields()) {
            if (!slotByNumber.containsKey(member.getNumber())) {
              unreadMembers.put(member.getNumber(), new UnreadMember(
                  member.getLiteType().getWireType(), readMembers(oneof, member.getNumber())));
            }
          }
        }
      }
    }

    /** The slots of the members of {@code oneof} the plan reads, but field {@code except}. */
    private int[] readMembers(OneofDescriptor oneof, int except) {
      return oneof.getFields().stream()
          .filter(member -> member.getNumber() != except && slotByNumber.containsKey(member.getNumber()))
          .mapToInt(member -> slotByNumber.get(member.getNumber()))
          .toArray();
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
        int wireType = WireFormat.getTagWireType(tag);
        if (slot < 0) {
          if (!unreadMembers.isEmpty()) {
            UnreadMember member = unreadMembers.get(WireFormat.getTagFieldNumber(tag));
            if (member != null && member.wireType() == wireType) {
              read.clear(member.clears());
            }
          }
          in.skipField(tag);
          continue;
        }
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
          read.clear(oneofSiblings[slot]);
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

  /** Forgets the slots' values: the other members of a oneof once one is read. */
  private void clear(int[] slots) {
    for (int slot : slots) {
      present[slot] = false;
      values[slot] = null;
    }
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

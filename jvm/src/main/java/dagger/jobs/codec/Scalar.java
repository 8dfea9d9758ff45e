package dagger.jobs.codec;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.FieldDescriptor;
import java.io.IOException;
import java.util.function.ToLongFunction;

/**
 * A scalar field's values: a Spark value converted into the field's type and written in its encoding.
 * {@link ScalarConversions} chooses the conversion from the column's type.
 */
interface Scalar {
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

  Scalar STRING = (out, number, value, skipDefault) -> {
    String text = (String) value;
    if (!skipDefault || !text.isEmpty()) {
      out.writeString(number, text);
    }
  };

  Scalar BYTES = (out, number, value, skipDefault) -> {
    byte[] bytes = (byte[]) value;
    if (!skipDefault || bytes.length > 0) {
      out.writeByteArray(number, bytes);
    }
  };

  /**
   * Numbers, bools and enums: a Spark value converted into the bits of the field's type (an integer, sign
   * extended; a float's or a double's raw bits; 1 or 0; an enum's number), then written in its encoding.
   */
  final class Bits implements Scalar {
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
}

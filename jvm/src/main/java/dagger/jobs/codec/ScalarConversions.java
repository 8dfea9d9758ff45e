package dagger.jobs.codec;

import static dagger.jobs.codec.EncodingErrors.mismatch;
import static dagger.jobs.codec.EncodingErrors.protoTypeName;
import static dagger.jobs.codec.EncodingErrors.repr;

import com.google.protobuf.Descriptors.EnumDescriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import dagger.jobs.codec.Scalar.Bits;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.HashMap;
import java.util.Map;
import java.util.StringJoiner;
import java.util.TreeSet;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;

/**
 * Which Spark types fill which scalar and enum fields, and how their values convert: a mismatch the types
 * show fails when the writer is planned, a value that does not fit when it is written, each with the
 * Python encoder's message.
 */
final class ScalarConversions {
  private ScalarConversions() {}

  /**
   * A scalar into {@code target}'s type; {@code field} names the field in errors (a wrapper field for its
   * wrapped value). Integers are range-checked like Arrow's safe casts, except int64 into uint64, which wraps
   * back what decoding wrapped; floats narrow as Java does.
   */
  static Scalar of(FieldDescriptor field, FieldDescriptor target, DataType source, String column) {
    if (field.getJavaType() == FieldDescriptor.JavaType.ENUM) {
      return enumValues(field, source, column);
    }
    String fieldType = protoTypeName(field, true);
    FieldDescriptor.Type kind = target.getType();
    switch (target.getJavaType()) {
      case STRING:
        if (source instanceof StringType) {
          return Scalar.STRING;
        }
        break;
      case BYTE_STRING:
        if (source instanceof BinaryType) {
          return Scalar.BYTES;
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

  static boolean isIntegral(DataType type) {
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
  private static Scalar enumValues(FieldDescriptor field, DataType source, String column) {
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
}

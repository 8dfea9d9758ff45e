package dagger.jobs.codec;

import static dagger.jobs.codec.EncodingErrors.mismatch;
import static dagger.jobs.codec.EncodingErrors.protoTypeName;
import static dagger.jobs.codec.ScalarConversions.isIntegral;
import static dagger.jobs.codec.WellKnownTypes.DURATION;
import static dagger.jobs.codec.WellKnownTypes.TIMESTAMP;
import static dagger.jobs.codec.WellKnownTypes.WRAPPERS;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.WireFormat;
import java.io.IOException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.function.ToLongFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DayTimeIntervalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

/**
 * The well-known messages written from the Spark values that stand for them: a Timestamp from a timestamp,
 * a Duration from a day-time interval, both from Dagger's STRUCT<seconds, nanos>, and a wrapper from its
 * scalar or Dagger's STRUCT<value>.
 */
final class WellKnownValues {
  private WellKnownValues() {}

  /** The value of a field of well-known type {@code message}; null when it is none of those above. */
  static MessageValue of(FieldDescriptor field, Descriptor message, DataType type, String column) {
    String name = message.getFullName();
    boolean timestamp = name.equals(TIMESTAMP);
    if ((timestamp || name.equals(DURATION)) && isSecondsNanos(type)) {
      return secondsNanosStruct(message, (StructType) type, field, column);
    }
    if (WRAPPERS.contains(name)) {
      FieldDescriptor wrapped = message.findFieldByName("value");
      if (type instanceof StructType struct) { // Dagger's layout: STRUCT<value>
        StructField[] fields = struct.fields();
        if (fields.length != 1 || !fields[0].name().equals("value")) {
          throw mismatch(
              column, type, field, protoTypeName(field, true), " (expects a value or a STRUCT<value>)");
        }
        return new Wrapper(ScalarConversions.of(field, wrapped, fields[0].dataType(), column), wrapped, true);
      }
      return new Wrapper(ScalarConversions.of(field, wrapped, type, column), wrapped, false);
    }
    if (timestamp) {
      if (!(type instanceof TimestampType || type instanceof TimestampNTZType)) {
        throw mismatch(column, type, field, protoTypeName(field, true), "");
      }
      return new SecondsNanos(message, false, WellKnownValues::micros);
    }
    if (name.equals(DURATION)) {
      if (!(type instanceof DayTimeIntervalType)) {
        throw mismatch(column, type, field, protoTypeName(field, true), "");
      }
      return new SecondsNanos(message, false, value -> {
        Duration duration = (Duration) value;
        return duration.getSeconds() * 1_000_000L + duration.getNano() / 1000;
      });
    }
    return null;
  }

  /** A wrapper holding its value, which is written even when it is the default, as Python writes it. */
  private static final class Wrapper extends MessageValue {
    private final Scalar scalar;
    private final int number;
    private final boolean daggerLayout; // STRUCT<value>: NULL inside is no message

    Wrapper(Scalar scalar, FieldDescriptor wrapped, boolean daggerLayout) {
      this.scalar = scalar;
      this.number = wrapped.getNumber();
      this.daggerLayout = daggerLayout;
    }

    @Override
    boolean writeFields(CodedOutputStream out, Object value, Buffers buffers) throws IOException {
      Object wrapped = daggerLayout ? ((Row) value).get(0) : value;
      if (wrapped == null) {
        return false;
      }
      scalar.write(out, number, wrapped, false);
      return true;
    }
  }

  private static boolean isSecondsNanos(DataType type) {
    if (type instanceof StructType struct) {
      StructField[] fields = struct.fields();
      return fields.length == 2 && fields[0].name().equals("seconds") && fields[1].name().equals("nanos");
    }
    return false;
  }

  /** Dagger's STRUCT<seconds, nanos>, at microsecond precision as the Python encoder reads it. */
  private static MessageValue secondsNanosStruct(
      Descriptor message, StructType type, FieldDescriptor field, String column) {
    for (StructField part : type.fields()) {
      if (!isIntegral(part.dataType())) {
        throw mismatch(column, type, field, protoTypeName(field, true), "");
      }
    }
    return new SecondsNanos(message, true, value -> {
      Row row = (Row) value;
      return ((Number) row.get(0)).longValue() * 1_000_000L + ((Number) row.get(1)).longValue() / 1000;
    });
  }

  private static long micros(Object value) {
    if (value instanceof Timestamp timestamp) {
      return Math.floorDiv(timestamp.getTime(), 1000L) * 1_000_000L + timestamp.getNanos() / 1000;
    }
    if (value instanceof Instant instant) {
      return instant.getEpochSecond() * 1_000_000L + instant.getNano() / 1000;
    }
    LocalDateTime local = (LocalDateTime) value; // TIMESTAMP_NTZ: a wall-clock time, read as UTC
    return local.toEpochSecond(ZoneOffset.UTC) * 1_000_000L + local.getNano() / 1000;
  }

  /**
   * A Timestamp (seconds floored, nanos positive) or a Duration (both with the sign) from microseconds; its
   * size is known from the two numbers, so it is written without a buffer.
   */
  private static final class SecondsNanos extends MessageValue {
    private final boolean timestamp;
    private final boolean daggerLayout; // STRUCT<seconds, nanos>: a NULL part is no message
    private final ToLongFunction<Object> micros;
    private final int secondsNumber;
    private final int nanosNumber;

    SecondsNanos(Descriptor message, boolean daggerLayout, ToLongFunction<Object> micros) {
      this.timestamp = message.getFullName().equals(TIMESTAMP);
      this.daggerLayout = daggerLayout;
      this.micros = micros;
      this.secondsNumber = message.findFieldByName("seconds").getNumber();
      this.nanosNumber = message.findFieldByName("nanos").getNumber();
    }

    @Override
    boolean write(CodedOutputStream out, int number, boolean group, Object value, Buffers buffers)
        throws IOException {
      if (group) {
        return super.write(out, number, group, value, buffers);
      }
      if (isNull(value)) {
        return false;
      }
      long micros = this.micros.applyAsLong(value);
      long seconds = seconds(micros);
      int nanos = nanos(micros, seconds);
      out.writeTag(number, WireFormat.WIRETYPE_LENGTH_DELIMITED);
      out.writeUInt32NoTag((seconds == 0 ? 0 : CodedOutputStream.computeInt64Size(secondsNumber, seconds))
          + (nanos == 0 ? 0 : CodedOutputStream.computeInt32Size(nanosNumber, nanos)));
      writeParts(out, seconds, nanos);
      return true;
    }

    @Override
    boolean writeFields(CodedOutputStream out, Object value, Buffers buffers) throws IOException {
      if (isNull(value)) {
        return false;
      }
      long micros = this.micros.applyAsLong(value);
      long seconds = seconds(micros);
      writeParts(out, seconds, nanos(micros, seconds));
      return true;
    }

    private boolean isNull(Object value) {
      return daggerLayout && (((Row) value).isNullAt(0) || ((Row) value).isNullAt(1));
    }

    private long seconds(long micros) {
      return timestamp ? Math.floorDiv(micros, 1_000_000L) : micros / 1_000_000L;
    }

    private static int nanos(long micros, long seconds) {
      return (int) (micros - seconds * 1_000_000L) * 1000;
    }

    /** Both parts but a zero, which protobuf leaves out of a field without presence. */
    private void writeParts(CodedOutputStream out, long seconds, int nanos) throws IOException {
      if (seconds != 0) {
        out.writeInt64(secondsNumber, seconds);
      }
      if (nanos != 0) {
        out.writeInt32(nanosNumber, nanos);
      }
    }
  }
}

package dagger.jobs.codec;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.OneofDescriptor;
import dagger.jobs.codec.Buffers.Buffer;
import java.io.IOException;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.IntStream;
import org.apache.spark.sql.Row;

/**
 * The fields of one message type a row fills, written in field-number order, as protobuf writes them.
 * They are written as declared when that is their number order: the order in which a row's values are
 * converted, and so which of several bad values raises the error, is the declaration order.
 */
final class MessageFields {
  /** A field of the message, the column value it is written from, and its writer. */
  record Field(FieldDescriptor descriptor, Function<Row, Object> get, FieldWriter writer) {}

  private final Field[] fields;
  /** The field indices in number order, when the fields must be reordered; null when not. */
  private final int[] numberOrder;

  MessageFields(List<Field> fields) {
    this.fields = fields.toArray(new Field[0]);
    boolean reorder = false;
    Set<OneofDescriptor> oneofs = new HashSet<>();
    for (int i = 0; i < this.fields.length; i++) {
      FieldDescriptor field = this.fields[i].descriptor();
      reorder |= i > 0 && field.getNumber() < this.fields[i - 1].descriptor().getNumber();
      reorder |= field.getContainingOneof() != null && !oneofs.add(field.getContainingOneof());
    }
    numberOrder = !reorder ? null : IntStream.range(0, this.fields.length).boxed()
        .sorted(Comparator.comparingInt(i -> this.fields[i].descriptor().getNumber()))
        .mapToInt(Integer::intValue).toArray();
  }

  void write(CodedOutputStream out, Row row, Buffers buffers) throws IOException {
    if (numberOrder != null) {
      writeReordered(out, row, buffers);
      return;
    }
    for (Field field : fields) {
      Object value = field.get().apply(row);
      if (value != null) {
        field.writer().write(out, value, buffers);
      }
    }
  }

  /**
   * Fields declared out of number order, or several filling one oneof: each is written into a buffer in
   * declaration order, then copied out in number order. Of the fields of one oneof, only the last written
   * is kept: setting one clears the others.
   */
  private void writeReordered(CodedOutputStream out, Row row, Buffers buffers) throws IOException {
    int[] ends = new int[fields.length];
    Buffer written = buffers.fill((declared, value, nested) -> {
      for (int i = 0; i < fields.length; i++) {
        Object fieldValue = fields[i].get().apply((Row) value);
        if (fieldValue != null) {
          fields[i].writer().write(declared, fieldValue, nested);
        }
        ends[i] = declared.getTotalBytesWritten();
      }
      return true;
    }, row);
    boolean[] kept = new boolean[fields.length];
    Set<OneofDescriptor> set = new HashSet<>();
    for (int i = fields.length - 1; i >= 0; i--) {
      OneofDescriptor oneof = fields[i].descriptor().getContainingOneof();
      kept[i] = ends[i] > (i == 0 ? 0 : ends[i - 1]) && (oneof == null || set.add(oneof));
    }
    for (int i : numberOrder) {
      if (kept[i]) {
        int from = i == 0 ? 0 : ends[i - 1];
        written.writeRange(out, from, ends[i] - from);
      }
    }
  }
}

package dagger.jobs.codec;

import static dagger.jobs.codec.EncodingErrors.mismatch;
import static dagger.jobs.codec.EncodingErrors.protoTypeName;
import static dagger.jobs.codec.WellKnownTypes.JSON_TYPES;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import dagger.jobs.codec.InputColumns.Column;
import dagger.jobs.codec.MessageFields.Field;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.NullType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;

/** The encoder of one input type: the message's fields, then its JSON fields appended after them. */
final class RowWriter implements Buffers.Content {
  private final MessageFields fields;
  private final Field[] jsonFields;
  /** The buffers between rows. A row takes them, so two threads sharing the encoder never share them. */
  private final AtomicReference<Buffers> idle = new AtomicReference<>();

  private RowWriter(MessageFields fields, Field[] jsonFields) {
    this.fields = fields;
    this.jsonFields = jsonFields;
  }

  /**
   * The writer of {@code message} from rows of {@code input}: an IllegalArgumentException, worded as the
   * Python encoder's, for a column whose type cannot fill its field.
   */
  static RowWriter plan(Descriptor message, StructType input) {
    Map<String, Column> columns = InputColumns.byField(message, input);
    List<Field> fields = new ArrayList<>();
    List<FieldDescriptor> jsonFields = new ArrayList<>();
    for (FieldDescriptor field : message.getFields()) {
      Column column = columns.get(field.getName());
      if (column == null) {
        continue;
      }
      if (field.getJavaType() == FieldDescriptor.JavaType.MESSAGE
          && JSON_TYPES.contains(field.getMessageType().getFullName())) {
        jsonFields.add(field);
        continue;
      }
      FieldWriter writer = FieldWriters.of(field, column.type(), field.getName());
      if (writer != null) {
        fields.add(new Field(field, column.get(), writer));
      }
    }
    List<Field> json = new ArrayList<>();
    for (FieldDescriptor field : jsonFields) {
      Column column = columns.get(field.getName());
      if (column.type() instanceof NullType) {
        continue;
      }
      if (!(column.type() instanceof StringType)) {
        throw mismatch(
            field.getName(), column.type(), field, protoTypeName(field, false), " (expects a JSON string)");
      }
      JsonMessages messages = new JsonMessages(field.getMessageType());
      int number = field.getNumber();
      String name = field.getName();
      json.add(new Field(field, column.get(),
          (out, text, buffers) -> messages.write(out, number, (String) text, name, buffers)));
    }
    return new RowWriter(new MessageFields(fields), json.toArray(new Field[0]));
  }

  byte[] encode(Row row) {
    Buffers buffers = idle.getAndSet(null);
    if (buffers == null) {
      buffers = new Buffers();
    }
    try {
      return buffers.fill(this, row).toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e); // not expected: the buffers grow
    } finally {
      idle.set(buffers);
    }
  }

  @Override
  public boolean write(CodedOutputStream out, Object value, Buffers buffers) throws IOException {
    Row row = (Row) value;
    fields.write(out, row, buffers);
    for (Field json : jsonFields) {
      Object text = json.get().apply(row);
      if (text != null) {
        json.writer().write(out, text, buffers);
      }
    }
    return true;
  }
}

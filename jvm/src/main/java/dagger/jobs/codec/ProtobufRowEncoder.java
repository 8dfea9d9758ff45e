package dagger.jobs.codec;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.StructType;

/**
 * A struct of SQL result columns to a serialized protobuf message, in the JVM: the {@code
 * jobs.codec.protobuf_encoding.ProtoEncoder} results without a Python worker (tests/test_codec_encoding.py
 * runs the encoding tests against both).
 *
 * <p>Columns fill fields by name, {@code a.b.c} columns fill nested fields, columns naming no field are
 * ignored, and values in Dagger's row layout are accepted as well as the native one. What the input type
 * alone shows to be wrong (a column whose type cannot fill its field) fails in the constructor, on the
 * driver, with the Python encoder's message; what only values show (an unknown enum name, an integer out of
 * range, text that is not JSON) fails when the row is encoded, with the same message.
 *
 * <p>The bytes are the Python encoder's: fields in field-number order, then the Struct/Value/ListValue
 * fields appended after them (concatenated protobuf is a merge), wrapper values written even when they are
 * the default, map entries without their default values. Only the entries of a Struct come in another
 * order (the Python runtime writes them in its map's order).
 *
 * <p>Rows are written straight to the wire: each field's writer, planned once per input type, converts its
 * column's value and writes the tag and the value to a {@code CodedOutputStream}; no message object is
 * built. A length-delimited value (a nested message, a map entry, packed elements) is written into a buffer
 * of its nesting depth first, as its length comes before it; the buffers are reused from row to row.
 * Descriptors are not serializable: the encoder ships the descriptor set's bytes and plans its writers on
 * first use, once per executor.
 *
 * <p>The plan, by what it writes: {@link RowWriter} the output message (its columns matched to fields by
 * {@link InputColumns}), {@link MessageFields} the fields of any message in number order, {@link
 * FieldWriters} singular, repeated and packed fields, {@link MapEntries} map fields, {@link MessageValue}
 * nested messages, {@link WellKnownValues} Timestamp, Duration and the wrappers, {@link Scalar} and {@link
 * ScalarConversions} scalar and enum values, {@link JsonMessages} Struct, Value and ListValue from JSON text;
 * {@link Buffers} holds the length-delimited values while they are written.
 */
public final class ProtobufRowEncoder implements UDF1<Row, byte[]> {
  private static final long serialVersionUID = 1L;

  private final byte[] descriptorSet;
  private final String messageName;
  private final StructType inputType;
  private transient RowWriter writer;

  public ProtobufRowEncoder(byte[] descriptorSet, String messageName, StructType inputType) {
    this.descriptorSet = descriptorSet;
    this.messageName = messageName;
    this.inputType = inputType;
    prepare(); // a column whose type cannot fill its field fails here, on the driver
  }

  @Override
  public byte[] call(Row row) {
    if (row == null) {
      return null;
    }
    if (writer == null) {
      prepare();
    }
    return writer.encode(row);
  }

  private void prepare() {
    writer = RowWriter.plan(ProtobufRowDecoder.findMessage(descriptorSet, messageName), inputType);
  }

  /**
   * Why the constructor would reject {@code inputType} (null when it would not): the message of its
   * IllegalArgumentException, for callers that cannot read a Java exception's message (through py4j, PySpark
   * turns it into an exception whose message is the JVM's stack trace, or nothing).
   */
  public static String typeError(byte[] descriptorSet, String messageName, StructType inputType) {
    try {
      RowWriter.plan(ProtobufRowDecoder.findMessage(descriptorSet, messageName), inputType);
      return null;
    } catch (IllegalArgumentException e) {
      return e.getMessage();
    }
  }
}

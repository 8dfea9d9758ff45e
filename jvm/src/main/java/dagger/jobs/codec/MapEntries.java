package dagger.jobs.codec;

import static dagger.jobs.codec.EncodingErrors.mismatch;
import static dagger.jobs.codec.EncodingErrors.protoTypeName;
import static dagger.jobs.codec.EncodingErrors.repr;
import static dagger.jobs.codec.SparkCollections.asList;
import static dagger.jobs.codec.SparkCollections.asMap;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import dagger.jobs.codec.Buffers.Content;
import java.io.IOException;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The entries of a map field, from a map or Dagger's list of key-value structs. A default scalar value is
 * left out of an entry, as the Python encoder writes it, and so is a NULL value (an entry of the key
 * only), and a default key but for a string one.
 */
final class MapEntries implements FieldWriter {
  private final int number;
  private final boolean entryList;
  private final Scalar key;
  private final int keyNumber;
  private final boolean skipDefaultKey;
  private final FieldWriter value;
  private final String nullKeyError;
  private final Content entry = this::writeEntry;

  private MapEntries(int number, boolean entryList, Scalar key, FieldDescriptor keyField, FieldWriter value,
      String column) {
    this.number = number;
    this.entryList = entryList;
    this.key = key;
    this.keyNumber = keyField.getNumber();
    this.skipDefaultKey = keyField.getJavaType() != FieldDescriptor.JavaType.STRING;
    this.value = value;
    this.nullKeyError = "column " + repr(column) + ": Map cannot contain NULL valued keys";
  }

  /** The writer of map field {@code field} from a column of {@code type}. */
  static MapEntries of(FieldDescriptor field, DataType type, String column) {
    Descriptor entry = field.getMessageType();
    FieldDescriptor keyField = entry.findFieldByName("key");
    FieldDescriptor valueField = entry.findFieldByName("value");
    boolean entryList = isEntryList(type); // Dagger's layout: ARRAY<STRUCT<key, value>>
    DataType keyType;
    DataType valueType;
    if (entryList) {
      StructField[] pair = ((StructType) ((ArrayType) type).elementType()).fields();
      keyType = pair[0].dataType();
      valueType = pair[1].dataType();
    } else if (type instanceof MapType map) {
      keyType = map.keyType();
      valueType = map.valueType();
    } else {
      throw mismatch(column, type, field, protoTypeName(field, false), "");
    }
    Scalar key = ScalarConversions.of(keyField, keyField, keyType, column + " key");
    int valueNumber = valueField.getNumber();
    FieldWriter item;
    if (valueField.getJavaType() == FieldDescriptor.JavaType.MESSAGE) {
      MessageValue message = MessageValue.of(valueField, valueType, column + " value");
      item = (out, value, buffers) -> message.write(out, valueNumber, false, value, buffers); // never a group
    } else {
      Scalar scalar = ScalarConversions.of(valueField, valueField, valueType, column + " value");
      item = (out, value, buffers) -> scalar.write(out, valueNumber, value, true);
    }
    return new MapEntries(field.getNumber(), entryList, key, keyField, item, column);
  }

  private static boolean isEntryList(DataType type) {
    if (type instanceof ArrayType array && array.elementType() instanceof StructType struct) {
      StructField[] fields = struct.fields();
      return fields.length == 2 && fields[0].name().equals("key") && fields[1].name().equals("value");
    }
    return false;
  }

  @Override
  public void write(CodedOutputStream out, Object map, Buffers buffers) throws IOException {
    for (Object pair : entryList ? asList(map) : asMap(map).entrySet()) {
      if (pair == null || key(pair) == null) {
        throw new IllegalArgumentException(nullKeyError);
      }
      buffers.fill(entry, pair).writeDelimited(out, number);
    }
  }

  private boolean writeEntry(CodedOutputStream out, Object pair, Buffers buffers) throws IOException {
    key.write(out, keyNumber, key(pair), skipDefaultKey);
    Object v = entryList ? ((Row) pair).get(1) : ((Map.Entry<?, ?>) pair).getValue();
    if (v != null) {
      value.write(out, v, buffers);
    }
    return true;
  }

  private Object key(Object pair) {
    return entryList ? ((Row) pair).get(0) : ((Map.Entry<?, ?>) pair).getKey();
  }
}

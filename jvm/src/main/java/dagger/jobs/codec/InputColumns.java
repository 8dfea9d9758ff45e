package dagger.jobs.codec;

import static dagger.jobs.codec.EncodingErrors.repr;

import com.google.protobuf.Descriptors.Descriptor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The input row's columns as the output message's top-level fields see them: by name, with the dotted
 * columns of a nested field ({@code a.b.c}) gathered into one struct column for it.
 */
final class InputColumns {
  private InputColumns() {}

  /** A column's type and how to read its value from an input row. */
  record Column(DataType type, Function<Row, Object> get) {}

  /** Top-level columns by name, with {@code a.b.c} columns gathered into a struct column for field a. */
  @SuppressWarnings("unchecked")
  static Map<String, Column> byField(Descriptor message, StructType input) {
    Map<String, Column> columns = new LinkedHashMap<>();
    Map<String, Map<String, Object>> nested = new LinkedHashMap<>(); // leaves are Columns
    StructField[] fields = input.fields();
    for (int i = 0; i < fields.length; i++) {
      int index = i;
      String name = fields[i].name();
      Column column = new Column(fields[i].dataType(), row -> row.get(index));
      if (!name.contains(".")) {
        columns.put(name, column);
        continue;
      }
      String[] parts = name.split("\\.", -1);
      if (message.findFieldByName(parts[0]) == null) {
        continue; // an extra column, like any other
      }
      Map<String, Object> node = nested.computeIfAbsent(parts[0], head -> new LinkedHashMap<>());
      for (int p = 1; p < parts.length - 1; p++) {
        Object child = node.computeIfAbsent(parts[p], part -> new LinkedHashMap<String, Object>());
        if (!(child instanceof Map)) {
          throw new IllegalArgumentException(
              "column " + repr(name) + ": " + String.join(".", Arrays.copyOf(parts, p + 1))
                  + " is a column too; keep one of them");
        }
        node = (Map<String, Object>) child;
      }
      node.put(parts[parts.length - 1], column);
    }
    for (Map.Entry<String, Map<String, Object>> entry : nested.entrySet()) {
      String head = entry.getKey();
      if (columns.containsKey(head)) {
        throw new IllegalArgumentException(
            "columns " + repr(head) + " and " + head + ".* both fill field " + repr(head)
                + "; keep one of them");
      }
      columns.put(head, treeColumn(entry.getValue()));
    }
    return columns;
  }

  /** One struct column of the dotted columns below a name, each its own field of the struct. */
  @SuppressWarnings("unchecked")
  private static Column treeColumn(Map<String, Object> tree) {
    List<StructField> fields = new ArrayList<>();
    List<Function<Row, Object>> getters = new ArrayList<>();
    for (Map.Entry<String, Object> entry : tree.entrySet()) {
      Column child = entry.getValue() instanceof Column column
          ? column
          : treeColumn((Map<String, Object>) entry.getValue());
      fields.add(new StructField(entry.getKey(), child.type(), true, Metadata.empty()));
      getters.add(child.get());
    }
    return new Column(new StructType(fields.toArray(new StructField[0])), row -> {
      Object[] values = new Object[getters.size()];
      for (int i = 0; i < values.length; i++) {
        values[i] = getters.get(i).apply(row);
      }
      return RowFactory.create(values);
    });
  }
}

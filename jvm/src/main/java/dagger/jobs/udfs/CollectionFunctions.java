package dagger.jobs.udfs;

import java.math.BigDecimal;
import java.sql.Timestamp;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.api.java.UDF5;
import scala.Option;
import scala.Tuple2;

/**
 * Dagger's ElementAt and MapGet in the JVM. Dagger returns an element or a map's value as a Java object
 * that Flink prints with {@code String.valueOf}; a Spark function has one result type, so these return
 * that text ({@code CAST(... AS DOUBLE)} reads it back, as Dagger's documented queries do).
 */
public final class CollectionFunctions {
  private static final DateTimeFormatter SECONDS = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss");

  private CollectionFunctions() {}

  /**
   * A value as Dagger's functions print it: Java's own text for numbers and booleans, Base64 for bytes,
   * ISO 8601 for timestamps (UTC, with a {@code Z}), compact JSON for rows, arrays and maps.
   */
  static String daggerText(Object value) {
    if (value == null) {
      return null;
    }
    if (value instanceof byte[] bytes) {
      return Base64.getEncoder().encodeToString(bytes);
    }
    if (value instanceof Timestamp timestamp) {
      return isoText(LocalDateTime.ofInstant(timestamp.toInstant(), ZoneOffset.UTC)) + "Z";
    }
    if (value instanceof LocalDateTime local) {
      return isoText(local);
    }
    if (value instanceof Row || value instanceof scala.collection.Iterable<?>) {
      return JsonFunctions.jsonText(value);
    }
    return String.valueOf(value);
  }

  private static String isoText(LocalDateTime time) {
    int micros = time.getNano() / 1000;
    return time.format(SECONDS) + (micros == 0 ? "" : String.format(".%06d", micros));
  }

  /**
   * Java's {@code equals} between a key of the map and the key asked for, except that numbers compare by
   * value (an INT key equals a BIGINT literal): text never equals a number.
   */
  static boolean sameKey(Object key, Object wanted) {
    if (key instanceof Number number && wanted instanceof Number other) {
      if (isFloating(number) || isFloating(other)) {
        return number.doubleValue() == other.doubleValue();
      }
      return new BigDecimal(number.toString()).compareTo(new BigDecimal(other.toString())) == 0;
    }
    return key != null && key.equals(wanted);
  }

  private static boolean isFloating(Number number) {
    return number instanceof Double || number instanceof Float;
  }

  private static List<?> elements(String function, Object array) {
    if (!(array instanceof scala.collection.Seq<?> seq)) {
      throw new IllegalArgumentException(
          function + ": the first argument must be an array, got " + array.getClass().getSimpleName());
    }
    return scala.jdk.javaapi.CollectionConverters.asJava(seq);
  }

  /**
   * {@code ElementAt(array, index)}: the element as text, a negative index counting from the end; NULL out
   * of range.
   */
  public static final class ElementAt implements UDF2<Object, Number, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(Object array, Number index) {
      if (array == null || index == null) {
        return null;
      }
      List<?> elements = elements("ElementAt", array);
      long position = index.longValue() < 0 ? index.longValue() + elements.size() : index.longValue();
      return position >= 0 && position < elements.size() ? daggerText(elements.get((int) position)) : null;
    }
  }

  /**
   * {@code ElementAt(rows, pathOfArray, index, path[, tableName])}: the dotted {@code path} of the row at
   * {@code index} as text ({@code "null"} for a NULL leaf); {@code ""} when the index is out of range (no
   * counting from the end here), a row on the way is NULL or the path names no field. Rows carry their
   * field names, so {@code pathOfArray} and {@code tableName} only keep Dagger's signature. The SQL stage
   * calls it for ElementAt's four- and five-argument forms.
   */
  public static final class ElementAtPath implements UDF5<Object, String, Number, String, String, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(Object rows, String pathOfArray, Number index, String path, String tableName) {
      if (rows == null || index == null || path == null) {
        return "";
      }
      List<?> elements = elements("ElementAt", rows);
      long position = index.longValue();
      if (position < 0 || position >= elements.size()) {
        return "";
      }
      Object value = elements.get((int) position);
      for (String name : path.split("\\.", -1)) {
        if (!(value instanceof Row row) || row.schema() == null) {
          return "";
        }
        Option<Object> field = row.schema().getFieldIndex(name);
        if (field.isEmpty()) {
          return "";
        }
        value = row.get((Integer) field.get());
      }
      return value == null ? "null" : daggerText(value);
    }
  }

  /**
   * {@code MapGet(map, key)}: the value of the first entry whose key equals {@code key}, as text; NULL when
   * no entry has it. The map is a Spark map or Dagger's layout, an array of (key, value) rows.
   */
  public static final class MapGet implements UDF2<Object, Object, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(Object map, Object key) {
      if (map == null) {
        return null;
      }
      if (map instanceof scala.collection.Map<?, ?> entries) {
        Iterator<? extends Tuple2<?, ?>> iterator =
            scala.jdk.javaapi.CollectionConverters.asJava(entries.iterator());
        while (iterator.hasNext()) {
          Tuple2<?, ?> entry = iterator.next();
          if (sameKey(entry._1(), key)) {
            return daggerText(entry._2());
          }
        }
        return null;
      }
      if (map instanceof scala.collection.Seq<?> rows) {
        for (Object row : scala.jdk.javaapi.CollectionConverters.asJava(rows)) {
          if (row == null) {
            continue;
          }
          if (!(row instanceof Row entry) || entry.size() != 2) {
            throw notAMap(map);
          }
          if (sameKey(entry.get(0), key)) {
            return daggerText(entry.get(1));
          }
        }
        return null;
      }
      throw notAMap(map);
    }

    private static IllegalArgumentException notAMap(Object map) {
      return new IllegalArgumentException(
          "MapGet: the first argument must be a map or an array of (key, value) rows, got "
              + map.getClass().getSimpleName());
    }
  }
}

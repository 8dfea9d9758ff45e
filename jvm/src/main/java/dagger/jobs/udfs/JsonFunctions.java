package dagger.jobs.udfs;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.jayway.jsonpath.Configuration;
import com.jayway.jsonpath.DocumentContext;
import com.jayway.jsonpath.InvalidPathException;
import com.jayway.jsonpath.JsonPath;
import com.jayway.jsonpath.JsonPathException;
import com.jayway.jsonpath.Option;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.sql.Date;
import java.sql.Timestamp;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.api.java.UDF3;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Dagger's JSON functions in the JVM, on Jayway JsonPath (Dagger's library) with Dagger's option {@code
 * DEFAULT_PATH_LEAF_TO_NULL}: a missing last property reads as null (and is added by an update), a missing
 * property on the way or an index outside an array is an error. JsonQuery prints what the path selects with
 * Jackson, as Dagger does; JsonUpdate and JsonDelete print the changed document with Jayway's own JSON
 * provider. Errors name the function and the argument at fault.
 */
public final class JsonFunctions {
  private static final Configuration DAGGER_CONFIGURATION =
      Configuration.defaultConfiguration().setOptions(Option.DEFAULT_PATH_LEAF_TO_NULL);
  private static final ObjectMapper JACKSON = new ObjectMapper();
  /** A query's paths are literals, so a few compiled ones serve every row. */
  private static final int MAX_CACHED_PATHS = 1024;

  private static final Map<String, JsonPath> COMPILED = new ConcurrentHashMap<>();

  private JsonFunctions() {}

  static JsonPath compiled(String function, String path) {
    if (path == null || path.trim().isEmpty()) {
      throw new IllegalArgumentException(function + ": jsonPath: json can not be null or empty");
    }
    JsonPath known = COMPILED.get(path);
    if (known != null) {
      return known;
    }
    try {
      JsonPath compiled = JsonPath.compile(path);
      if (COMPILED.size() < MAX_CACHED_PATHS) {
        COMPILED.put(path, compiled);
      }
      return compiled;
    } catch (InvalidPathException error) {
      throw new IllegalArgumentException(function + ": jsonPath: " + error.getMessage(), error);
    }
  }

  static DocumentContext parsed(String function, String json) {
    try {
      return JsonPath.using(DAGGER_CONFIGURATION).parse(json);
    } catch (IllegalArgumentException | JsonPathException error) {
      throw new IllegalArgumentException(function + ": jsonEvent: " + error.getMessage(), error);
    }
  }

  static IllegalArgumentException failure(String function, JsonPathException error) {
    return new IllegalArgumentException(function + ": " + error.getMessage(), error);
  }

  /**
   * A SQL value as JsonUpdate writes it: maps and rows become objects, arrays arrays, integral decimals
   * integers, binary UTF-8 text, dates and timestamps ISO text.
   */
  static Object jsonValue(Object value) {
    if (value instanceof BigDecimal decimal) {
      return decimal.stripTrailingZeros().scale() <= 0 ? (Object) decimal.longValue() : decimal.doubleValue();
    }
    if (value instanceof byte[] bytes) {
      return new String(bytes, StandardCharsets.UTF_8);
    }
    if (value instanceof Timestamp timestamp) {
      return timestamp.toLocalDateTime().format(DateTimeFormatter.ISO_LOCAL_DATE_TIME);
    }
    if (value instanceof Date date) {
      return date.toLocalDate().toString();
    }
    if (value instanceof Row row) {
      Map<String, Object> object = new LinkedHashMap<>();
      String[] names = row.schema().fieldNames();
      for (int index = 0; index < names.length; index++) {
        object.put(names[index], jsonValue(row.get(index)));
      }
      return object;
    }
    if (value instanceof scala.collection.Map<?, ?> map) {
      Map<String, Object> object = new LinkedHashMap<>();
      CollectionConverters.asJava(map).forEach((key, item) -> object.put(String.valueOf(key), jsonValue(item)));
      return object;
    }
    if (value instanceof scala.collection.Iterable<?> items) {
      List<Object> array = new ArrayList<>();
      CollectionConverters.asJava(items).forEach(item -> array.add(jsonValue(item)));
      return array;
    }
    return value;
  }

  /** A SQL value (a row, an array, a map) as compact JSON text, written as {@link #jsonValue} makes it. */
  static String jsonText(Object value) {
    try {
      return JACKSON.writeValueAsString(jsonValue(value));
    } catch (JsonProcessingException error) {
      throw new IllegalStateException("a SQL value did not print as JSON: " + error.getMessage(), error);
    }
  }

  /** {@code JsonQuery(json, path)}: what the path selects, as JSON text; NULL for a null. */
  public static final class JsonQuery implements UDF2<String, String, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(String json, String path) throws JsonProcessingException {
      JsonPath compiled = compiled("JsonQuery", path);
      Object selected;
      try {
        selected = parsed("JsonQuery", json).read(compiled);
      } catch (JsonPathException error) {
        throw failure("JsonQuery", error);
      }
      return selected == null ? null : JACKSON.writeValueAsString(selected);
    }
  }

  /** {@code JsonUpdate(json, path, value)}: the document with the path set to the value. */
  public static final class JsonUpdate implements UDF3<String, String, Object, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(String json, String path, Object value) {
      JsonPath compiled = compiled("JsonUpdate", path);
      try {
        return parsed("JsonUpdate", json).set(compiled, jsonValue(value)).jsonString();
      } catch (JsonPathException error) {
        throw failure("JsonUpdate", error);
      }
    }
  }

  /** {@code JsonDelete(json, path)}: the document without what the path selects. */
  public static final class JsonDelete implements UDF2<String, String, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(String json, String path) {
      JsonPath compiled = compiled("JsonDelete", path);
      try {
        return parsed("JsonDelete", json).delete(compiled).jsonString();
      } catch (JsonPathException error) {
        throw failure("JsonDelete", error);
      }
    }
  }
}

package dagger.jobs.udfs;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.jayway.jsonpath.Configuration;
import com.jayway.jsonpath.JsonPath;
import com.jayway.jsonpath.Option;
import com.jayway.jsonpath.spi.json.JacksonJsonProvider;
import com.jayway.jsonpath.spi.mapper.JacksonMappingProvider;
import java.util.Collection;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.api.java.UDF7;

/**
 * Flink's {@code JSON_VALUE(json, path [RETURNING type] [behavior ON EMPTY] [behavior ON ERROR])}, as
 * Flink 2.3 computes it over a column: the translator's {@code FlinkJsonValue(json, path, 'type',
 * 'empty behavior', empty default, 'error behavior', error default)} (jobs/udfs/json_path.py) calls
 * this function, which gives the value's text, and casts that to the RETURNING type.
 *
 * <p>The document is read as Flink reads it (Jackson, fractions as BigDecimal, so {@code 1e3} prints as
 * {@code 1E+3}) and the path is Jayway JsonPath's, the library Flink uses. A path starts with its mode,
 * {@code lax} or {@code strict}; without one it is strict, as Flink's.
 *
 * <ul>
 *   <li>Empty (lax mode only): nothing or JSON null at the path, a document that does not parse, an
 *       object or array at the path.
 *   <li>Error: a path that is not valid; in strict mode also a document that does not parse, a path
 *       that is not there, JSON null there, and an object or array at the path.
 * </ul>
 *
 * Each is NULL by default, or the DEFAULT given, or fails the query (ERROR), as it fails Flink's job.
 * The scalar found converts to the RETURNING type: its JSON text for STRING (a number as Jackson reads
 * it), a JSON boolean to BOOLEAN, an integer within INT's range to INT, a number to DOUBLE. Any other
 * scalar fails the query: Flink's ON ERROR does not cover the conversion, and its job fails there too
 * (Flink 2.3 also fails on every number RETURNING DOUBLE, which its documentation converts: the
 * dagger converts it).
 */
public final class FlinkJsonValue {
  private FlinkJsonValue() {}

  /** What an empty result or an error gives. */
  enum Behavior {
    NULL,
    ERROR,
    DEFAULT
  }

  private static final ObjectMapper MAPPER =
      new ObjectMapper().configure(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS, true);
  private static final JacksonJsonProvider PROVIDER = new JacksonJsonProvider(MAPPER);
  private static final Configuration STRICT =
      Configuration.builder()
          .jsonProvider(PROVIDER)
          .mappingProvider(new JacksonMappingProvider(MAPPER))
          .build();
  private static final Configuration LAX = STRICT.addOptions(Option.SUPPRESS_EXCEPTIONS);
  private static final Pattern MODE =
      Pattern.compile("^\\s*(strict|lax)\\s+(.+)$", Pattern.CASE_INSENSITIVE | Pattern.DOTALL);

  /** Spark's function: NULL for a NULL document or path, as Flink's. */
  public static final class Text
      implements UDF7<String, String, String, String, String, String, String, String> {
    @Override
    public String call(
        String json,
        String path,
        String returning,
        String onEmpty,
        String emptyDefault,
        String onError,
        String errorDefault) {
      if (json == null || path == null) {
        return null;
      }
      return value(
          json,
          path,
          returning,
          Behavior.valueOf(onEmpty),
          emptyDefault,
          Behavior.valueOf(onError),
          errorDefault);
    }
  }

  /** The value at {@code path} as the RETURNING type's text, or what its behaviors give. */
  static String value(
      String json,
      String path,
      String returning,
      Behavior onEmpty,
      String emptyDefault,
      Behavior onError,
      String errorDefault) {
    Matcher mode = MODE.matcher(path);
    boolean lax = mode.matches() && mode.group(1).equalsIgnoreCase("lax");
    String spec = mode.matches() ? mode.group(2) : path;
    Object found;
    try {
      Object document;
      try {
        document = PROVIDER.parse(json);
      } catch (RuntimeException error) {
        if (lax) {
          return empty(onEmpty, emptyDefault);
        }
        throw error;
      }
      found = JsonPath.parse(document, lax ? LAX : STRICT).read(spec);
    } catch (RuntimeException error) {
      return failed(onError, errorDefault, error);
    }
    if (found == null && !lax) {
      String message = "Strict jsonpath mode requires a non empty returned value, but is null";
      return failed(onError, errorDefault, new IllegalArgumentException(message));
    }
    if (found == null || (lax && !isScalar(found))) {
      return empty(onEmpty, emptyDefault);
    }
    if (!isScalar(found)) {
      String message = "Strict jsonpath mode requires scalar value, and the actual value is: " + found;
      return failed(onError, errorDefault, new IllegalArgumentException(message));
    }
    return converted(found, returning, path);
  }

  private static boolean isScalar(Object value) {
    return !(value instanceof Map) && !(value instanceof Collection);
  }

  private static String empty(Behavior behavior, String defaultValue) {
    return switch (behavior) {
      case NULL -> null;
      case DEFAULT -> defaultValue;
      case ERROR -> throw new IllegalStateException("Empty result of JSON_VALUE function is not allowed");
    };
  }

  private static String failed(Behavior behavior, String defaultValue, RuntimeException error) {
    return switch (behavior) {
      case NULL -> null;
      case DEFAULT -> defaultValue;
      case ERROR -> throw new IllegalStateException("JSON_VALUE: " + error.getMessage(), error);
    };
  }

  private static String converted(Object found, String returning, String path) {
    boolean fits =
        switch (returning) {
          case "BOOLEAN" -> found instanceof Boolean;
          case "INT" -> found instanceof Integer;
          case "DOUBLE" -> found instanceof Number;
          default -> true;
        };
    if (!fits) {
      throw new IllegalStateException(
          "JSON_VALUE(..., '"
              + path
              + "' RETURNING "
              + returning
              + "): the value "
              + found
              + " does not convert to "
              + returning
              + " (ON ERROR does not cover the conversion; Flink's job fails here too)");
    }
    if (returning.equals("DOUBLE")) {
      return String.valueOf(((Number) found).doubleValue());
    }
    return String.valueOf(found);
  }
}

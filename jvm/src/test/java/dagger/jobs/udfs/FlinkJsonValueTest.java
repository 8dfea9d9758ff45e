package dagger.jobs.udfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dagger.jobs.udfs.FlinkJsonValue.Behavior;
import org.junit.jupiter.api.Test;

/**
 * JSON_VALUE on the values Apache Flink 2.3 gave for the same documents and paths over a column (the
 * Flink oracle's {@code json_value_*} queries run them end to end).
 */
class FlinkJsonValueTest {
  private static final String DOCUMENT =
      "{\"s\": \"text\", \"i\": 42, \"d\": 2.5, \"b\": true, \"o\": {\"x\": 1}, \"a\": [1, 2],"
          + " \"n\": null, \"e\": 1e3, \"big\": 12345678901}";

  private static String value(String json, String path, String returning) {
    return FlinkJsonValue.value(json, path, returning, Behavior.NULL, null, Behavior.NULL, null);
  }

  private static String withDefaults(String json, String path) {
    return FlinkJsonValue.value(
        json, path, "STRING", Behavior.DEFAULT, "empty", Behavior.DEFAULT, "error");
  }

  @Test
  void aScalarIsItsJsonTextAsJacksonReadsIt() {
    assertEquals("text", value(DOCUMENT, "$.s", "STRING"));
    assertEquals("42", value(DOCUMENT, "$.i", "STRING"));
    assertEquals("2.5", value(DOCUMENT, "$.d", "STRING"));
    assertEquals("true", value(DOCUMENT, "$.b", "STRING"));
    assertEquals("1E+3", value(DOCUMENT, "$.e", "STRING"));
    assertEquals("12345678901", value(DOCUMENT, "$.big", "STRING"));
    assertEquals("2", value(DOCUMENT, "LAX $.a[1]", "STRING"));
  }

  @Test
  void laxModeMakesMissingValuesObjectsAndBadDocumentsEmpty() {
    assertEquals("empty", withDefaults(DOCUMENT, "lax $.missing"));
    assertEquals("empty", withDefaults(DOCUMENT, "lax $.o"));
    assertEquals("empty", withDefaults("not json", "lax $.s"));
    assertEquals("empty", withDefaults(DOCUMENT, "lax $.n"));
  }

  @Test
  void strictModeTheDefaultMakesThemErrors() {
    assertEquals("error", withDefaults(DOCUMENT, "$.missing"));
    assertEquals("error", withDefaults(DOCUMENT, "strict $.missing"));
    assertEquals("error", withDefaults(DOCUMENT, "$.a"));
    assertEquals("error", withDefaults("not json", "$.s"));
    assertEquals("error", withDefaults(DOCUMENT, "$..x"));
    assertEquals("error", withDefaults(DOCUMENT, "bad path"));
    assertEquals("error", withDefaults(DOCUMENT, "$.n"));
    assertNull(value(DOCUMENT, "$.missing", "STRING"));
  }

  @Test
  void errorBehaviorsFailTheQuery() {
    assertThrows(
        IllegalStateException.class,
        () ->
            FlinkJsonValue.value(
                DOCUMENT, "lax $.missing", "STRING", Behavior.ERROR, null, Behavior.NULL, null));
    assertThrows(
        IllegalStateException.class,
        () ->
            FlinkJsonValue.value(
                DOCUMENT, "$.missing", "STRING", Behavior.NULL, null, Behavior.ERROR, null));
  }

  @Test
  void returningConvertsOnlyTheScalarsOfItsKind() {
    assertEquals("42", value(DOCUMENT, "$.i", "INT"));
    assertEquals("true", value(DOCUMENT, "$.b", "BOOLEAN"));
    assertEquals("2.5", value(DOCUMENT, "$.d", "DOUBLE"));
    assertEquals("42.0", value(DOCUMENT, "$.i", "DOUBLE"));
    assertThrows(IllegalStateException.class, () -> value(DOCUMENT, "$.d", "INT"));
    assertThrows(IllegalStateException.class, () -> value(DOCUMENT, "$.big", "INT"));
    assertThrows(IllegalStateException.class, () -> value(DOCUMENT, "$.s", "INT"));
    assertThrows(IllegalStateException.class, () -> value(DOCUMENT, "$.i", "BOOLEAN"));
    assertThrows(IllegalStateException.class, () -> value(DOCUMENT, "$.s", "DOUBLE"));
  }
}

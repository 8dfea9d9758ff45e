package dagger.jobs.udfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import scala.jdk.javaapi.CollectionConverters;

/** The JSON functions on Jayway, and the SQL values JsonUpdate writes. */
class JsonFunctionsTest {
  @Test
  void queryPrintsWhatThePathSelectsAndNullForAMissingLeaf() throws Exception {
    JsonFunctions.JsonQuery query = new JsonFunctions.JsonQuery();
    assertEquals("\"v\"", query.call("{\"k\":\"v\"}", "$.k"));
    assertEquals("[1,2]", query.call("{\"a\":[1,2,3]}", "$.a[0:2]"));
    assertEquals("3", query.call("{\"a\":[1,2,3]}", "$.a.length()"));
    assertNull(query.call("{\"k\":\"v\"}", "$.missing"));
  }

  @Test
  void sqlValuesBecomeJson() {
    StructType struct = new StructType().add("n", DataTypes.IntegerType).add("s", DataTypes.StringType);
    Object row = new GenericRowWithSchema(new Object[] {1, "x"}, struct);
    assertEquals(Map.of("n", 1, "s", "x"), JsonFunctions.jsonValue(row));
    assertEquals(3L, JsonFunctions.jsonValue(new BigDecimal("3.000")));
    assertEquals(2.5, JsonFunctions.jsonValue(new BigDecimal("2.50")));
    assertEquals("héllo", JsonFunctions.jsonValue("héllo".getBytes(StandardCharsets.UTF_8)));
    Object seq = CollectionConverters.asScala(List.of(1, 2)).toSeq();
    assertEquals(List.of(1, 2), JsonFunctions.jsonValue(seq));
    Object map = scala.collection.immutable.Map$.MODULE$.<String, Object>empty().updated("k", 1);
    assertEquals(Map.of("k", 1), JsonFunctions.jsonValue(map));
  }

  @Test
  void updateAddsAMissingLeafAndDeleteRemovesIt() {
    assertEquals("{\"a\":1,\"b\":\"v\"}", new JsonFunctions.JsonUpdate().call("{\"a\":1}", "$.b", "v"));
    assertEquals("{\"a\":1}", new JsonFunctions.JsonDelete().call("{\"a\":1,\"b\":2}", "$.b"));
  }

  @Test
  void errorsNameTheFunctionAndTheArgument() {
    IllegalArgumentException badPath = assertThrows(
        IllegalArgumentException.class, () -> new JsonFunctions.JsonQuery().call("{}", "$ .k"));
    assertEquals("JsonQuery: jsonPath: Illegal character at position 1 expected '.' or '['", badPath.getMessage());
    IllegalArgumentException noDocument = assertThrows(
        IllegalArgumentException.class, () -> new JsonFunctions.JsonDelete().call(null, "$.k"));
    assertEquals("JsonDelete: jsonEvent: json string can not be null or empty", noDocument.getMessage());
    IllegalArgumentException missing = assertThrows(
        IllegalArgumentException.class, () -> new JsonFunctions.JsonUpdate().call("{}", "$.a.b", 1));
    assertEquals("JsonUpdate: Missing property in path $['a']", missing.getMessage());
  }
}

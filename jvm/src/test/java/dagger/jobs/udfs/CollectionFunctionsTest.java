package dagger.jobs.udfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.sql.Timestamp;
import java.util.List;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import scala.jdk.javaapi.CollectionConverters;

/** MapGet's key matching and the text Dagger's functions print values as. */
class CollectionFunctionsTest {
  private static final StructType ENTRY =
      new StructType().add("key", DataTypes.StringType).add("value", DataTypes.DoubleType);

  private static Object map(Object key, Object value) {
    return scala.collection.immutable.Map$.MODULE$.<Object, Object>empty().updated(key, value);
  }

  @Test
  void mapGetMatchesNumbersByValueAndNeverTextWithANumber() {
    CollectionFunctions.MapGet mapGet = new CollectionFunctions.MapGet();
    assertEquals("4", mapGet.call(map("a", 4), "a"));
    assertNull(mapGet.call(map("a", 4), "b"));
    assertEquals("one", mapGet.call(map(1L, "one"), 1));
    assertEquals("one", mapGet.call(map(1, "one"), 1.0));
    assertNull(mapGet.call(map(1, "one"), 1.5));
    assertNull(mapGet.call(map(1, "one"), "1"));
    assertNull(mapGet.call(null, "a"));
  }

  @Test
  void mapGetReadsDaggersKeyValueRowsFirstMatchFirst() {
    Object rows =
        CollectionConverters.asScala(
                List.<Object>of(
                    new GenericRowWithSchema(new Object[] {"k", 2.0}, ENTRY),
                    new GenericRowWithSchema(new Object[] {"k", 3.0}, ENTRY)))
            .toSeq();
    assertEquals("2.0", new CollectionFunctions.MapGet().call(rows, "k"));
    Object notRows = CollectionConverters.asScala(List.<Object>of("k")).toSeq();
    IllegalArgumentException error =
        assertThrows(IllegalArgumentException.class, () -> new CollectionFunctions.MapGet().call(notRows, "k"));
    assertEquals(
        "MapGet: the first argument must be a map or an array of (key, value) rows, got "
            + notRows.getClass().getSimpleName(),
        error.getMessage());
  }

  @Test
  void elementAtCountsFromTheEndAndGivesNullOutOfRange() {
    CollectionFunctions.ElementAt elementAt = new CollectionFunctions.ElementAt();
    Object letters = CollectionConverters.asScala(List.<Object>of("a", "b", "c")).toSeq();
    assertEquals("b", elementAt.call(letters, 1));
    assertEquals("c", elementAt.call(letters, -1));
    assertNull(elementAt.call(letters, 3));
    assertNull(elementAt.call(letters, -4));
    assertEquals("3.0", elementAt.call(CollectionConverters.asScala(List.<Object>of(3.0)).toSeq(), 0L));
  }

  @Test
  void elementAtPathReadsADottedFieldOfTheRowAtTheIndex() {
    StructType start = new StructType().add("latitude", DataTypes.DoubleType);
    StructType route =
        new StructType().add("start", start).add("end", start).add("distance", DataTypes.FloatType);
    Object routes =
        CollectionConverters.asScala(
                List.<Object>of(
                    new GenericRowWithSchema(
                        new Object[] {new GenericRowWithSchema(new Object[] {-6.17}, start), null, 21.5f},
                        route)))
            .toSeq();
    CollectionFunctions.ElementAtPath path = new CollectionFunctions.ElementAtPath();
    assertEquals("-6.17", path.call(routes, "routes", 0, "start.latitude", null));
    assertEquals("21.5", path.call(routes, "routes", 0, "distance", "booking"));
    assertEquals("null", path.call(routes, "routes", 0, "end", null)); // a NULL leaf
    assertEquals("", path.call(routes, "routes", 0, "end.latitude", null)); // through a NULL row
    assertEquals("", path.call(routes, "routes", 0, "start.invalid", null));
    assertEquals("", path.call(routes, "routes", -1, "distance", null)); // no counting from the end
    assertEquals("", path.call(null, "routes", 0, "distance", null));
  }

  @Test
  void valuesPrintAsJavaPrintsThem() {
    assertEquals("1.0E10", CollectionFunctions.daggerText(1.0e10));
    assertEquals("0.1", CollectionFunctions.daggerText(0.1f));
    assertEquals("true", CollectionFunctions.daggerText(true));
    assertEquals("aGk=", CollectionFunctions.daggerText("hi".getBytes(StandardCharsets.UTF_8)));
    assertEquals("2023-11-14T22:13:20Z", CollectionFunctions.daggerText(new Timestamp(1_700_000_000_000L)));
    assertEquals(
        "2023-11-14T22:13:20.123000Z", CollectionFunctions.daggerText(new Timestamp(1_700_000_000_123L)));
    StructType point = new StructType().add("x", DataTypes.IntegerType);
    assertEquals("{\"x\":1}", CollectionFunctions.daggerText(new GenericRowWithSchema(new Object[] {1}, point)));
    assertNull(CollectionFunctions.daggerText(null));
  }
}

package dagger.jobs.udfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import scala.jdk.javaapi.CollectionConverters;

/** ArrayAggregate's and ArrayOperate's Java streams: widths, steps, empty streams and their errors. */
class ArrayFunctionsTest {
  private static final ArrayFunctions.ArrayAggregate AGGREGATE = new ArrayFunctions.ArrayAggregate();
  private static final ArrayFunctions.ArrayOperate OPERATE = new ArrayFunctions.ArrayOperate();

  private static Object array(Object... elements) {
    return CollectionConverters.asScala(Arrays.asList(elements)).toSeq();
  }

  private static String failure(Runnable call) {
    return assertThrows(IllegalArgumentException.class, call::run).getMessage();
  }

  @Test
  void integerSumsWrapAtTheirJavaWidth() {
    assertEquals(-2147483648.0, AGGREGATE.call(array(2147483647, 1), "sum", "int"));
    assertEquals(2147483648.0, AGGREGATE.call(array(2147483647, 1), "sum", "long"));
    assertEquals(-9223372036854775808.0, AGGREGATE.call(array(Long.MAX_VALUE, 1L), "sum", "bigint"));
  }

  @Test
  void elementsAreReadAsTheDeclaredType() {
    assertEquals(3.75, AGGREGATE.call(array("1.5", "2.25"), "sum", "Float"));
    assertEquals(5.0, AGGREGATE.call(array("2", " 3 "), "sum", "INTEGER"));
    assertEquals((double) 0.1f, AGGREGATE.call(array(0.1), "findFirst", "float"));
    assertEquals(
        "ArrayAggregate: element 1.5 is not of inputDataType int",
        failure(() -> AGGREGATE.call(array(1.5), "sum", "int")));
    assertEquals(
        "ArrayAggregate: element 'x' is not of inputDataType long",
        failure(() -> AGGREGATE.call(array("x"), "sum", "long")));
    assertEquals(
        "ArrayOperate: element null is not of inputDataType double",
        failure(() -> OPERATE.call(array(1.0, null), "sorted", "double")));
  }

  @Test
  void anEmptyStreamsOptionalIsZeroAndAnOtherFindFirstNull() {
    assertEquals(0.0, AGGREGATE.call(array(), "min", "int"));
    assertEquals(0.0, AGGREGATE.call(array(), "average", "double"));
    assertEquals(0.0, AGGREGATE.call(array(), "count", "other"));
    assertNull(AGGREGATE.call(array(), "findFirst", "other"));
    assertNull(AGGREGATE.call(null, "sum", "int"));
  }

  @Test
  void distinctKeepsTheFirstOfEqualElementsRowsByContent() {
    StructType point = new StructType().add("x", DataTypes.IntegerType);
    Object rows =
        array(
            new GenericRowWithSchema(new Object[] {1}, point),
            new GenericRowWithSchema(new Object[] {1}, point),
            new GenericRowWithSchema(new Object[] {2}, point));
    assertEquals(2.0, AGGREGATE.call(rows, "distinct.count", "other"));
    assertEquals(List.of("a", "b", "v"), OPERATE.call(array("a", "a", "b", "v", "a"), "distinct", "Other"));
    assertEquals(List.of("1", "2"), OPERATE.call(array(1, 2, 1, 2, 1), "distinct.sorted", "int"));
    assertEquals(List.of("0.1", "1.3"), OPERATE.call(array(1.3, 0.1, 1.3), "distinct.sorted", "double"));
    assertEquals(2.0, AGGREGATE.call(array(5, 9, 2), "sorted.findFirst", "int"));
  }

  @Test
  void wrongOperationsAndTypesNameTheFunctionWithDaggersText() {
    assertEquals(
        "ArrayAggregate: No support for inputDataType: String.Please provide 'Other' as inputDataType "
            + "instead.",
        failure(() -> AGGREGATE.call(array("a"), "distinct.count", "String")));
    assertEquals(
        "ArrayAggregate: unsolvable function/method 'coun' in operationType 'distinct.coun'",
        failure(() -> AGGREGATE.call(array("a"), "distinct.coun", "other")));
    assertEquals(
        "ArrayAggregate: unsolvable function/method 'sum' in operationType 'sum'",
        failure(() -> AGGREGATE.call(array("a"), "sum", "other")));
    assertEquals(
        "ArrayAggregate: operationType 'distinct.sorted' ends with 'sorted', which gives an array, not a "
            + "value: end it with one of average, count, findAny, findFirst, max, min, sum (or use "
            + "ArrayOperate)",
        failure(() -> AGGREGATE.call(array(1), "distinct.sorted", "int")));
    assertEquals(
        "ArrayAggregate: findFirst of 'Other' elements gives 'a', which is not a number; use "
            + "ElementAt(array, 0)",
        failure(() -> AGGREGATE.call(array("a"), "findFirst", "other")));
    StructType point = new StructType().add("x", DataTypes.IntegerType);
    Object rows =
        array(
            new GenericRowWithSchema(new Object[] {2}, point),
            new GenericRowWithSchema(new Object[] {1}, point));
    assertEquals(
        "ArrayOperate: 'sorted' needs comparable elements, got [[2], [1]]",
        failure(() -> OPERATE.call(rows, "sorted", "other")));
  }
}

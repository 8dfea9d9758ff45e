package dagger.jobs.udfs;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.DoubleSummaryStatistics;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF3;

/**
 * Dagger's ArrayAggregate and ArrayOperate in the JVM. Dagger runs a Java stream of the declared
 * input type over the array ({@code IntStream} for 'int', {@code LongStream} for 'long', {@code
 * DoubleStream} for 'double' and 'float', a stream of objects for 'other'): {@code distinct} and
 * {@code sorted} steps, then, for ArrayAggregate, a terminal. A Spark function has one result
 * type, so ArrayAggregate returns a DOUBLE and ArrayOperate the elements as text; the SQL stage
 * casts a call whose operation and input type are literals to the type Dagger's stream gives
 * ({@code jobs/udfs/arrays.py}).
 */
public final class ArrayFunctions {
  private static final Set<String> STREAM_STEPS = Set.of("distinct", "sorted");
  private static final Set<String> NUMBER_TERMINALS =
      Set.of("average", "sum", "min", "max", "count", "findFirst", "findAny");
  private static final Set<String> OTHER_TERMINALS = Set.of("count", "findFirst", "findAny");

  private ArrayFunctions() {}

  /** Dagger's inputDataType: how an element is read, and the width Java's integer sums wrap at. */
  private enum ElementType {
    INT,
    LONG,
    DOUBLE,
    FLOAT,
    OTHER;

    static ElementType named(String function, String inputDataType) {
      switch (inputDataType.toUpperCase(Locale.ROOT)) {
        case "INTEGER", "INT":
          return INT;
        case "LONG", "BIGINT":
          return LONG;
        case "DOUBLE":
          return DOUBLE;
        case "FLOAT":
          return FLOAT;
        case "OTHER":
          return OTHER;
        default: // after the function's name, Dagger's message word for word
          throw new IllegalArgumentException(
              function
                  + ": No support for inputDataType: "
                  + inputDataType
                  + ".Please provide 'Other' as inputDataType instead.");
      }
    }

    boolean integral() {
      return this == INT || this == LONG;
    }

    /** The element as the stream holds it: a Long for the integer types, else a Double. */
    Object read(String function, Object element, String inputDataType) {
      try {
        if (this == OTHER) {
          return element;
        }
        if (integral()) {
          if (element instanceof Long || element instanceof Integer
              || element instanceof Short || element instanceof Byte) {
            return ((Number) element).longValue();
          }
          if (element instanceof String text) {
            return Long.parseLong(text.trim());
          }
        } else if (element instanceof Number || element instanceof String) {
          double value =
              element instanceof Number number
                  ? number.doubleValue()
                  : Double.parseDouble((String) element);
          return this == FLOAT ? (double) (float) value : value;
        }
      } catch (NumberFormatException unreadable) {
        // the message below names the element
      }
      throw new IllegalArgumentException(
          function + ": element " + shown(element) + " is not of inputDataType " + inputDataType);
    }
  }

  private static String shown(Object element) {
    return element instanceof String text ? "'" + text + "'" : String.valueOf(element);
  }

  private static List<Object> readElements(
      String function, Object array, ElementType type, String inputDataType) {
    if (!(array instanceof scala.collection.Seq<?> seq)) {
      throw new IllegalArgumentException(
          function + ": the first argument must be an array, got "
              + array.getClass().getSimpleName());
    }
    List<Object> values = new ArrayList<>(seq.size());
    for (Object element : scala.jdk.javaapi.CollectionConverters.asJava(seq)) {
      values.add(type.read(function, element, inputDataType));
    }
    return values;
  }

  /** Java's {@code equals} on the elements; rows and arrays compare by their content. */
  private static Object identity(Object value) {
    return value instanceof Row || value instanceof scala.collection.Iterable<?>
        ? List.of("nested", CollectionFunctions.daggerText(value))
        : value;
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static List<Object> step(String function, List<Object> values, String step) {
    if (step.equals("distinct")) {
      Map<Object, Object> firstSeen = new LinkedHashMap<>();
      for (Object value : values) {
        firstSeen.putIfAbsent(identity(value), value);
      }
      return new ArrayList<>(firstSeen.values());
    }
    List<Object> sorted = new ArrayList<>(values);
    try {
      sorted.sort((left, right) -> ((Comparable) left).compareTo(right));
    } catch (ClassCastException | NullPointerException incomparable) {
      throw new IllegalArgumentException(
          function + ": 'sorted' needs comparable elements, got " + values, incomparable);
    }
    return sorted;
  }

  private static IllegalArgumentException unsolvable(
      String function, String step, String operationType) {
    return new IllegalArgumentException(
        function + ": unsolvable function/method '" + step + "' in operationType '" + operationType
            + "'");
  }

  private static List<Object> stepped(
      String function, List<Object> values, List<String> steps, String operationType) {
    for (String step : steps) {
      if (!STREAM_STEPS.contains(step)) {
        throw unsolvable(function, step, operationType);
      }
      values = step(function, values, step);
    }
    return values;
  }

  /** The stream's terminal; an empty stream's Optional gives 0, as Dagger unwraps it. */
  private static Double terminal(List<Object> values, String terminal, ElementType type) {
    if (terminal.equals("count")) {
      return (double) values.size();
    }
    if (terminal.equals("findFirst") || terminal.equals("findAny")) {
      if (values.isEmpty()) {
        return type == ElementType.OTHER ? null : 0.0;
      }
      Object first = values.get(0);
      if (!(first instanceof Number number)) {
        throw new IllegalArgumentException(
            "ArrayAggregate: " + terminal + " of 'Other' elements gives " + shown(first)
                + ", which is not a number; use ElementAt(array, 0)");
      }
      return number.doubleValue();
    }
    if (values.isEmpty()) {
      return 0.0;
    }
    if (type.integral()) {
      long sum = 0;
      long min = Long.MAX_VALUE;
      long max = Long.MIN_VALUE;
      for (Object value : values) {
        long number = (Long) value;
        sum += number;
        min = Math.min(min, number);
        max = Math.max(max, number);
      }
      return switch (terminal) {
        case "sum" -> (double) (type == ElementType.INT ? (int) sum : sum); // an int sum wraps
        case "average" -> values.stream().mapToLong(value -> (Long) value).average().orElse(0);
        case "min" -> (double) min;
        default -> (double) max;
      };
    }
    DoubleSummaryStatistics statistics =
        values.stream().mapToDouble(value -> (Double) value).summaryStatistics();
    return switch (terminal) {
      case "sum" -> statistics.getSum();
      case "average" -> statistics.getAverage();
      case "min" -> statistics.getMin();
      default -> statistics.getMax();
    };
  }

  /**
   * {@code ArrayAggregate(array, operationType, inputDataType)}: {@code distinct}/{@code sorted}
   * steps then one terminal ({@code 'distinct.count'}), as a DOUBLE.
   */
  public static final class ArrayAggregate implements UDF3<Object, String, String, Double> {
    private static final long serialVersionUID = 1L;

    @Override
    public Double call(Object array, String operationType, String inputDataType) {
      if (array == null || operationType == null || inputDataType == null) {
        return null;
      }
      ElementType type = ElementType.named("ArrayAggregate", inputDataType);
      List<Object> values = readElements("ArrayAggregate", array, type, inputDataType);
      List<String> steps = Arrays.asList(operationType.split("\\.", -1));
      String last = steps.get(steps.size() - 1);
      values = stepped("ArrayAggregate", values, steps.subList(0, steps.size() - 1), operationType);
      Set<String> terminals = type == ElementType.OTHER ? OTHER_TERMINALS : NUMBER_TERMINALS;
      if (!terminals.contains(last)) {
        if (STREAM_STEPS.contains(last)) {
          throw new IllegalArgumentException(
              "ArrayAggregate: operationType '" + operationType + "' ends with '" + last
                  + "', which gives an array, not a value: end it with one of "
                  + String.join(", ", new TreeSet<>(terminals)) + " (or use ArrayOperate)");
        }
        throw unsolvable("ArrayAggregate", last, operationType);
      }
      return terminal(values, last, type);
    }
  }

  /**
   * {@code ArrayOperate(array, operationType, inputDataType)}: the array after {@code
   * distinct}/{@code sorted} steps, its elements as text (a double's as {@code Double.toString}).
   */
  public static final class ArrayOperate implements UDF3<Object, String, String, List<String>> {
    private static final long serialVersionUID = 1L;

    @Override
    public List<String> call(Object array, String operationType, String inputDataType) {
      if (array == null || operationType == null || inputDataType == null) {
        return null;
      }
      ElementType type = ElementType.named("ArrayOperate", inputDataType);
      List<Object> values = readElements("ArrayOperate", array, type, inputDataType);
      List<String> steps = Arrays.asList(operationType.split("\\.", -1));
      values = stepped("ArrayOperate", values, steps, operationType);
      List<String> texts = new ArrayList<>(values.size());
      for (Object value : values) {
        texts.add(CollectionFunctions.daggerText(value));
      }
      return texts;
    }
  }
}

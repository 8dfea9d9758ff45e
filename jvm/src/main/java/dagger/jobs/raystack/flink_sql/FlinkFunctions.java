package dagger.jobs.raystack.flink_sql;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.analysis.UnresolvedExtractValue;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.LambdaFunction;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.TimestampAdd;
import org.apache.spark.sql.catalyst.expressions.UnresolvedNamedLambdaVariable;
import org.apache.spark.sql.catalyst.expressions.objects.StaticInvoke;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Flink's casts to strings and the functions of Flink's that Spark lacks or computes otherwise, as
 * functions the Flink-SQL translator calls in their place ({@link FlinkTypes} registers them). Like the
 * typed functions, each looks at its arguments' types once Spark has resolved them and builds Spark's
 * own expressions, or a call of a static method here for what Spark has no expression of.
 *
 * <ul>
 *   <li>{@code FlinkCastString(x, precision)}: {@code CAST(x AS STRING)} in Flink's formats. Booleans
 *       are {@code TRUE} and {@code FALSE} (Spark: lower case); a timestamp has {@code precision}
 *       fraction digits, trailing zeros kept (Spark drops them, and the point with them); an array is
 *       {@code [a, b]}, a map {@code {k=v}}, a row {@code (a, b)}, their elements cast by the same rules
 *       and NULL ones {@code NULL} (Spark: {@code null}, {@code {k -> v}}, {@code {a, b}}). Numbers,
 *       dates and strings are Spark's cast, which Flink's agrees with (Java's {@code Double.toString},
 *       a DECIMAL with its scale).
 *   <li>{@code FlinkTruncate(x[, n])}: {@code x} cut (toward zero) to {@code n} digits after the point
 *       (before it, for a negative {@code n}), in {@code x}'s type; a DECIMAL's scale becomes {@code n},
 *       as Flink's return type. Spark has no TRUNCATE of a number.
 *   <li>{@code FlinkTimestampAdd(unit, n, t)}: Spark's TIMESTAMPADD, but a DATE plus days, weeks,
 *       months, quarters or years stays a DATE, as Flink's (Spark's is a TIMESTAMP).
 *   <li>{@code FlinkTimestampDiff(unit, t1, t2)}: an INT (Spark's is a BIGINT), whole units between the
 *       two instants' milliseconds, truncated toward zero; months (quarters, years) counted as Calcite's
 *       {@code subtractMonths}, for which the last day of a month is a whole month after the last day
 *       of the month before (Jan 31 to Feb 29 is one month, where Spark counts none).
 * </ul>
 */
public final class FlinkFunctions {
  private FlinkFunctions() {}

  private static final Map<String, Long> UNIT_MILLIS =
      Map.of(
          "SECOND", 1_000L,
          "MINUTE", 60_000L,
          "HOUR", 3_600_000L,
          "DAY", 86_400_000L,
          "WEEK", 7 * 86_400_000L);
  private static final Map<String, Integer> UNIT_MONTHS =
      Map.of("MONTH", 1, "QUARTER", 3, "YEAR", 12);
  private static final long MILLIS_PER_DAY = 86_400_000L;

  static void register(SparkSessionExtensions extensions) {
    FlinkTypes.inject(
        extensions,
        "FlinkCastString",
        2,
        arguments -> castString(arguments.get(0), intOf(arguments.get(1))));
    FlinkTypes.inject(extensions, "FlinkTruncate", 1, 2, FlinkFunctions::truncate);
    FlinkTypes.inject(
        extensions,
        "FlinkTimestampAdd",
        3,
        arguments -> timestampAdd(unitOf(arguments.get(0)), arguments.get(1), arguments.get(2)));
    FlinkTypes.inject(
        extensions,
        "FlinkTimestampDiff",
        3,
        arguments -> timestampDiff(unitOf(arguments.get(0)), arguments.get(1), arguments.get(2)));
  }

  private static int intOf(Expression literal) {
    if (!literal.foldable()) {
      throw new IllegalArgumentException("expected a constant, not " + literal.sql());
    }
    return ((Number) literal.eval(null)).intValue();
  }

  private static String unitOf(Expression literal) {
    return String.valueOf(literal.eval(null)).toUpperCase(Locale.ROOT);
  }

  private static Expression call(String name, Expression... arguments) {
    return UnresolvedFunction$.MODULE$.apply(name, seq(arguments), false);
  }

  private static Expression text(String value) {
    return Literal$.MODULE$.apply(value);
  }

  private static <T> Seq<T> seq(List<T> items) {
    return CollectionConverters.asScala(items).toSeq();
  }

  @SafeVarargs
  private static <T> Seq<T> seq(T... items) {
    return seq(List.of(items));
  }

  // --- CAST(x AS STRING) --------------------------------------------------------------------------------

  static Expression castString(Expression value, int precision) {
    DataType type = value.dataType();
    if (type instanceof BooleanType) {
      return call("upper", FlinkTypes.castTo(value, DataTypes.StringType));
    }
    if (type instanceof TimestampType || type instanceof TimestampNTZType) {
      return call("date_format", value, text(timestampPattern(precision)));
    }
    if (type instanceof ArrayType) {
      return inBrackets("[", elements(value, precision), "]");
    }
    if (type instanceof MapType) {
      Expression entry = lambdaVariable("entry");
      Expression pair =
          call(
              "concat",
              element(new UnresolvedExtractValue(entry, text("key")), precision),
              text("="),
              element(new UnresolvedExtractValue(entry, text("value")), precision));
      Expression pairs = call("transform", call("map_entries", value), lambda(pair, entry));
      return inBrackets("{", pairs, "}");
    }
    if (type instanceof StructType struct) {
      List<Expression> fields = new ArrayList<>();
      fields.add(text(", "));
      for (int ordinal = 0; ordinal < struct.fields().length; ordinal++) {
        fields.add(element(new GetStructField(value, ordinal, Option.empty()), precision));
      }
      Expression joined = call("concat_ws", fields.toArray(Expression[]::new));
      Expression none = Literal$.MODULE$.create(null, DataTypes.StringType);
      return call("if", call("isnull", value), none, call("concat", text("("), joined, text(")")));
    }
    return FlinkTypes.castTo(value, DataTypes.StringType);
  }

  /** Flink's timestamp text: {@code precision} fraction digits, none (and no point) for 0. */
  static String timestampPattern(int precision) {
    if (precision < 0 || precision > 9) {
      throw new IllegalArgumentException("a timestamp's precision is 0 to 9, not " + precision);
    }
    return precision == 0 ? "yyyy-MM-dd HH:mm:ss" : "yyyy-MM-dd HH:mm:ss." + "S".repeat(precision);
  }

  private static Expression elements(Expression array, int precision) {
    Expression element = lambdaVariable("element");
    return call("transform", array, lambda(element(element, precision), element));
  }

  /** An element of a collection as Flink prints it: cast by the same rules, NULL as {@code NULL}. */
  private static Expression element(Expression value, int precision) {
    Expression cast = call("FlinkCastString", value, Literal$.MODULE$.apply(precision));
    return call("coalesce", cast, text("NULL"));
  }

  private static Expression inBrackets(String open, Expression parts, String close) {
    return call("concat", text(open), call("array_join", parts, text(", ")), text(close));
  }

  private static Expression lambdaVariable(String name) {
    return new UnresolvedNamedLambdaVariable(seq(name));
  }

  private static Expression lambda(Expression body, Expression variable) {
    return new LambdaFunction(body, seq((NamedExpression) variable), false);
  }

  // --- TRUNCATE -----------------------------------------------------------------------------------------

  static Expression truncate(List<Expression> arguments) {
    Expression value = arguments.get(0);
    Expression digits =
        FlinkTypes.castTo(
            arguments.size() > 1 ? arguments.get(1) : Literal$.MODULE$.apply(0), DataTypes.IntegerType);
    DataType type = value.dataType();
    if (type instanceof DoubleType || type instanceof FloatType) {
      Expression doubles = FlinkTypes.castTo(value, DataTypes.DoubleType);
      return FlinkTypes.castTo(invoke(DataTypes.DoubleType, "truncateDouble", doubles, digits), type);
    }
    if (FlinkTypes.isInteger(type)) {
      Expression longs = FlinkTypes.castTo(value, DataTypes.LongType);
      return FlinkTypes.castTo(invoke(DataTypes.LongType, "truncateLong", longs, digits), type);
    }
    if (type instanceof DecimalType decimal) {
      DecimalType result = truncatedType(decimal, intOf(digits));
      return invoke(
          result,
          "truncateDecimal",
          value,
          digits,
          Literal$.MODULE$.apply(result.precision()),
          Literal$.MODULE$.apply(result.scale()));
    }
    throw new IllegalArgumentException("TRUNCATE takes a number, not " + type.sql());
  }

  /** Flink's type of TRUNCATE(DECIMAL(p, s), n) (its rounding functions' rule). */
  static DecimalType truncatedType(DecimalType type, int digits) {
    int precision = type.precision();
    int scale = type.scale();
    if (digits >= scale) {
      return type;
    }
    if (digits < 0) {
      return new DecimalType(Math.min(38, 1 + precision - scale), 0);
    }
    return new DecimalType(1 + precision - scale + digits, digits);
  }

  public static double truncateDouble(double value, int digits) {
    if (Double.isNaN(value) || Double.isInfinite(value)) {
      return value;
    }
    return cut(BigDecimal.valueOf(value), digits).doubleValue();
  }

  public static long truncateLong(long value, int digits) {
    if (digits >= 0) {
      return value;
    }
    long unit = BigDecimal.ONE.movePointRight(-digits).longValueExact();
    return value / unit * unit;
  }

  public static Decimal truncateDecimal(Decimal value, int digits, int precision, int scale) {
    BigDecimal cut = cut(value.toJavaBigDecimal(), digits).setScale(scale, RoundingMode.DOWN);
    return Decimal.apply(cut, precision, scale);
  }

  private static BigDecimal cut(BigDecimal value, int digits) {
    return value.movePointRight(digits).setScale(0, RoundingMode.DOWN).movePointLeft(digits);
  }

  // --- TIMESTAMPADD and TIMESTAMPDIFF -------------------------------------------------------------------

  static Expression timestampAdd(String unit, Expression quantity, Expression instant) {
    if (!UNIT_MILLIS.containsKey(unit) && !UNIT_MONTHS.containsKey(unit)) {
      throw new IllegalArgumentException("TIMESTAMPADD takes " + units() + ", not " + unit);
    }
    Expression added = new TimestampAdd(unit, quantity, instant, Option.empty());
    boolean wholeDays = !List.of("SECOND", "MINUTE", "HOUR").contains(unit);
    return instant.dataType() instanceof DateType && wholeDays
        ? FlinkTypes.castTo(added, DataTypes.DateType)
        : added;
  }

  static Expression timestampDiff(String unit, Expression from, Expression to) {
    Expression start = millis(from);
    Expression end = millis(to);
    if (UNIT_MILLIS.containsKey(unit)) {
      Expression unitMillis = Literal$.MODULE$.apply(UNIT_MILLIS.get(unit));
      return invoke(DataTypes.IntegerType, "diffUnits", start, end, unitMillis);
    }
    if (UNIT_MONTHS.containsKey(unit)) {
      Expression perUnit = Literal$.MODULE$.apply(UNIT_MONTHS.get(unit));
      return invoke(DataTypes.IntegerType, "diffMonths", start, end, perUnit);
    }
    throw new IllegalArgumentException("TIMESTAMPDIFF takes " + units() + ", not " + unit);
  }

  private static String units() {
    return "SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR";
  }

  /** An instant (a DATE at its midnight) as milliseconds, Flink's precision of an event time. */
  private static Expression millis(Expression instant) {
    return call("unix_millis", FlinkTypes.castTo(instant, DataTypes.TimestampType));
  }

  public static int diffUnits(long from, long to, long unitMillis) {
    return (int) ((to - from) / unitMillis);
  }

  public static int diffMonths(long from, long to, int monthsPerUnit) {
    return subtractMonths(to, from) / monthsPerUnit;
  }

  /** Calcite's {@code DateTimeUtils.subtractMonths} of two instants, which Flink's TIMESTAMPDIFF uses. */
  static int subtractMonths(long later, long earlier) {
    long laterTime = Math.floorMod(later, MILLIS_PER_DAY);
    long earlierTime = Math.floorMod(earlier, MILLIS_PER_DAY);
    long laterDay = Math.floorDiv(later, MILLIS_PER_DAY);
    long earlierDay = Math.floorDiv(earlier, MILLIS_PER_DAY);
    int months = subtractDays(laterDay, earlierDay);
    if (addMonths(earlierDay, months) == laterDay && laterTime < earlierTime) {
      months--;
    }
    return months;
  }

  private static int subtractDays(long laterDay, long earlierDay) {
    if (laterDay < earlierDay) {
      return -subtractDays(earlierDay, laterDay);
    }
    int months = (int) ((laterDay - earlierDay) / 31); // no month is longer: never too many
    while (addMonths(earlierDay, months) < laterDay && addMonths(earlierDay, months + 1) <= laterDay) {
      months++;
    }
    return months;
  }

  /** The day {@code months} later, the month's last day where it has fewer days. */
  private static long addMonths(long day, int months) {
    return LocalDate.ofEpochDay(day).plusMonths(months).toEpochDay();
  }

  private static Expression invoke(DataType result, String method, Expression... arguments) {
    return new StaticInvoke(
        FlinkFunctions.class,
        result,
        method,
        seq(arguments),
        CollectionConverters.asScala(List.<AbstractDataType>of()).toSeq(),
        true,
        true,
        true,
        Option.empty());
  }
}

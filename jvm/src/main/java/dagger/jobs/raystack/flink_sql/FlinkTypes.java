package dagger.jobs.raystack.flink_sql;

import java.util.List;
import java.util.function.Function;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.SparkSessionExtensionsProvider;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction$;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Divide;
import org.apache.spark.sql.catalyst.expressions.EvalMode;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.IntegralDivide;
import org.apache.spark.sql.catalyst.expressions.Remainder;
import org.apache.spark.sql.catalyst.expressions.aggregate.Average;
import org.apache.spark.sql.catalyst.expressions.aggregate.Count;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.catalyst.expressions.objects.StaticInvoke;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import scala.Option;
import scala.Tuple3;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.BoxedUnit;

/**
 * Flink's result types for the operators whose type Spark derives otherwise, as functions the Flink-SQL
 * translator calls in their place. Each looks at its arguments' types once Spark has resolved them, so the
 * types are the query's own (the streams' schemas, through every expression), and builds Spark's own
 * expressions: the query keeps its records in the JVM and its code generation.
 *
 * <ul>
 *   <li>{@code FlinkDivide(a, b)}: two integers divide as Java's integers do (truncated toward zero), in
 *       the wider of the two types; otherwise Spark's division.
 *   <li>{@code FlinkMod(a, b)}: the remainder of two integers has the divisor's type, as Flink's MOD
 *       and {@code %}; otherwise Spark's remainder.
 *   <li>{@code FlinkAvg(x)}: the average of an integer column is its sum divided by its count, truncated,
 *       in the column's type; otherwise Spark's AVG.
 *   <li>{@code FlinkSum(x)}: the sum of an integer column has the column's type (wrapping on overflow, as
 *       Java's integers); otherwise Spark's SUM.
 *   <li>{@code FlinkFloor(x)}, {@code FlinkCeil(x)}: a DOUBLE or FLOAT stays one ({@link Math#floor}); an
 *       integer is itself; a DECIMAL is Spark's FLOOR or CEIL.
 *   <li>{@code FlinkLn(x)}, {@code FlinkLog10(x)}, {@code FlinkLog2(x)}, {@code FlinkLog([base,] x)}: the
 *       logarithms as Flink computes them, with {@link Math#log} and {@link Math#log10}. Spark's use
 *       {@link StrictMath}, which can differ in the last digit, and give NULL for zero and negative
 *       numbers, where Flink gives -Infinity and NaN.
 * </ul>
 *
 * <p>The casts to strings and Flink's functions that Spark lacks are {@link FlinkFunctions}'.
 *
 * <p>Spark loads this class as a session extension ({@code spark.sql.extensions}, set with the project's
 * jars in {@code jobs/engine/spark.py}), so classic sessions and Spark Connect servers have the functions
 * alike.
 */
public final class FlinkTypes implements SparkSessionExtensionsProvider {

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    inject(extensions, "FlinkDivide", 2, arguments -> divide(arguments.get(0), arguments.get(1)));
    inject(extensions, "FlinkMod", 2, arguments -> remainder(arguments.get(0), arguments.get(1)));
    inject(extensions, "FlinkAvg", 1, arguments -> average(arguments.get(0)));
    inject(extensions, "FlinkSum", 1, arguments -> sum(arguments.get(0)));
    inject(extensions, "FlinkFloor", 1, arguments -> rounded(arguments.get(0), "floor"));
    inject(extensions, "FlinkCeil", 1, arguments -> rounded(arguments.get(0), "ceil"));
    inject(extensions, "FlinkLn", 1, arguments -> logarithm("ln", arguments));
    inject(extensions, "FlinkLog10", 1, arguments -> logarithm("log10", arguments));
    inject(extensions, "FlinkLog2", 1, arguments -> logarithm("log2", arguments));
    inject(extensions, "FlinkLog", 1, 2, arguments -> logarithm("log", arguments));
    FlinkFunctions.register(extensions);
    return BoxedUnit.UNIT;
  }

  static void inject(
      SparkSessionExtensions extensions,
      String name,
      int arity,
      Function<List<Expression>, Expression> builder) {
    inject(extensions, name, arity, arity, builder);
  }

  static void inject(
      SparkSessionExtensions extensions,
      String name,
      int fewestArguments,
      int mostArguments,
      Function<List<Expression>, Expression> builder) {
    ExpressionInfo info = new ExpressionInfo(FlinkTypes.class.getName(), name);
    scala.Function1<Seq<Expression>, Expression> checked =
        arguments -> {
          List<Expression> list = CollectionConverters.asJava(arguments);
          if (list.size() < fewestArguments || list.size() > mostArguments) {
            String arity =
                fewestArguments == mostArguments
                    ? String.valueOf(fewestArguments)
                    : fewestArguments + " or " + mostArguments;
            throw new IllegalArgumentException(
                name + " takes " + arity + " argument(s), not " + list.size());
          }
          return builder.apply(list);
        };
    extensions.injectFunction(new Tuple3<>(new FunctionIdentifier(name), info, checked));
  }

  private static Seq<Expression> seq(Expression... expressions) {
    return CollectionConverters.asScala(List.of(expressions)).toSeq();
  }

  static boolean isInteger(DataType type) {
    return type instanceof ByteType
        || type instanceof ShortType
        || type instanceof IntegerType
        || type instanceof LongType;
  }

  private static int integerWidth(DataType type) {
    return type.defaultSize();
  }

  /** The cast Java's narrowing does: it wraps, and never fails. */
  static Expression castTo(Expression value, DataType type) {
    return new Cast(value, type, Option.empty(), EvalMode.LEGACY());
  }

  static Expression divide(Expression dividend, Expression divisor) {
    DataType left = dividend.dataType();
    DataType right = divisor.dataType();
    if (isInteger(left) && isInteger(right)) {
      DataType wider = integerWidth(left) >= integerWidth(right) ? left : right;
      return castTo(new IntegralDivide(dividend, divisor), wider);
    }
    return new Divide(dividend, divisor);
  }

  static Expression remainder(Expression dividend, Expression divisor) {
    Expression remainder = new Remainder(dividend, divisor);
    boolean integers = isInteger(dividend.dataType()) && isInteger(divisor.dataType());
    return integers ? castTo(remainder, divisor.dataType()) : remainder;
  }

  static Expression average(Expression value) {
    if (!isInteger(value.dataType())) {
      return new Average(value);
    }
    Expression total = new Sum(castTo(value, DataTypes.LongType)).toAggregateExpression();
    Expression count = new Count(seq(value)).toAggregateExpression();
    return castTo(new IntegralDivide(total, count), value.dataType());
  }

  static Expression sum(Expression value) {
    if (!isInteger(value.dataType())) {
      return new Sum(value);
    }
    return castTo(new Sum(value).toAggregateExpression(), value.dataType());
  }

  static Expression rounded(Expression value, String method) {
    DataType type = value.dataType();
    if (type instanceof DoubleType || type instanceof FloatType) {
      return castTo(invokeOnDoubles(Math.class, method, value), type);
    }
    if (isInteger(type)) {
      return value;
    }
    // Spark's own FLOOR or CEIL, resolved as if the query had called it (its class differs across
    // Spark versions).
    return UnresolvedFunction$.MODULE$.apply(method, seq(value), false);
  }

  static Expression logarithm(String method, List<Expression> arguments) {
    return invokeOnDoubles(FlinkTypes.class, method, arguments.toArray(Expression[]::new));
  }

  /** A static method of doubles, called on the arguments cast to DOUBLE; NULL when one is NULL. */
  private static Expression invokeOnDoubles(Class<?> owner, String method, Expression... arguments) {
    Expression[] doubles = new Expression[arguments.length];
    for (int index = 0; index < arguments.length; index++) {
      doubles[index] = castTo(arguments[index], DataTypes.DoubleType);
    }
    return new StaticInvoke(
        owner,
        DataTypes.DoubleType,
        method,
        seq(doubles),
        CollectionConverters.asScala(List.<AbstractDataType>of()).toSeq(),
        true,
        true,
        true,
        Option.empty());
  }

  public static double ln(double value) {
    return Math.log(value);
  }

  public static double log(double value) {
    return Math.log(value);
  }

  public static double log(double base, double value) {
    return Math.log(value) / Math.log(base);
  }

  public static double log10(double value) {
    return Math.log10(value);
  }

  public static double log2(double value) {
    return Math.log(value) / Math.log(2);
  }
}

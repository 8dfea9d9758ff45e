package dagger.jobs.udfs;

import java.io.Serializable;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.sql.Date;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ScalaUDF;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A user's class of public {@code eval} methods (Flink's ScalarFunction convention) as a Spark SQL
 * function, called in the JVM by reflection: what a Flink SQL script's {@code CREATE FUNCTION name AS
 * 'class'} declares. Flink need not be on the class path; a class that extends Flink's ScalarFunction
 * needs it (the dagger names its jar), and is refused at registration, naming the missing class, when it
 * is absent.
 *
 * <p>Which {@code eval} a call runs is chosen when Spark analyses the call, from its arguments' types: an
 * overload whose parameters take them exactly, else one that takes them by widening a number (INT to
 * BIGINT, FLOAT to DOUBLE, as Flink's implicit casts). Its Java return type gives the SQL type. A NULL for a
 * primitive parameter gives NULL without calling {@code eval}.
 */
public final class EvalFunctions {
  private static final String EVAL = "eval";

  /** The SQL type of each Java type an eval method takes or returns. */
  private static final Map<Class<?>, DataType> SQL_TYPES =
      Map.ofEntries(
          Map.entry(String.class, DataTypes.StringType),
          Map.entry(boolean.class, DataTypes.BooleanType),
          Map.entry(Boolean.class, DataTypes.BooleanType),
          Map.entry(byte.class, DataTypes.ByteType),
          Map.entry(Byte.class, DataTypes.ByteType),
          Map.entry(short.class, DataTypes.ShortType),
          Map.entry(Short.class, DataTypes.ShortType),
          Map.entry(int.class, DataTypes.IntegerType),
          Map.entry(Integer.class, DataTypes.IntegerType),
          Map.entry(long.class, DataTypes.LongType),
          Map.entry(Long.class, DataTypes.LongType),
          Map.entry(float.class, DataTypes.FloatType),
          Map.entry(Float.class, DataTypes.FloatType),
          Map.entry(double.class, DataTypes.DoubleType),
          Map.entry(Double.class, DataTypes.DoubleType),
          // Flink's default for an un-hinted BigDecimal result is refused; DECIMAL(38, 18) is Spark's.
          Map.entry(BigDecimal.class, DataTypes.createDecimalType(38, 18)),
          Map.entry(LocalDate.class, DataTypes.DateType),
          Map.entry(LocalDateTime.class, DataTypes.TimestampType),
          Map.entry(Instant.class, DataTypes.TimestampType));

  /** Numbers a parameter takes by widening, as Flink's implicit casts between exact and approximate. */
  private static final List<DataType> WIDENING =
      List.of(
          DataTypes.ByteType,
          DataTypes.ShortType,
          DataTypes.IntegerType,
          DataTypes.LongType,
          DataTypes.FloatType,
          DataTypes.DoubleType);

  private EvalFunctions() {}

  /**
   * Registers {@code className}, loaded from the session's jars with {@code jars} added, as the
   * temporary function {@code name}. A class that cannot be loaded, needs a class that is absent, or has
   * no public eval method, is refused with an {@link IllegalArgumentException} naming it.
   */
  public static void register(SparkSession session, String name, String className, String[] jars) {
    for (String jar : jars) {
      session.sessionState().resourceLoader().addJar(jar);
    }
    Class<?> type = load(className, session.sharedState().jarClassLoader(), jars);
    List<Method> evals = evalMethods(type);
    scala.Function1<scala.collection.immutable.Seq<Expression>, Expression> builder =
        arguments -> call(name, type, evals, CollectionConverters.asJava(arguments));
    session.sessionState().functionRegistry().createOrReplaceTempFunction(name, builder, "java_udf");
  }

  static Class<?> load(String className, ClassLoader loader, String[] jars) {
    String where = jars.length == 0 ? "" : " (jars: " + String.join(", ", jars) + ")";
    try {
      Class<?> type = Class.forName(className, true, loader);
      type.getMethods(); // resolves the classes its methods name: a missing one fails here, not in a task
      return type;
    } catch (ClassNotFoundException error) {
      throw new IllegalArgumentException(
          "function class " + className + " is not on the class path" + where, error);
    } catch (NoClassDefFoundError error) {
      throw new IllegalArgumentException(
          "function class "
              + className
              + " needs "
              + error.getMessage().replace('/', '.')
              + ", which is not on the class path"
              + where
              + " (a Flink ScalarFunction needs Flink's flink-table-common jar among the dagger's jars)",
          error);
    }
  }

  /** The class's public instance or static eval methods of types this module converts. */
  static List<Method> evalMethods(Class<?> type) {
    List<Method> evals =
        Arrays.stream(type.getMethods())
            .filter(method -> method.getName().equals(EVAL) && !method.isVarArgs())
            .filter(method -> SQL_TYPES.containsKey(method.getReturnType()))
            .filter(method -> Arrays.stream(method.getParameterTypes()).allMatch(SQL_TYPES::containsKey))
            .sorted(Comparator.comparing(Method::toGenericString))
            .collect(Collectors.toList());
    if (evals.isEmpty()) {
      throw new IllegalArgumentException(
          "function class "
              + type.getName()
              + " has no public eval method of types a SQL function takes (String, boolean, byte, short,"
              + " int, long, float, double, their boxes, BigDecimal, LocalDate, LocalDateTime, Instant)");
    }
    boolean needsInstance = evals.stream().anyMatch(m -> !Modifier.isStatic(m.getModifiers()));
    if (needsInstance) {
      try {
        type.getConstructor();
      } catch (NoSuchMethodException error) {
        throw new IllegalArgumentException(
            "function class " + type.getName() + " has no public constructor without arguments", error);
      }
    }
    return evals;
  }

  /** The eval method a call with arguments of {@code types} runs: exact types first, then widened. */
  static Method choose(String name, Class<?> type, List<Method> evals, List<DataType> types) {
    Optional<Method> exact = evals.stream().filter(m -> takes(m, types, false)).findFirst();
    Optional<Method> chosen =
        exact.or(() -> evals.stream().filter(m -> takes(m, types, true)).findFirst());
    return chosen.orElseThrow(
        () ->
            new IllegalArgumentException(
                name
                    + " ("
                    + type.getName()
                    + ") has no eval method taking ("
                    + types.stream().map(DataType::sql).collect(Collectors.joining(", "))
                    + "); it has: "
                    + evals.stream().map(EvalFunctions::signature).collect(Collectors.joining("; "))));
  }

  private static boolean takes(Method method, List<DataType> types, boolean widening) {
    Class<?>[] parameters = method.getParameterTypes();
    if (parameters.length != types.size()) {
      return false;
    }
    for (int index = 0; index < parameters.length; index++) {
      DataType wanted = SQL_TYPES.get(parameters[index]);
      DataType given = types.get(index);
      boolean same =
          wanted instanceof DecimalType ? given instanceof DecimalType : wanted.equals(given);
      boolean widened =
          widening
              && WIDENING.contains(given)
              && WIDENING.indexOf(given) < WIDENING.indexOf(wanted);
      if (!same && !widened && !given.equals(DataTypes.NullType)) {
        return false;
      }
    }
    return true;
  }

  private static String signature(Method method) {
    return method.getReturnType().getSimpleName()
        + " eval("
        + Arrays.stream(method.getParameterTypes())
            .map(Class::getSimpleName)
            .collect(Collectors.joining(", "))
        + ")";
  }

  private static Expression call(
      String name, Class<?> type, List<Method> evals, List<Expression> arguments) {
    List<DataType> types = new ArrayList<>();
    for (Expression argument : arguments) {
      types.add(argument.dataType());
    }
    Method eval;
    Object function;
    try {
      eval = choose(name, type, evals, types);
      function = function(new Call(type.getName(), eval.getParameterTypes()), arguments.size());
    } catch (IllegalArgumentException error) {
      throw EvalFunctions.<RuntimeException>analysisError(error.getMessage());
    }
    return new ScalaUDF(
        function,
        SQL_TYPES.get(eval.getReturnType()),
        CollectionConverters.asScala(arguments).toList(),
        ScalaUDF.apply$default$4(),
        ScalaUDF.apply$default$5(),
        Option.apply(name),
        true,
        true);
  }

  /**
   * Spark's analysis error for a call no eval takes (or of more arguments than a UDF here takes), so the
   * dagger reports it as any other error in its query, with its place. Scala's exceptions are unchecked but Java sees AnalysisException as checked: it is thrown as
   * {@code T}, which the caller makes a RuntimeException.
   */
  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T analysisError(String message) throws T {
    throw (T)
        new AnalysisException(
            "USER_RAISED_EXCEPTION", // Spark's condition of a message of one's own
            scala.collection.immutable.Map$.MODULE$.from(
                CollectionConverters.asScala(Map.of("errorMessage", message))));
  }

  /** {@code call} as the Scala function of {@code arity} arguments Spark's UDF expression runs. */
  static Object function(Call call, int arity) {
    return switch (arity) {
      case 0 -> (scala.Function0<Object> & Serializable) call::invoke;
      case 1 -> (scala.Function1<Object, Object> & Serializable) a -> call.invoke(a);
      case 2 -> (scala.Function2<Object, Object, Object> & Serializable) call::invoke;
      case 3 -> (scala.Function3<Object, Object, Object, Object> & Serializable) call::invoke;
      case 4 -> (scala.Function4<Object, Object, Object, Object, Object> & Serializable) call::invoke;
      case 5 ->
          (scala.Function5<Object, Object, Object, Object, Object, Object> & Serializable) call::invoke;
      default ->
          throw new IllegalArgumentException(
              "function class " + call.className + ": eval methods of more than 5 arguments are not"
                  + " supported");
    };
  }

  /**
   * One eval method, called with the values Spark hands a UDF (String, boxed numbers, BigDecimal,
   * java.sql.Date and Timestamp), converted to its parameters' types. It travels to the executors by its
   * names and loads the class there, from the task's class loader (which holds the dagger's jars).
   */
  static final class Call implements Serializable {
    private static final long serialVersionUID = 1L;
    private final String className;
    private final String[] parameterNames;
    private transient Method method;
    private transient Object instance;
    private transient Class<?>[] parameters;

    Call(String className, Class<?>[] parameters) {
      this.className = className;
      this.parameterNames = Arrays.stream(parameters).map(Class::getName).toArray(String[]::new);
      this.parameters = parameters;
    }

    Object invoke(Object... values) {
      resolve();
      Object[] converted = new Object[values.length];
      for (int index = 0; index < values.length; index++) {
        if (values[index] == null && parameters[index].isPrimitive()) {
          return null;
        }
        converted[index] = toJava(values[index], parameters[index]);
      }
      try {
        return toSpark(method.invoke(instance, converted));
      } catch (InvocationTargetException error) {
        throw new IllegalStateException(
            "function class " + className + " failed: " + error.getCause(), error.getCause());
      } catch (IllegalAccessException error) {
        throw new IllegalStateException("function class " + className + ": " + error, error);
      }
    }

    private void resolve() {
      if (method != null) {
        return;
      }
      ClassLoader loader = Thread.currentThread().getContextClassLoader();
      try {
        Class<?> type = Class.forName(className, true, loader);
        Class<?>[] types = new Class<?>[parameterNames.length];
        for (int index = 0; index < types.length; index++) {
          types[index] = primitiveOrClass(parameterNames[index], loader);
        }
        Method found = type.getMethod(EVAL, types);
        instance = Modifier.isStatic(found.getModifiers()) ? null : type.getConstructor().newInstance();
        parameters = types;
        method = found;
      } catch (ReflectiveOperationException error) {
        throw new IllegalStateException("function class " + className + ": " + error, error);
      }
    }

    private static Class<?> primitiveOrClass(String name, ClassLoader loader)
        throws ClassNotFoundException {
      for (Class<?> known : SQL_TYPES.keySet()) {
        if (known.getName().equals(name)) {
          return known;
        }
      }
      return Class.forName(name, true, loader);
    }
  }

  /** A value as Spark hands it to a UDF, as the Java type {@code wanted} (widened numbers included). */
  static Object toJava(Object value, Class<?> wanted) {
    if (value instanceof Number number && !(value instanceof BigDecimal)) {
      return switch (SQL_TYPES.get(wanted).typeName()) {
        case "short" -> number.shortValue();
        case "integer" -> number.intValue();
        case "long" -> number.longValue();
        case "float" -> number.floatValue();
        case "double" -> number.doubleValue();
        default -> value;
      };
    }
    if (value instanceof Timestamp timestamp) {
      Instant instant = timestamp.toInstant();
      return wanted == Instant.class ? instant : LocalDateTime.ofInstant(instant, ZoneOffset.UTC);
    }
    if (value instanceof Date date) {
      return date.toLocalDate();
    }
    return value;
  }

  /** An eval's result as Spark takes it back for its SQL type (a LocalDateTime is UTC). */
  static Object toSpark(Object value) {
    if (value instanceof LocalDateTime local) {
      return local.toInstant(ZoneOffset.UTC);
    }
    return value;
  }
}

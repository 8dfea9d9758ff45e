package dagger.jobs.udfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dagger.jobs.udfs.scripted.CountCharacters;
import java.lang.reflect.Method;
import java.sql.Timestamp;
import java.time.LocalDateTime;
import java.util.List;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.junit.jupiter.api.Test;

/** EvalFunctions: which eval a call's argument types choose, how values reach it, what is refused. */
class EvalFunctionsTest {
  /** Overloads that differ by a parameter's type, a static one among them. */
  public static class Shifts {
    public int eval(int value) {
      return value + 1;
    }

    public double eval(double value) {
      return value + 0.5;
    }

    public static String eval(String text, LocalDateTime at) {
      return text + "@" + at;
    }
  }

  /** No public eval. */
  public static class NoEval {
    public int evaluate(int value) {
      return value;
    }
  }

  private static Method chosen(Class<?> type, DataType... types) {
    return EvalFunctions.choose("f", type, EvalFunctions.evalMethods(type), List.of(types));
  }

  private static String refusal(Runnable call) {
    return assertThrows(IllegalArgumentException.class, call::run).getMessage();
  }

  @Test
  void theArgumentsTypesChooseTheOverloadExactTypesFirstThenWidenedNumbers() {
    Method strings = chosen(CountCharacters.class, DataTypes.StringType, DataTypes.StringType);
    assertEquals(String.class, strings.getParameterTypes()[1]);
    Method codes = chosen(CountCharacters.class, DataTypes.StringType, DataTypes.LongType);
    assertEquals(long.class, codes.getParameterTypes()[1]);
    assertEquals(long.class, chosen(CountCharacters.class, DataTypes.StringType, DataTypes.IntegerType)
        .getParameterTypes()[1]);
    assertEquals(int.class, chosen(Shifts.class, DataTypes.IntegerType).getParameterTypes()[0]);
    assertEquals(double.class, chosen(Shifts.class, DataTypes.LongType).getParameterTypes()[0]);
  }

  @Test
  void aCallNoEvalTakesIsRefusedNamingTheClassAndItsEvals() {
    assertEquals(
        "f (dagger.jobs.udfs.scripted.CountCharacters) has no eval method taking (STRING, BOOLEAN); it"
            + " has: long eval(String, String); long eval(String, long)",
        refusal(() -> chosen(CountCharacters.class, DataTypes.StringType, DataTypes.BooleanType)));
  }

  @Test
  void classesWithoutEvalOrNotThereAreRefusedNamingThem() {
    assertEquals(
        "function class dagger.jobs.udfs.EvalFunctionsTest$NoEval has no public eval method of types a SQL"
            + " function takes (String, boolean, byte, short, int, long, float, double, their boxes,"
            + " BigDecimal, LocalDate, LocalDateTime, Instant)",
        refusal(() -> EvalFunctions.evalMethods(NoEval.class)));
    assertEquals(
        "function class com.example.Missing is not on the class path (jars: /x.jar)",
        refusal(
            () ->
                EvalFunctions.load(
                    "com.example.Missing", getClass().getClassLoader(), new String[] {"/x.jar"})));
  }

  @Test
  void valuesReachEvalAsItsParametersTypesAndANullPrimitiveGivesNull() {
    Method count = chosen(CountCharacters.class, DataTypes.StringType, DataTypes.IntegerType);
    EvalFunctions.Call call =
        new EvalFunctions.Call(CountCharacters.class.getName(), count.getParameterTypes());
    assertEquals(2L, call.invoke("abca", 97));
    assertNull(call.invoke("abca", null));
    Method stamp = chosen(Shifts.class, DataTypes.StringType, DataTypes.TimestampType);
    EvalFunctions.Call at = new EvalFunctions.Call(Shifts.class.getName(), stamp.getParameterTypes());
    Timestamp noon = Timestamp.from(java.time.Instant.parse("2026-12-01T12:00:00Z"));
    assertEquals("x@2026-12-01T12:00", at.invoke("x", noon));
  }
}

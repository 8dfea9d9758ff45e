package dagger.jobs.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Numbers in Struct columns are written as Python's {@code repr} writes a float. */
class WellKnownJsonTest {
  @ParameterizedTest
  @CsvSource({
    "1, 1.0",
    "-2.25, -2.25",
    "0.1, 0.1",
    "0.0001, 0.0001",
    "0.00001, 1e-05",
    "1e15, 1000000000000000.0",
    "1e16, 1e+16",
    "123456789.125, 123456789.125",
    "1.5e300, 1.5e+300",
    "-0.0, -0.0",
  })
  void writesFloatsAsPython(double value, String python) {
    assertEquals(python, WellKnownJson.pythonFloat(value));
  }
}

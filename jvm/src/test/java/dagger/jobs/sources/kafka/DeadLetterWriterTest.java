package dagger.jobs.sources.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** A late record's headers give its event time and the watermark as the Python source writes them. */
class DeadLetterWriterTest {
  @ParameterizedTest
  @CsvSource({
    "1700000050000000, 2023-11-14T22:14:10+00:00",
    "1700000050000042, 2023-11-14T22:14:10.000042+00:00",
    "-1500000, 1969-12-31T23:59:58.500000+00:00",
    "0, 1970-01-01T00:00:00+00:00",
  })
  void writesInstantsAsPythonIsoformat(long epochMicros, String python) {
    assertEquals(python, DeadLetterWriter.isoformat(epochMicros));
  }
}

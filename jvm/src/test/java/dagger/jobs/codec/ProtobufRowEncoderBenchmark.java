package dagger.jobs.codec;

import java.lang.management.ManagementFactory;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.function.IntFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Rows a second {@link ProtobufRowEncoder} encodes in one thread, for two messages of
 * {@code dagger/examples/booking.proto}: the {@code BookingSummary} the Kafka filter benchmark writes (its
 * four projected columns) and a whole {@code BookingLogMessage} (enums by name, a timestamp, two nested
 * locations, tags, a metadata map, a wrapper). The rows are made first, as a Java UDF receives them
 * (timestamps as java.sql.Timestamp, arrays and maps as Scala collections), and cycled through.
 *
 * <p>Not a test (surefire does not run it): after {@code make jvm},
 * <pre>
 * java -cp "build/jvm/classes:build/jvm/test-classes:build/jvm/libs/*:.venv/lib/python3.11/site-packages/pyspark/jars/*" \
 *     dagger.jobs.codec.ProtobufRowEncoderBenchmark [rows per round, 1000000] [rounds, 5]
 * </pre>
 * prints the median of the timed rounds, after as many untimed rounds to warm the JIT up, in rows a second
 * of the clock, and the timed rounds' rows a second of the process's CPU time, which other work on the
 * machine changes less.
 */
public final class ProtobufRowEncoderBenchmark {
  private static final int DISTINCT_ROWS = 4096;
  /** The process's CPU time (GC and JIT threads too): on a busy machine, steadier than the clock. */
  private static final com.sun.management.OperatingSystemMXBean PROCESS =
      (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
  private static final String[] SERVICE_TYPES = {"GO_RIDE", "GO_SEND", "GO_FOOD"};
  private static final String[] STATUSES = {"CREATED", "DRIVER_FOUND", "PICKED_UP", "COMPLETED", "CANCELLED"};
  private static final String[] AREAS = {"jakarta-south", "jakarta-north", "bandung", "surabaya", "bali"};
  private static final StructType LOCATION = new StructType()
      .add("name", DataTypes.StringType)
      .add("latitude", DataTypes.DoubleType)
      .add("longitude", DataTypes.DoubleType);

  private ProtobufRowEncoderBenchmark() {}

  public static void main(String[] args) {
    int rows = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    byte[] set = TestProtos.descriptorSet(TestProtos.BOOKING);
    StructType summary = new StructType()
        .add("order_number", DataTypes.StringType)
        .add("customer_id", DataTypes.StringType)
        .add("amount_paid_by_cash", DataTypes.FloatType)
        .add("event_timestamp", DataTypes.TimestampType);
    StructType booking = new StructType()
        .add("service_type", DataTypes.StringType)
        .add("order_number", DataTypes.StringType)
        .add("status", DataTypes.StringType)
        .add("event_timestamp", DataTypes.TimestampType)
        .add("customer_id", DataTypes.StringType)
        .add("driver_id", DataTypes.StringType)
        .add("service_area_id", DataTypes.StringType)
        .add("amount_paid_by_cash", DataTypes.FloatType)
        .add("customer_price", DataTypes.DoubleType)
        .add("total_distance_meters", DataTypes.LongType)
        .add("is_surge", DataTypes.BooleanType)
        .add("pickup_location", LOCATION)
        .add("dropoff_location", LOCATION)
        .add("tags", DataTypes.createArrayType(DataTypes.StringType))
        .add("metadata", DataTypes.createMapType(DataTypes.StringType, DataTypes.StringType))
        .add("voucher_discount", DataTypes.DoubleType);
    System.out.printf(Locale.ROOT, "java %s, %s; %,d rows a round, median of %d rounds after %d warm-up rounds%n",
        System.getProperty("java.version"), System.getProperty("java.vm.name"), rows, rounds, rounds);
    run("BookingSummary", new ProtobufRowEncoder(set, "dagger.examples.BookingSummary", summary),
        rows(i -> summaryRow(i, new Random(i))), rows, rounds);
    run("BookingLogMessage", new ProtobufRowEncoder(set, "dagger.examples.BookingLogMessage", booking),
        rows(i -> bookingRow(i, new Random(i))), rows, rounds);
  }

  private static void run(String name, ProtobufRowEncoder encoder, Row[] input, int rows, int rounds) {
    long bytes = 0;
    for (int round = 0; round < rounds; round++) {
      bytes += encode(encoder, input, rows);
    }
    double[] rates = new double[rounds];
    long cpuStart = PROCESS.getProcessCpuTime();
    for (int round = 0; round < rounds; round++) {
      long start = System.nanoTime();
      bytes += encode(encoder, input, rows);
      rates[round] = rows / ((System.nanoTime() - start) / 1e9);
    }
    double cpuRate = (double) rows * rounds / ((PROCESS.getProcessCpuTime() - cpuStart) / 1e9);
    Arrays.sort(rates);
    System.out.printf(Locale.ROOT, "%-18s %,12.0f rows/s (rounds %,.0f to %,.0f), %,12.0f rows per CPU second; "
        + "%.1f bytes a row%n", name, rates[rounds / 2], rates[0], rates[rounds - 1], cpuRate,
        bytes / (2.0 * rounds * rows));
  }

  private static long encode(ProtobufRowEncoder encoder, Row[] input, int rows) {
    long bytes = 0;
    for (int i = 0; i < rows; i++) {
      bytes += encoder.call(input[i % input.length]).length;
    }
    return bytes;
  }

  private static Row[] rows(IntFunction<Row> row) {
    Row[] rows = new Row[DISTINCT_ROWS];
    for (int i = 0; i < rows.length; i++) {
      rows[i] = row.apply(i);
    }
    return rows;
  }

  private static final long BASE_MILLIS = 1_717_243_200_000L; // 2024-06-01T12:00:00Z

  private static Row summaryRow(int i, Random random) {
    return RowFactory.create("ORD-" + i, "cust-" + (i % 5000), random.nextInt(200_000) / 10f, timestamp(random));
  }

  private static Row bookingRow(int i, Random random) {
    List<Object> tags = new ArrayList<>(List.of("app", i % 2 == 0 ? "promo" : "regular"));
    Map<Object, Object> metadata = new LinkedHashMap<>();
    metadata.put("source", "app");
    metadata.put("channel", i % 3 == 0 ? "web" : "android");
    return RowFactory.create(
        SERVICE_TYPES[i % SERVICE_TYPES.length],
        "ORD-" + i,
        STATUSES[random.nextInt(STATUSES.length)],
        timestamp(random),
        "cust-" + (i % 5000),
        "drv-" + random.nextInt(800),
        AREAS[random.nextInt(AREAS.length)],
        random.nextInt(200_000) / 10f,
        (5_000 + random.nextInt(245_000)) / 1.0,
        300L + random.nextInt(39_700),
        random.nextDouble() < 0.2,
        location(random, "home"),
        location(random, "office"),
        CollectionConverters.asScala(tags).toSeq(),
        CollectionConverters.asScala(metadata),
        i % 4 == 0 ? null : random.nextInt(50) * 1000.0);
  }

  private static Timestamp timestamp(Random random) {
    Timestamp timestamp = new Timestamp(BASE_MILLIS - random.nextInt(5_000));
    timestamp.setNanos(timestamp.getNanos() + random.nextInt(1000) * 1000); // microsecond precision, as Spark's
    return timestamp;
  }

  private static Row location(Random random, String name) {
    return RowFactory.create(name, -6.2 + random.nextDouble() / 10, 106.8 + random.nextDouble() / 10);
  }
}

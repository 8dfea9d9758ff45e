package dagger.jobs.sources.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

/**
 * The offsets and the planning of {@link FlushingMicroBatchStream}, over a stand-in for Spark's Kafka
 * source with its offsets' JSON and its {@code Trigger.AvailableNow} rules: one partition of topic {@code
 * t}, records up to {@code available}, read at most {@code maxOffsetsPerTrigger} a batch.
 */
class FlushingMicroBatchStreamTest {
  private static final StructType KAFKA_ROWS =
      new StructType()
          .add("key", DataTypes.BinaryType)
          .add("value", DataTypes.BinaryType)
          .add("topic", DataTypes.StringType)
          .add("partition", DataTypes.IntegerType)
          .add("offset", DataTypes.LongType)
          .add("timestamp", DataTypes.TimestampType)
          .add("timestampType", DataTypes.IntegerType);

  /** An offset of the stand-in, in the Kafka source's JSON. */
  record KafkaOffset(long position) {
    Offset offset() {
      return new Offset() {
        @Override
        public String json() {
          return "{\"t\":{\"0\":" + position + "}}";
        }
      };
    }
  }

  /** A partition of the stand-in: records [from, until). */
  record Records(long from, long until) implements InputPartition {}

  /** The stand-in for Spark's Kafka source. */
  static final class KafkaLike
      implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
    private static final Pattern POSITION = Pattern.compile("\\{\"t\":\\{\"0\":(\\d+)}}");
    long available;
    private final long maxOffsetsPerTrigger;
    private Long fixedEnd;
    final List<Long> committed = new ArrayList<>();

    KafkaLike(long available, long maxOffsetsPerTrigger) {
      this.available = available;
      this.maxOffsetsPerTrigger = maxOffsetsPerTrigger;
    }

    static long position(Offset offset) {
      Matcher matcher = POSITION.matcher(offset.json());
      assertTrue(matcher.matches(), offset.json());
      return Long.parseLong(matcher.group(1));
    }

    @Override
    public void prepareForTriggerAvailableNow() {
      fixedEnd = available;
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      return ReadLimit.maxRows(maxOffsetsPerTrigger);
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
      long end = fixedEnd == null ? available : fixedEnd;
      long max = ((ReadMaxRows) limit).maxRows();
      return new KafkaOffset(Math.min(end, position(start) + max)).offset();
    }

    @Override
    public Offset reportLatestOffset() {
      return new KafkaOffset(fixedEnd == null ? available : fixedEnd).offset();
    }

    @Override
    public Offset latestOffset() {
      throw new UnsupportedOperationException();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      long from = position(start);
      long until = position(end);
      return from == until ? new InputPartition[0] : new InputPartition[] {new Records(from, until)};
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return partition -> {
        throw new UnsupportedOperationException("the records' reader: " + partition);
      };
    }

    @Override
    public Offset initialOffset() {
      return new KafkaOffset(0).offset();
    }

    @Override
    public Offset deserializeOffset(String json) {
      Matcher matcher = POSITION.matcher(json);
      assertTrue(matcher.matches(), json);
      return new KafkaOffset(Long.parseLong(matcher.group(1))).offset();
    }

    @Override
    public void commit(Offset end) {
      committed.add(position(end));
    }

    @Override
    public void stop() {}

    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
      return Map.of("consumed", String.valueOf(position(latestConsumedOffset.orElseThrow())));
    }
  }

  /**
   * The micro-batches Spark runs under {@code Trigger.AvailableNow} from {@code start}: each one's end
   * offset's JSON and its partitions, until the stream has no new offset.
   */
  private static List<String> batches(FlushingMicroBatchStream stream, Offset start) {
    List<String> batches = new ArrayList<>();
    Offset from = start;
    while (true) {
      Offset end = stream.latestOffset(from, stream.getDefaultReadLimit());
      if (end.equals(from)) {
        return batches;
      }
      batches.add(end.json() + " " + Arrays.toString(stream.planInputPartitions(from, end)));
      stream.commit(end);
      from = stream.deserializeOffset(end.json()); // as Spark reads it back from the offset log
    }
  }

  private static FlushingMicroBatchStream availableNow(KafkaLike kafka) {
    FlushingMicroBatchStream stream = new FlushingMicroBatchStream(kafka, KAFKA_ROWS);
    stream.prepareForTriggerAvailableNow();
    return stream;
  }

  @Test
  void aBoundedRunReadsItsRecordsInTheSourcesBatchesThenClosesTheInputInOneMore() {
    KafkaLike kafka = new KafkaLike(25, 10);
    FlushingMicroBatchStream stream = availableNow(kafka);

    List<String> batches = batches(stream, stream.initialOffset());

    assertEquals(
        List.of(
            "{\"t\":{\"0\":10}} [Records[from=0, until=10]]",
            "{\"t\":{\"0\":20}} [Records[from=10, until=20]]",
            "{\"t\":{\"0\":25}} [Records[from=20, until=25]]",
            "{\"t\":{\"0\":25},\"final watermark\":{}} [FinalRowPartition[]]"),
        batches);
    assertEquals(List.of(10L, 20L, 25L, 25L), kafka.committed);
  }

  @Test
  void recordsArrivingDuringTheRunAreLeftToTheNextRun() {
    KafkaLike kafka = new KafkaLike(5, 10);
    FlushingMicroBatchStream stream = availableNow(kafka);
    kafka.available = 8;

    assertEquals(
        List.of(
            "{\"t\":{\"0\":5}} [Records[from=0, until=5]]",
            "{\"t\":{\"0\":5},\"final watermark\":{}} [FinalRowPartition[]]"),
        batches(stream, stream.initialOffset()));
  }

  @Test
  void aRunGoesOnFromThePlainKafkaSourcesOffsets() {
    FlushingMicroBatchStream stream = availableNow(new KafkaLike(12, 100));
    // What the plain source wrote in the checkpoint's offset log, a streaming run before.
    Offset streamed = stream.deserializeOffset("{\"t\":{\"0\":7}}");
    assertFalse(((FlushingOffset) streamed).closed());
    assertEquals("{\"t\":{\"0\":7}}", streamed.json());

    assertEquals(
        List.of(
            "{\"t\":{\"0\":12}} [Records[from=7, until=12]]",
            "{\"t\":{\"0\":12},\"final watermark\":{}} [FinalRowPartition[]]"),
        batches(stream, streamed));
  }

  @Test
  void aClosedInputStaysClosedAndGetsNoSecondFinalRow() {
    FlushingMicroBatchStream stream = availableNow(new KafkaLike(30, 100));
    Offset closed = stream.deserializeOffset("{\"t\":{\"0\":25},\"final watermark\":{}}");
    assertTrue(((FlushingOffset) closed).closed());

    assertEquals(
        List.of("{\"t\":{\"0\":30},\"final watermark\":{}} [Records[from=25, until=30]]"),
        batches(stream, closed));
  }

  @Test
  void aBatchReplayedAfterACrashCarriesTheFinalRowAgain() {
    FlushingMicroBatchStream stream = availableNow(new KafkaLike(25, 100));
    // Spark plans a batch again from the offset log's start and end, as JSON.
    Offset start = stream.deserializeOffset("{\"t\":{\"0\":25}}");
    Offset end = stream.deserializeOffset("{\"t\":{\"0\":25},\"final watermark\":{}}");

    InputPartition[] partitions = stream.planInputPartitions(start, end);

    assertArrayEquals(new InputPartition[] {new FlushingMicroBatchStream.FinalRowPartition()}, partitions);
  }

  @Test
  void withoutTriggerAvailableNowTheInputNeverEnds() {
    KafkaLike kafka = new KafkaLike(5, 10);
    FlushingMicroBatchStream stream = new FlushingMicroBatchStream(kafka, KAFKA_ROWS);

    assertEquals(
        List.of("{\"t\":{\"0\":5}} [Records[from=0, until=5]]"), batches(stream, stream.initialOffset()));
  }

  @Test
  void theFinalRowIsOneRowOfTheSourcesColumnsAllNull() throws Exception {
    PartitionReaderFactory factory = new FlushingMicroBatchStream(new KafkaLike(0, 1), KAFKA_ROWS)
        .createReaderFactory();
    InputPartition partition = new FlushingMicroBatchStream.FinalRowPartition();
    assertFalse(factory.supportColumnarReads(partition));

    try (PartitionReader<InternalRow> reader = factory.createReader(partition)) {
      assertTrue(reader.next());
      InternalRow row = reader.get();
      assertEquals(KAFKA_ROWS.length(), row.numFields());
      for (int column = 0; column < row.numFields(); column++) {
        assertTrue(row.isNullAt(column), KAFKA_ROWS.fields()[column].name());
      }
      assertFalse(reader.next());
    }
    // A record partition is the source's own reader's.
    Exception records =
        assertThrows(UnsupportedOperationException.class, () -> factory.createReader(new Records(0, 1)));
    assertEquals("the records' reader: Records[from=0, until=1]", records.getMessage());
  }

  @Test
  void theSourcesMetricsReadItsOwnOffsets() {
    FlushingMicroBatchStream stream = availableNow(new KafkaLike(25, 100));
    Offset closed = stream.deserializeOffset("{\"t\":{\"0\":25},\"final watermark\":{}}");

    assertEquals(Map.of("consumed", "25"), stream.metrics(Optional.of(closed)));
  }

  @Test
  void anOffsetThatIsNotAJsonObjectIsRefusedByName() {
    FlushingMicroBatchStream stream = availableNow(new KafkaLike(0, 1));

    IllegalArgumentException refused =
        assertThrows(IllegalArgumentException.class, () -> stream.deserializeOffset("25"));
    assertEquals(
        "a flushing stream's offset must be a JSON object (as Spark's Kafka source writes), not 25",
        refused.getMessage());
  }
}

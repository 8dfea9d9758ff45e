package dagger.jobs.sources.kafka;

import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Spark's Kafka source (any micro-batch stream supporting {@code Trigger.AvailableNow}), ending a bounded
 * run's input with one more row, as the Python sources' {@code FlushingReader} does ({@code
 * jobs.sources.stream_batches}).
 *
 * <p>Under {@code Trigger.AvailableNow}, once the wrapped source has read up to the end it fixed when the
 * run started (its {@code latestOffset} gives no new record, and that is its {@code reportLatestOffset},
 * the end it prefetched), this stream plans one more micro-batch: the same record offsets, marked {@link
 * FlushingOffset#closed}, and one more partition, {@link FinalRowPartition}, whose one row has every column
 * NULL. The dagger's decode step ({@code jobs/sources/kafka/spark_connector.py}) turns that row into the row
 * at the end of time, which moves the watermark past every window; the mark in the checkpoint's offsets
 * keeps a replayed batch's row and stops a later run from adding a second one. Everything else, admission
 * control ({@code maxOffsetsPerTrigger}) among it, is the wrapped source's, unchanged.
 */
public final class FlushingMicroBatchStream
    implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {

  private final MicroBatchStream records;
  private final SupportsTriggerAvailableNow admission;
  private final StructType schema;
  private boolean availableNow;

  /** {@code records}, whose rows are of {@code schema} (the final row's width). */
  public FlushingMicroBatchStream(MicroBatchStream records, StructType schema) {
    if (!(records instanceof SupportsTriggerAvailableNow admission)) {
      throw new IllegalArgumentException(
          records + " does not support Trigger.AvailableNow, so it cannot end a bounded run's input");
    }
    this.records = records;
    this.admission = admission;
    this.schema = schema;
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    admission.prepareForTriggerAvailableNow();
    availableNow = true;
  }

  @Override
  public Offset initialOffset() {
    return new FlushingOffset(records.initialOffset(), false);
  }

  @Override
  public Offset deserializeOffset(String json) {
    return FlushingOffset.parse(json, records);
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return admission.getDefaultReadLimit();
  }

  @Override
  public Offset latestOffset() {
    return new FlushingOffset(records.latestOffset(), false);
  }

  /**
   * The wrapped source's next end; once it has none past {@code start} and {@code start} is the end it
   * fixed for the run, the same offsets, closed (a closed start stays closed).
   */
  @Override
  public Offset latestOffset(Offset start, ReadLimit limit) {
    FlushingOffset from = of(start);
    Offset latest = admission.latestOffset(from.records(), limit);
    Offset next = latest == null ? from.records() : latest;
    boolean ended =
        availableNow
            && FlushingOffset.samePositions(next, from.records())
            && FlushingOffset.samePositions(next, admission.reportLatestOffset());
    return new FlushingOffset(next, from.closed() || ended);
  }

  @Override
  public Offset reportLatestOffset() {
    return admission.reportLatestOffset();
  }

  /** The wrapped source's partitions, and the final row's in the batch that closes the input. */
  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    FlushingOffset from = of(start);
    FlushingOffset to = of(end);
    InputPartition[] partitions = records.planInputPartitions(from.records(), to.records());
    if (!to.closed() || from.closed()) {
      return partitions;
    }
    InputPartition[] closing = Arrays.copyOf(partitions, partitions.length + 1);
    closing[partitions.length] = new FinalRowPartition();
    return closing;
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new ReaderFactory(records.createReaderFactory(), schema.length());
  }

  @Override
  public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
    if (records instanceof ReportsSourceMetrics reports) {
      return reports.metrics(latestConsumedOffset.map(offset -> of(offset).records()));
    }
    return Map.of();
  }

  @Override
  public void commit(Offset end) {
    records.commit(of(end).records());
  }

  @Override
  public void stop() {
    records.stop();
  }

  @Override
  public String toString() {
    return records.toString();
  }

  /** {@code offset} as this stream's: Spark hands back what it read from the checkpoint as JSON too. */
  private FlushingOffset of(Offset offset) {
    return offset instanceof FlushingOffset flushing
        ? flushing
        : FlushingOffset.parse(offset.json(), records);
  }

  /** The task that emits the final row. */
  public record FinalRowPartition() implements InputPartition {}

  /** The wrapped source's readers, and the final row's for its partition. */
  record ReaderFactory(PartitionReaderFactory records, int width) implements PartitionReaderFactory {

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      return partition instanceof FinalRowPartition
          ? new FinalRowReader(width)
          : records.createReader(partition);
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return records.createColumnarReader(partition);
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return !(partition instanceof FinalRowPartition) && records.supportColumnarReads(partition);
    }
  }

  /** One row of {@code width} columns, every one NULL. */
  static final class FinalRowReader implements PartitionReader<InternalRow> {
    private final InternalRow row;
    private boolean emitted;

    FinalRowReader(int width) {
      // Spark's planner projects a source's rows to UnsafeRows after the scan, so a generic row will do.
      row = new GenericInternalRow(width);
    }

    @Override
    public boolean next() {
      boolean first = !emitted;
      emitted = true;
      return first;
    }

    @Override
    public InternalRow get() {
      return row;
    }

    @Override
    public void close() {}
  }
}

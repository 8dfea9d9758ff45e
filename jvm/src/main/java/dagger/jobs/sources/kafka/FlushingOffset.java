package dagger.jobs.sources.kafka;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.SparkDataStream;

/**
 * An offset of {@link FlushingMicroBatchStream}: the wrapped stream's offset, and whether the row that ends
 * a bounded run's input was emitted up to it.
 *
 * <p>Its JSON is the wrapped stream's (Spark's Kafka source: {@code {"topic":{"0":25}}}), with the key
 * {@value #FINAL_MARK} (an empty object) once the final row was emitted, the mark the Python sources put in
 * their offsets ({@code FINAL_MARK} of {@code jobs.sources.stream_batches}). So an offset a plain Kafka
 * source wrote reads as one without the mark (a flushing run goes on from a streaming run's checkpoint),
 * and the progress reports and the metrics read both alike ({@code jobs.metrics.exporter}).
 */
public final class FlushingOffset extends Offset {
  /** The key of the mark: no Kafka topic is named so (a topic name has no spaces). */
  public static final String FINAL_MARK = "final watermark";

  private static final ObjectMapper JSON = new ObjectMapper();

  private final Offset records;
  private final boolean closed;

  public FlushingOffset(Offset records, boolean closed) {
    this.records = records;
    this.closed = closed;
  }

  /** The wrapped stream's offset: where its records are read up to. */
  public Offset records() {
    return records;
  }

  /** Whether the final row was emitted up to this offset. */
  public boolean closed() {
    return closed;
  }

  @Override
  public String json() {
    if (!closed) {
      return records.json();
    }
    ObjectNode marked = object(records.json());
    marked.putObject(FINAL_MARK);
    return marked.toString();
  }

  /** The offset of {@code json}, which the wrapped stream {@code records} reads without the mark. */
  public static FlushingOffset parse(String json, SparkDataStream records) {
    ObjectNode offsets = object(json);
    if (offsets.remove(FINAL_MARK) == null) {
      return new FlushingOffset(records.deserializeOffset(json), false);
    }
    return new FlushingOffset(records.deserializeOffset(offsets.toString()), true);
  }

  /** Whether two offsets of the wrapped stream name the same positions, whatever their keys' order. */
  static boolean samePositions(Offset one, Offset other) {
    return one != null && other != null && tree(one.json()).equals(tree(other.json()));
  }

  private static ObjectNode object(String json) {
    if (tree(json) instanceof ObjectNode object) {
      return object;
    }
    throw new IllegalArgumentException(
        "a flushing stream's offset must be a JSON object (as Spark's Kafka source writes), not " + json);
  }

  private static JsonNode tree(String json) {
    try {
      return JSON.readTree(json);
    } catch (JsonProcessingException error) {
      throw new IllegalArgumentException("not a stream offset's JSON: " + json, error);
    }
  }
}

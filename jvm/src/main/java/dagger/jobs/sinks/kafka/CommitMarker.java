package dagger.jobs.sinks.kafka;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * The record an exactly-once Kafka sink commits with the rows of one Spark task, and the names derived from
 * the sink's identity: the same as {@code jobs/sinks/kafka/exactly_once.py} writes and reads, so that the
 * Python and the Java task sides find each other's markers and fence each other's producers.
 *
 * <p>A marker's value is a JSON object {@code {sink, batch, partition, attempt, records, topic}}; its key is
 * {@code <sink id>/<partition>} (the marker topic is compacted: only each task's latest marker is kept).
 */
public final class CommitMarker {
  private static final ObjectMapper JSON = new ObjectMapper();

  public final String sink;
  public final long batch;
  public final int partition;
  public final String attempt;
  public final long records;
  public final String topic;

  public CommitMarker(
      String sink, long batch, int partition, String attempt, long records, String topic) {
    this.sink = sink;
    this.batch = batch;
    this.partition = partition;
    this.attempt = attempt;
    this.records = records;
    this.topic = topic;
  }

  /** The same for every attempt of a task, so a new attempt fences the earlier ones. */
  public static String transactionalId(String sinkId, int partition) {
    return "dagger-" + sinkId + "-" + partition;
  }

  public static byte[] key(String sinkId, int partition) {
    return (sinkId + "/" + partition).getBytes(StandardCharsets.UTF_8);
  }

  public byte[] toJson() {
    ObjectNode marker = JSON.createObjectNode();
    marker.put("sink", sink);
    marker.put("batch", batch);
    marker.put("partition", partition);
    marker.put("attempt", attempt);
    marker.put("records", records);
    marker.put("topic", topic);
    return marker.toString().getBytes(StandardCharsets.UTF_8);
  }

  /**
   * The marker a record's value holds; empty if it is not one (as the Python reader, which needs sink,
   * batch, partition and attempt, the batch and partition as integers).
   */
  public static Optional<CommitMarker> parse(byte[] value) {
    if (value == null) {
      return Optional.empty();
    }
    JsonNode marker;
    try {
      marker = JSON.readTree(value);
    } catch (IOException notJson) {
      return Optional.empty();
    }
    if (marker == null || !marker.isObject()) {
      return Optional.empty();
    }
    JsonNode sink = marker.get("sink");
    JsonNode batch = marker.get("batch");
    JsonNode partition = marker.get("partition");
    JsonNode attempt = marker.get("attempt");
    if (sink == null || attempt == null || batch == null || partition == null
        || !batch.isIntegralNumber() || !partition.isIntegralNumber()) {
      return Optional.empty();
    }
    JsonNode records = marker.get("records");
    JsonNode topic = marker.get("topic");
    return Optional.of(new CommitMarker(
        sink.asText(),
        batch.asLong(),
        partition.asInt(),
        attempt.asText(),
        records == null ? 0 : records.asLong(),
        topic == null ? "" : topic.asText()));
  }
}

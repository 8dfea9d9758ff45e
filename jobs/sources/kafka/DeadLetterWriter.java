package dagger.jobs.sources.kafka;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF6;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.TaskCompletionListener;

/**
 * Copies a stream's invalid records to its dead-letter topic, from the task that read them: the record's
 * key and value, with headers saying why it was skipped and where it came from (the headers the Python
 * source writes). Called on each invalid record as {@code f(value, key, topic, partition, offset, error)},
 * it returns false (the record is not valid), so it sits where the stream's validity flag is computed.
 *
 * <p>Dead letters are durable before the task counts as done: when the task ends, the producer is flushed,
 * and a record Kafka did not acknowledge fails the task (so the micro-batch is read again: at least once).
 * The function is registered as non-deterministic, so Spark evaluates it once per record and never moves
 * or copies it. One producer per executor JVM and settings, shared by its tasks.
 */
public final class DeadLetterWriter implements UDF6<byte[], byte[], String, Integer, Long, String, Boolean> {
  private static final long serialVersionUID = 1L;
  private static final Map<Map<String, String>, KafkaProducer<byte[], byte[]>> PRODUCERS =
      new ConcurrentHashMap<>();
  /** The first failed delivery of each running task (by attempt id), checked when the task ends. */
  private static final Map<Long, AtomicReference<Exception>> FAILURES = new ConcurrentHashMap<>();

  private final String stream;
  private final String deadLetterTopic;
  private final HashMap<String, String> producerSettings;

  /**
   * @param producerSettings the Java client's settings (bootstrap servers, security), to which the
   *     writer adds its serializers, idempotence and a short linger
   */
  public DeadLetterWriter(String stream, String deadLetterTopic, Map<String, String> producerSettings) {
    this.stream = stream;
    this.deadLetterTopic = deadLetterTopic;
    this.producerSettings = new HashMap<>(producerSettings);
    this.producerSettings.put("key.serializer", ByteArraySerializer.class.getName());
    this.producerSettings.put("value.serializer", ByteArraySerializer.class.getName());
    this.producerSettings.put("enable.idempotence", "true");
    this.producerSettings.put("linger.ms", "5");
    // Whatever the stream could read must fit: the broker still applies its own limit.
    this.producerSettings.putIfAbsent("max.request.size", String.valueOf(64 * 1024 * 1024));
  }

  /** Registers the writer as the non-deterministic function {@code name} of the session. */
  public static void register(SparkSession session, String name, DeadLetterWriter writer) {
    UserDefinedFunction function = functions.udf(writer, DataTypes.BooleanType).asNondeterministic();
    session.udf().register(name, function);
  }

  @Override
  public Boolean call(
      byte[] value, byte[] key, String topic, Integer partition, Long offset, String error) {
    AtomicReference<Exception> failure = taskFailure();
    List<Header> headers =
        List.of(
            header("dagger.error", error == null ? "" : error),
            header("dagger.source.topic", topic),
            header("dagger.source.partition", String.valueOf(partition)),
            header("dagger.source.offset", String.valueOf(offset)),
            header("dagger.stream", stream));
    ProducerRecord<byte[], byte[]> record =
        new ProducerRecord<>(deadLetterTopic, null, key, value, headers);
    try {
      producer().send(record, (metadata, exception) -> {
        if (exception != null) {
          failure.compareAndSet(null, exception);
        }
      });
    } catch (RuntimeException e) {
      throw new IllegalStateException(
          String.format("stream '%s': %s[%d]@%d: could not write the record to dead-letter topic %s: %s",
              stream, topic, partition, offset, deadLetterTopic, e.getMessage()), e);
    }
    return false;
  }

  private KafkaProducer<byte[], byte[]> producer() {
    return PRODUCERS.computeIfAbsent(
        producerSettings, settings -> new KafkaProducer<>(new HashMap<String, Object>(settings)));
  }

  /** This task's failure holder; the first call in a task arranges the flush at its end. */
  private AtomicReference<Exception> taskFailure() {
    TaskContext task = TaskContext.get();
    if (task == null) {
      throw new IllegalStateException("dead letters are written from a Spark task");
    }
    return FAILURES.computeIfAbsent(task.taskAttemptId(), id -> {
      task.addTaskCompletionListener(new TaskCompletionListener() {
        @Override
        public void onTaskCompletion(TaskContext context) {
          flushFor(context.taskAttemptId());
        }
      });
      return new AtomicReference<>();
    });
  }

  private void flushFor(long taskAttemptId) {
    AtomicReference<Exception> failure = FAILURES.remove(taskAttemptId);
    producer().flush();
    if (failure != null && failure.get() != null) {
      throw new IllegalStateException(
          String.format("stream '%s': could not write dead letters to %s: %s",
              stream, deadLetterTopic, failure.get().getMessage()), failure.get());
    }
  }

  private static Header header(String name, String value) {
    return new RecordHeader(name, value.getBytes(StandardCharsets.UTF_8));
  }
}

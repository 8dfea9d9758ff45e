package dagger.jobs.sources.kafka;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
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
import org.apache.spark.sql.api.java.UDF8;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.TaskCompletionListener;

/**
 * Copies a stream's skipped records to a dead-letter topic, from the task that read them: the record's
 * key and value, with headers saying why it was skipped and where it came from (the headers the Python
 * source writes). Called on each such record as
 * {@code f(value, key, topic, partition, offset, error, eventTime, watermark)}: an invalid record gives
 * its {@code error}, a late one its event time and the batch's watermark (epoch microseconds) instead.
 * It returns true (copied), so it sits where the stream's validity or lateness flag is computed. A row
 * dropped by an expectation is copied as JSON, without a source position ({@code topic} null), and with
 * the expectation's name in a header.
 *
 * <p>Dead letters are durable before the task counts as done: when the task ends, the producer is flushed,
 * and a record Kafka did not acknowledge fails the task (so the micro-batch is read again: at least once).
 * The function is registered as non-deterministic, so Spark evaluates it once per record and never moves
 * or copies it. One producer per executor JVM and settings, shared by its tasks.
 */
public final class DeadLetterWriter
    implements UDF8<byte[], byte[], String, Integer, Long, String, Long, Long, Boolean> {
  private static final long serialVersionUID = 1L;
  private static final Map<Map<String, String>, KafkaProducer<byte[], byte[]>> PRODUCERS =
      new ConcurrentHashMap<>();
  /** The first failed delivery of each running task (by attempt id), checked when the task ends. */
  private static final Map<Long, AtomicReference<Exception>> FAILURES = new ConcurrentHashMap<>();

  private static final DateTimeFormatter SECONDS = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss");

  private final String stream;
  private final String deadLetterTopic;
  private final HashMap<String, String> producerSettings;
  private final String expectation;

  /**
   * @param producerSettings the Java client's settings (bootstrap servers, security), to which the
   *     writer adds its serializers, idempotence and a short linger
   */
  public DeadLetterWriter(String stream, String deadLetterTopic, Map<String, String> producerSettings) {
    this(stream, deadLetterTopic, producerSettings, null);
  }

  /**
   * @param expectation the expectation whose dropped rows this writer copies (header {@code
   *     dagger.expectation}), or null for skipped records
   */
  public DeadLetterWriter(
      String stream, String deadLetterTopic, Map<String, String> producerSettings, String expectation) {
    this.expectation = expectation;
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
      byte[] value,
      byte[] key,
      String topic,
      Integer partition,
      Long offset,
      String error,
      Long eventTime,
      Long watermark) {
    AtomicReference<Exception> failure = taskFailure();
    String reason = error == null ? "" : error;
    if (watermark != null) {
      reason = "late: event time " + isoformat(eventTime) + " is before the watermark";
    }
    List<Header> headers = new ArrayList<>(6);
    headers.add(header("dagger.error", reason));
    if (watermark != null) {
      headers.add(header("dagger.watermark", isoformat(watermark)));
    }
    if (topic != null) {
      headers.add(header("dagger.source.topic", topic));
      headers.add(header("dagger.source.partition", String.valueOf(partition)));
      headers.add(header("dagger.source.offset", String.valueOf(offset)));
    }
    headers.add(header("dagger.stream", stream));
    if (expectation != null) {
      headers.add(header("dagger.expectation", expectation));
    }
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
          String.format("stream '%s': %s: could not write the record to dead-letter topic %s: %s",
              stream, topic == null ? "a row" : topic + "[" + partition + "]@" + offset, deadLetterTopic,
              e.getMessage()), e);
    }
    return true;
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

  /** An instant as Python's {@code datetime.isoformat()} writes one in UTC, as the Python source does. */
  static String isoformat(long epochMicros) {
    LocalDateTime time =
        LocalDateTime.ofInstant(Instant.EPOCH.plus(epochMicros, ChronoUnit.MICROS), ZoneOffset.UTC);
    int micros = time.getNano() / 1000;
    return SECONDS.format(time) + (micros == 0 ? "" : String.format(".%06d", micros)) + "+00:00";
  }

  private static Header header(String name, String value) {
    return new RecordHeader(name, value.getBytes(StandardCharsets.UTF_8));
  }
}

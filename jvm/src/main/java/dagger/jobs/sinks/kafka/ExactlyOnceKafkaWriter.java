package dagger.jobs.sinks.kafka;

import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Kafka sink, {@code delivery: exactly_once} with {@code connector: spark}: the task side of the protocol
 * of {@code jobs/sinks/kafka/exactly_once.py} (its docstring says what the protocol is and why it holds),
 * run in the executor JVMs on the {@code key} and {@code value} the JVM codec encoded, so the rows never
 * enter Python. The driver side stays in Python, shared with the Python writer: it fences every partition's
 * transactional id at start, reads the committed markers and calls {@link #write} from foreachBatch with
 * the partitions the batch skips and where its marker read stopped.
 *
 * <p>Each task does what the Python task does: a partition the driver saw committed is read and skipped;
 * an empty one writes nothing; otherwise the task initialises its transactional producer (fencing every
 * earlier incarnation), checks the marker topic from where the driver stopped for a commit of this task
 * the driver could not see, begins a transaction, sends its rows with the headers {@code dagger.attempt},
 * {@code dagger.batch} and {@code dagger.partition}, flushes, sends its marker and commits. A cached
 * producer that another JVM fenced since fails before anything commits, and the task starts once more with
 * a new one; any other Kafka error aborts, drops the producer and fails the task, naming the topic.
 *
 * <p>Producers are kept per executor JVM and transactional id, a few at a time; a task takes its
 * producer out while it writes, so concurrent tasks never share one.
 *
 * <p>The crash tests' fault injection is the Python writer's: given a flag file (the driver reads {@code
 * $DAGGER_TEST_HOLD_TRANSACTIONS_WHILE} once, and warns that it is on), a task of the batch the file names
 * or a later one, its rows all acknowledged, waits while the file exists (up to a minute) before its marker
 * and commit. Without one, as in every real run, no task looks for a file.
 */
public final class ExactlyOnceKafkaWriter implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Logger LOG = LoggerFactory.getLogger(ExactlyOnceKafkaWriter.class);

  private static final Duration HOLD_LIMIT = Duration.ofSeconds(60);

  private static final String ATTEMPT_HEADER = "dagger.attempt";
  private static final String BATCH_HEADER = "dagger.batch";
  private static final String PARTITION_HEADER = "dagger.partition";

  // init_transactions, commit, reading markers to the end: long enough to wait out a broker restarting,
  // as the Python side does.
  private static final Duration CLIENT_TIMEOUT = Duration.ofSeconds(120);
  // Waiting for an open transaction to settle: above the default transaction timeout (60 s).
  private static final Duration RESOLVE_TIMEOUT = Duration.ofSeconds(120);
  private static final Duration ABORT_TIMEOUT = Duration.ofSeconds(10);
  // An executor JVM runs several tasks at once: a few more than a Python worker (8), which runs one.
  private static final int MAX_IDLE_PRODUCERS = 16;

  private static final LinkedHashMap<Map<String, String>, KafkaProducer<byte[], byte[]>> IDLE_PRODUCERS =
      new LinkedHashMap<>();
  private static final Map<Map<String, String>, Queue<KafkaConsumer<byte[], byte[]>>> IDLE_CONSUMERS =
      new ConcurrentHashMap<>();

  private final String topic;
  private final String markerTopic;
  private final HashMap<String, String> producerSettings;
  private final String holdFlag;

  /**
   * @param producerSettings the Java client's settings (bootstrap servers, the sink's defaults and its
   *     {@code producer_config} translated), to which the writer adds serializers and its client timeout
   * @param holdFlag the crash tests' flag file (see the class comment), or null: in every real run
   */
  public ExactlyOnceKafkaWriter(
      String topic, String markerTopic, Map<String, String> producerSettings, String holdFlag) {
    this.holdFlag = holdFlag;
    this.topic = topic;
    this.markerTopic = markerTopic;
    this.producerSettings = new HashMap<>(producerSettings);
    this.producerSettings.put("key.serializer", ByteArraySerializer.class.getName());
    this.producerSettings.put("value.serializer", ByteArraySerializer.class.getName());
    this.producerSettings.put("max.block.ms", String.valueOf(CLIENT_TIMEOUT.toMillis()));
  }

  /**
   * Driver side: writes every partition of {@code records} (a binary {@code value} and, if the sink has
   * keys, {@code key}) in its own transaction; returns how many rows were written.
   *
   * @param committedPartitions the partitions of this batch whose marker the driver saw committed: skipped
   * @param markerPositions where the driver stopped reading each marker partition (partition to offset):
   *     every marker before is known to it
   */
  public long write(
      Dataset<Row> records,
      String sinkId,
      long batchId,
      List<? extends Number> committedPartitions,
      Map<? extends Number, ? extends Number> markerPositions) {
    Set<Integer> committed = new HashSet<>();
    committedPartitions.forEach(partition -> committed.add(partition.intValue()));
    HashMap<Integer, Long> positions = new HashMap<>();
    markerPositions.forEach((partition, offset) -> positions.put(partition.intValue(), offset.longValue()));
    List<String> columns = Arrays.asList(records.schema().fieldNames());
    PartitionTransaction task = new PartitionTransaction(
        this, sinkId, batchId, committed, positions, columns.indexOf("value"), columns.indexOf("key"));
    long written = 0;
    for (long rows : records.mapPartitions(task, Encoders.LONG()).collectAsList()) {
      written += rows;
    }
    return written;
  }

  /** The marker consumers' settings: the producer's that a consumer takes (how to reach the cluster). */
  static Map<String, String> markerConsumerSettings(Map<String, String> producerSettings, String isolation) {
    Map<String, String> settings = new HashMap<>();
    producerSettings.forEach((name, value) -> {
      if (ConsumerConfig.configNames().contains(name)) {
        settings.put(name, value);
      }
    });
    settings.put("key.deserializer", ByteArrayDeserializer.class.getName());
    settings.put("value.deserializer", ByteArrayDeserializer.class.getName());
    settings.put("enable.auto.commit", "false"); // assign() only: no group is joined nor committed to
    settings.put("auto.offset.reset", "earliest");
    settings.put("isolation.level", isolation);
    settings.put("fetch.max.wait.ms", "10");
    return settings;
  }

  /** Executor side: one partition of a micro-batch, its rows and its marker in one transaction. */
  static final class PartitionTransaction implements MapPartitionsFunction<Row, Long> {
    private static final long serialVersionUID = 1L;

    private final ExactlyOnceKafkaWriter sink;
    private final String sinkId;
    private final long batchId;
    private final Set<Integer> committed;
    private final HashMap<Integer, Long> markerPositions;
    private final int valueIndex;
    private final int keyIndex;

    PartitionTransaction(
        ExactlyOnceKafkaWriter sink,
        String sinkId,
        long batchId,
        Set<Integer> committed,
        HashMap<Integer, Long> markerPositions,
        int valueIndex,
        int keyIndex) {
      this.sink = sink;
      this.sinkId = sinkId;
      this.batchId = batchId;
      this.committed = committed;
      this.markerPositions = markerPositions;
      this.valueIndex = valueIndex;
      this.keyIndex = keyIndex;
    }

    @Override
    public Iterator<Long> call(Iterator<Row> rows) {
      return List.of(write(rows, TaskContext.getPartitionId())).iterator();
    }

    private long write(Iterator<Row> rows, int partition) {
      if (committed.contains(partition)) {
        drain(rows);
        return 0;
      }
      if (!rows.hasNext()) {
        return 0; // no rows: nothing to write twice, so no transaction and no marker either
      }
      Row first = rows.next();
      Map<String, String> settings = new HashMap<>(sink.producerSettings);
      settings.put("transactional.id", CommitMarker.transactionalId(sinkId, partition));
      Transaction transaction;
      try {
        transaction = begin(settings, partition, first);
      } catch (KafkaException | IllegalStateException kafka) {
        throw failure(kafka, partition);
      }
      if (transaction == null) {
        drain(rows);
        return 0;
      }
      long records = 1;
      try {
        while (transaction.failure.get() == null && rows.hasNext()) {
          transaction.send(rows.next());
          records++;
        }
        transaction.flush(); // every row acknowledged before the marker is produced
        if (sink.holdFlag != null) {
          holdWhileFlagged(sink.holdFlag, batchId);
        }
        transaction.commit(records);
      } catch (KafkaException | IllegalStateException kafka) {
        discard(transaction.producer);
        throw failure(kafka, partition);
      } catch (Throwable rowsFailed) { // the rows themselves failed (the codec, the query): it says why
        discard(transaction.producer);
        throw rowsFailed;
      }
      checkIn(settings, transaction.producer);
      return records;
    }

    /**
     * Opens this attempt's transaction and sends the first row in it; null if an earlier attempt committed
     * this task already.
     */
    private Transaction begin(Map<String, String> settings, int partition, Row first) {
      boolean renew = false;
      while (true) {
        KafkaProducer<byte[], byte[]> producer = renew ? null : checkOut(settings);
        boolean fresh = producer == null;
        if (fresh) {
          producer = initialisedProducer(settings);
        }
        // Earlier incarnations of this transactional id are fenced, so what they committed is final (a
        // cached producer that is itself fenced since fails at the first flush; then this runs again).
        boolean committedEarlier;
        try {
          committedEarlier = committedByEarlierAttempt(partition);
        } catch (RuntimeException undecided) {
          checkIn(settings, producer); // nothing of this attempt was sent: the producer is fine
          throw undecided;
        }
        if (committedEarlier) {
          LOG.info("batch {} partition {}: committed by an earlier attempt", batchId, partition);
          checkIn(settings, producer);
          return null;
        }
        Transaction transaction = new Transaction(producer, partition);
        try {
          producer.beginTransaction();
          transaction.send(first);
          if (!fresh) { // a cached producer that another JVM fenced fails here, before any commit
            transaction.flush();
          }
          return transaction;
        } catch (RuntimeException error) {
          discard(producer);
          if (fresh) {
            throw error;
          }
          LOG.info("batch {} partition {}: cached producer unusable ({}); a new one takes over",
              batchId, partition, error.getMessage());
          renew = true;
        }
      }
    }

    /**
     * Whether an attempt the driver did not see committed this batch's partition (call once fenced).
     *
     * <p>Markers before {@code markerPositions} are known to the driver. After them, a read_uncommitted
     * scan up to the high watermark finds every marker an earlier attempt produced (all before our
     * fencing); the few candidates are then resolved by a read_committed read once the last stable offset
     * has passed them (another task's transaction still open on the marker topic holds it back).
     */
    private boolean committedByEarlierAttempt(int partition) {
      byte[] key = CommitMarker.key(sinkId, partition);
      Map<TopicPartition, Long> start = new HashMap<>();
      markerPositions.forEach((markerPartition, offset) ->
          start.put(new TopicPartition(sink.markerTopic, markerPartition), offset));
      Set<List<Long>> candidates = new HashSet<>(); // (marker partition, offset)
      Map<TopicPartition, Long> firstCandidate = new HashMap<>();
      Map<TopicPartition, Long> pastLastCandidate = new HashMap<>();
      List<ConsumerRecord<byte[], byte[]>> uncommitted = sink.withConsumer("read_uncommitted",
          consumer -> sink.readRange(
              consumer, start, consumer.endOffsets(start.keySet(), CLIENT_TIMEOUT), CLIENT_TIMEOUT));
      for (ConsumerRecord<byte[], byte[]> record : uncommitted) {
        if (!Arrays.equals(record.key(), key)) {
          continue;
        }
        boolean candidate =
            CommitMarker.parse(record.value()).map(marker -> marker.batch >= batchId).orElse(false);
        if (candidate) {
          TopicPartition markerPartition = new TopicPartition(record.topic(), record.partition());
          candidates.add(List.of((long) record.partition(), record.offset()));
          firstCandidate.merge(markerPartition, record.offset(), Math::min);
          pastLastCandidate.merge(markerPartition, record.offset() + 1, Math::max);
        }
      }
      if (candidates.isEmpty()) {
        return false;
      }
      return sink.withConsumer("read_committed", consumer -> {
        long deadline = System.nanoTime() + RESOLVE_TIMEOUT.toNanos();
        // A read_committed consumer's end offsets are the last stable offsets: once past every candidate,
        // each candidate's transaction has ended, and the candidates that were committed can be read.
        while (!pastEveryCandidate(consumer.endOffsets(pastLastCandidate.keySet(), RESOLVE_TIMEOUT),
            pastLastCandidate)) {
          if (System.nanoTime() > deadline) {
            throw new KafkaException(String.format(
                "cannot tell whether an earlier attempt of batch %d partition %d committed: an open "
                    + "transaction holds back marker topic '%s'", batchId, partition, sink.markerTopic));
          }
          pause(Duration.ofMillis(200));
        }
        return sink.readRange(consumer, firstCandidate, pastLastCandidate, CLIENT_TIMEOUT).stream()
            .anyMatch(record -> candidates.contains(List.of((long) record.partition(), record.offset())));
      });
    }

    private static boolean pastEveryCandidate(
        Map<TopicPartition, Long> stableOffsets, Map<TopicPartition, Long> pastLastCandidate) {
      return pastLastCandidate.entrySet().stream()
          .allMatch(entry -> stableOffsets.getOrDefault(entry.getKey(), 0L) >= entry.getValue());
    }

    private RuntimeException failure(RuntimeException error, int partition) {
      return new IllegalStateException(String.format(
          "kafka sink topic '%s': transaction failed in batch %d partition %d: %s",
          sink.topic, batchId, partition, error.getMessage()), error);
    }

    /** One attempt's transaction: its producer, attempt id, row headers and first failed delivery. */
    private final class Transaction {
      final KafkaProducer<byte[], byte[]> producer;
      final AtomicReference<Exception> failure = new AtomicReference<>();
      private final int partition;
      private final String attempt = UUID.randomUUID().toString().replace("-", "");
      private final List<Header> headers;
      private final Callback onFailedDelivery = (metadata, exception) -> {
        if (exception != null) {
          failure.compareAndSet(null, exception);
        }
      };

      Transaction(KafkaProducer<byte[], byte[]> producer, int partition) {
        this.producer = producer;
        this.partition = partition;
        this.headers = List.of(
            header(ATTEMPT_HEADER, attempt),
            header(BATCH_HEADER, String.valueOf(batchId)),
            header(PARTITION_HEADER, String.valueOf(partition)));
      }

      void send(Row row) {
        byte[] key = keyIndex < 0 ? null : (byte[]) row.get(keyIndex);
        producer.send(
            new ProducerRecord<>(sink.topic, null, key, (byte[]) row.get(valueIndex), headers),
            onFailedDelivery);
      }

      void flush() {
        producer.flush();
        Exception failed = failure.get();
        if (failed != null) {
          throw new KafkaException(failed.getMessage(), failed);
        }
      }

      /** Sends the marker of {@code records} rows and commits, asking again after a retriable error. */
      void commit(long records) {
        CommitMarker marker = new CommitMarker(sinkId, batchId, partition, attempt, records, sink.topic);
        producer.send(
            new ProducerRecord<>(sink.markerTopic, CommitMarker.key(sinkId, partition), marker.toJson()),
            onFailedDelivery);
        long deadline = System.nanoTime() + CLIENT_TIMEOUT.toNanos();
        while (true) {
          try {
            producer.commitTransaction();
            return;
          } catch (RetriableException unsure) { // a broker restarting: ask again
            if (System.nanoTime() >= deadline) {
              throw unsure; // its outcome may be unknown: the replay's marker check settles it
            }
          }
        }
      }
    }
  }

  private static KafkaProducer<byte[], byte[]> initialisedProducer(Map<String, String> settings) {
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(new HashMap<String, Object>(settings));
    try {
      producer.initTransactions();
      return producer;
    } catch (KafkaException error) {
      producer.close(Duration.ZERO);
      throw new KafkaException(String.format("transactional.id '%s': cannot initialise transactions: %s",
          settings.get("transactional.id"), error.getMessage()), error);
    }
  }

  /** This JVM's idle producer for {@code settings}, taken out while a task uses it; null if none. */
  private static KafkaProducer<byte[], byte[]> checkOut(Map<String, String> settings) {
    synchronized (IDLE_PRODUCERS) {
      return IDLE_PRODUCERS.remove(settings);
    }
  }

  /** Keeps a producer with no open transaction for the next task of its partition. */
  private static void checkIn(Map<String, String> settings, KafkaProducer<byte[], byte[]> producer) {
    List<KafkaProducer<byte[], byte[]>> evicted = new ArrayList<>();
    synchronized (IDLE_PRODUCERS) {
      KafkaProducer<byte[], byte[]> replaced = IDLE_PRODUCERS.put(settings, producer);
      if (replaced != null) {
        evicted.add(replaced);
      }
      Iterator<KafkaProducer<byte[], byte[]>> eldest = IDLE_PRODUCERS.values().iterator();
      while (IDLE_PRODUCERS.size() > MAX_IDLE_PRODUCERS) {
        evicted.add(eldest.next());
        eldest.remove();
      }
    }
    evicted.forEach(idle -> idle.close(ABORT_TIMEOUT));
  }

  /** Drops a producer: closing it aborts the transaction it had open (best effort; the next attempt's
   * initialisation aborts it anyway). */
  private static void discard(KafkaProducer<byte[], byte[]> producer) {
    try {
      producer.close(ABORT_TIMEOUT);
    } catch (RuntimeException ignored) {
      // A fenced producer may fail to close cleanly: it is dropped all the same.
    }
  }

  /** Runs {@code read} with an idle marker consumer of this JVM (a new one if none is idle). */
  private <T> T withConsumer(String isolation, Function<KafkaConsumer<byte[], byte[]>, T> read) {
    Map<String, String> settings = markerConsumerSettings(producerSettings, isolation);
    Queue<KafkaConsumer<byte[], byte[]>> idle =
        IDLE_CONSUMERS.computeIfAbsent(settings, unused -> new ConcurrentLinkedQueue<>());
    KafkaConsumer<byte[], byte[]> consumer = idle.poll();
    if (consumer == null) {
      consumer = new KafkaConsumer<>(new HashMap<String, Object>(settings));
    }
    try {
      T result = read.apply(consumer);
      consumer.unsubscribe(); // drops the assignment: the next read assigns its own
      idle.add(consumer);
      return result;
    } catch (RuntimeException error) {
      consumer.close(Duration.ZERO);
      throw error;
    }
  }

  /** The records of each partition from {@code start} up to {@code end} (exclusive). */
  private List<ConsumerRecord<byte[], byte[]>> readRange(
      KafkaConsumer<byte[], byte[]> consumer,
      Map<TopicPartition, Long> start,
      Map<TopicPartition, Long> end,
      Duration timeout) {
    List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
    Set<TopicPartition> pending = new HashSet<>();
    start.forEach((partition, offset) -> {
      if (offset < end.getOrDefault(partition, 0L)) {
        pending.add(partition);
      }
    });
    if (pending.isEmpty()) {
      return records;
    }
    consumer.assign(pending);
    pending.forEach(partition -> consumer.seek(partition, start.get(partition)));
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!pending.isEmpty()) {
      if (System.nanoTime() > deadline) {
        throw new KafkaException(String.format(
            "marker topic '%s': partition(s) %s not read to the end within %d s",
            markerTopic, pending, timeout.toSeconds()));
      }
      for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
        if (record.offset() < end.get(new TopicPartition(record.topic(), record.partition()))) {
          records.add(record);
        }
      }
      // The position also moves past aborted records and transaction markers, which poll() does not give.
      pending.removeIf(partition -> consumer.position(partition) >= end.get(partition));
    }
    return records;
  }

  /** Reads a skipped partition's rows all the same: stateful operators commit their state, and the
   * watermark and the invalid-record counts see the whole batch, when rows are read. */
  private static void drain(Iterator<Row> rows) {
    while (rows.hasNext()) {
      rows.next();
    }
  }

  private static void pause(Duration duration) {
    try {
      Thread.sleep(duration.toMillis());
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt(); // a killed task: let Spark see it
      throw new KafkaException("interrupted while waiting for the marker topic", interrupted);
    }
  }

  private static Header header(String name, String value) {
    return new RecordHeader(name, value.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * The crash tests' fault injection (see the class comment): waits while the flag file exists and names
   * this batch or an earlier one.
   */
  private static void holdWhileFlagged(String flag, long batchId) {
    long deadline = System.nanoTime() + HOLD_LIMIT.toNanos();
    try {
      while (System.nanoTime() < deadline) {
        if (batchId < Long.parseLong(Files.readString(Path.of(flag)).trim())) {
          return;
        }
        Thread.sleep(20);
      }
    } catch (IOException | NumberFormatException noFlag) { // removed (the kill is over), or no batch id
    } catch (InterruptedException interrupted) { // the task is being killed: let it go
      Thread.currentThread().interrupt();
    }
  }
}

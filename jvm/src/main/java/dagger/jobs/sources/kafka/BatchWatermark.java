package dagger.jobs.sources.kafka;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.deploy.SparkHadoopUtil;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF0;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * The event-time watermark the running micro-batch was planned with, in epoch microseconds (0 before any
 * event time was seen), for the stream's late-record policy: a record with an earlier event time is late.
 *
 * <p>Spark writes each batch's watermark into the checkpoint's offset log ({@code offsets/<batch>}, the
 * {@code batchWatermarkMs} of its second line) before the batch runs, and tells the batch's tasks its id
 * (the {@code streaming.sql.batchId} property). The task reads it there, so a task run again, or a batch
 * run again after a crash, marks the same records late, as the Python source does on its driver.
 *
 * <p>Registered as non-deterministic, so Spark neither folds it into a constant nor moves it. Each JVM
 * keeps the latest batch's watermark per checkpoint: one read of the log per batch, not per record.
 */
public final class BatchWatermark implements UDF0<Long> {
  private static final long serialVersionUID = 1L;
  private static final String BATCH_ID = "streaming.sql.batchId";
  private static final Pattern WATERMARK = Pattern.compile("\"batchWatermarkMs\"\\s*:\\s*(\\d+)");
  /** Per checkpoint: {batch id, watermark in microseconds} of the latest batch read. */
  private static final Map<String, long[]> LATEST = new ConcurrentHashMap<>();

  private final String checkpoint;

  public BatchWatermark(String checkpoint) {
    this.checkpoint = checkpoint;
  }

  /** Registers the checkpoint's watermark as the non-deterministic function {@code name}. */
  public static void register(SparkSession session, String name, BatchWatermark watermark) {
    UserDefinedFunction function = functions.udf(watermark, DataTypes.LongType).asNondeterministic();
    session.udf().register(name, function);
  }

  @Override
  public Long call() {
    TaskContext task = TaskContext.get();
    String batch = task == null ? null : task.getLocalProperty(BATCH_ID);
    if (batch == null) {
      throw new IllegalStateException(
          "the batch's watermark is read in a task of a streaming query, which names its batch");
    }
    long batchId = Long.parseLong(batch);
    long[] latest = LATEST.get(checkpoint);
    if (latest == null || latest[0] != batchId) {
      latest = new long[] {batchId, read(batchId)};
      LATEST.put(checkpoint, latest);
    }
    return latest[1];
  }

  private long read(long batchId) {
    Path log = new Path(checkpoint, "offsets/" + batchId);
    Configuration conf = SparkHadoopUtil.get().newConfiguration(SparkEnv.get().conf());
    try (BufferedReader lines =
        new BufferedReader(
            new InputStreamReader(log.getFileSystem(conf).open(log), StandardCharsets.UTF_8))) {
      lines.readLine(); // the log's version
      String metadata = lines.readLine();
      Matcher found = WATERMARK.matcher(metadata == null ? "" : metadata);
      return found.find() ? Long.parseLong(found.group(1)) * 1000 : 0;
    } catch (IOException e) {
      throw new UncheckedIOException("could not read the batch's watermark from " + log, e);
    }
  }
}

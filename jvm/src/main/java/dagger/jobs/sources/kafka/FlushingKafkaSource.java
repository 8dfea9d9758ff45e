package dagger.jobs.sources.kafka;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.Column;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.kafka010.KafkaSourceProvider;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark's Kafka source, read in micro-batches through {@link FlushingMicroBatchStream}: a bounded run ({@code
 * Trigger.AvailableNow}) ends its input with the final row. The data source a flushing bounded run of a
 * dagger reads its {@code connector: spark} Kafka streams with ({@code format} is this class's name); its
 * options and columns are the Kafka source's, passed to it as they are. Micro-batch reads only.
 */
public final class FlushingKafkaSource implements TableProvider {
  private final KafkaSourceProvider kafka = new KafkaSourceProvider();

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return kafka.inferSchema(options);
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new FlushingTable((SupportsRead) kafka.getTable(schema, partitioning, properties));
  }

  /** The Kafka source's table, read in micro-batches only. */
  record FlushingTable(SupportsRead kafka) implements SupportsRead {
    @Override
    public String name() {
      return kafka.name();
    }

    @Override
    public Column[] columns() {
      return kafka.columns();
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      ScanBuilder builder = kafka.newScanBuilder(options);
      return () -> new FlushingScan(builder.build());
    }
  }

  /** The Kafka source's scan, whose micro-batch stream ends a bounded run's input. */
  record FlushingScan(Scan kafka) implements Scan {
    @Override
    public StructType readSchema() {
      return kafka.readSchema();
    }

    @Override
    public String description() {
      return kafka.description();
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      return new FlushingMicroBatchStream(kafka.toMicroBatchStream(checkpointLocation), readSchema());
    }

    @Override
    public CustomMetric[] supportedCustomMetrics() {
      return kafka.supportedCustomMetrics();
    }

    @Override
    public CustomTaskMetric[] reportDriverMetrics() {
      return kafka.reportDriverMetrics();
    }
  }
}

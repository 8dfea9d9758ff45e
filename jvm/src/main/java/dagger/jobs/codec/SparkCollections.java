package dagger.jobs.codec;

import java.util.List;
import java.util.Map;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An array or map column's value as a Java collection: Spark hands a UDF Scala collections, and a row
 * built in Java may hold Java ones.
 */
final class SparkCollections {
  private SparkCollections() {}

  static List<?> asList(Object value) {
    if (value instanceof scala.collection.Seq<?> seq) {
      return CollectionConverters.asJava(seq);
    }
    return (List<?>) value;
  }

  static Map<?, ?> asMap(Object value) {
    if (value instanceof scala.collection.Map<?, ?> map) {
      return CollectionConverters.asJava(map);
    }
    return (Map<?, ?>) value;
  }
}

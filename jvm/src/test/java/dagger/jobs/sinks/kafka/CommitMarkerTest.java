package dagger.jobs.sinks.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Markers, keys and transactional ids as the Python side (jobs/sinks/kafka/exactly_once.py) has them. */
class CommitMarkerTest {
  private static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void readsWhatPythonWrites() {
    // json.dumps of the Python task's marker
    String python = "{\"sink\": \"orders-6f1c-0\", \"batch\": 12, \"partition\": 3, \"attempt\": \"9e2a\", "
        + "\"records\": 40, \"topic\": \"out\"}";
    CommitMarker marker = CommitMarker.parse(utf8(python)).orElseThrow();
    assertEquals("orders-6f1c-0", marker.sink);
    assertEquals(12, marker.batch);
    assertEquals(3, marker.partition);
    assertEquals("9e2a", marker.attempt);
    assertEquals(40, marker.records);
    assertEquals("out", marker.topic);
  }

  @Test
  void writesWhatItReads() {
    CommitMarker written = new CommitMarker("d-q-0", 7, 1, "ab\"c", 5, "out");
    assertEquals(
        "{\"sink\":\"d-q-0\",\"batch\":7,\"partition\":1,\"attempt\":\"ab\\\"c\",\"records\":5,\"topic\":\"out\"}",
        new String(written.toJson(), StandardCharsets.UTF_8));
    CommitMarker read = CommitMarker.parse(written.toJson()).orElseThrow();
    assertEquals(
        List.of(written.sink, written.batch, written.partition, written.attempt, written.records),
        List.of(read.sink, read.batch, read.partition, read.attempt, read.records));
  }

  @ParameterizedTest
  @ValueSource(strings = {
    "not json",
    "[1, 2]",
    "{\"sink\": \"s\", \"batch\": 1, \"partition\": 0}",
    "{\"sink\": \"s\", \"batch\": \"1\", \"partition\": 0, \"attempt\": \"a\"}",
    "{\"sink\": \"s\", \"batch\": 1, \"partition\": 0.5, \"attempt\": \"a\"}",
  })
  void anythingElseIsNoMarker(String value) {
    assertTrue(CommitMarker.parse(utf8(value)).isEmpty());
  }

  @Test
  void namesDeriveFromTheSinkIdentity() {
    assertEquals("dagger-orders-6f1c-0-3", CommitMarker.transactionalId("orders-6f1c-0", 3));
    assertArrayEquals(utf8("orders-6f1c-0/3"), CommitMarker.key("orders-6f1c-0", 3));
  }

  @Test
  void markerConsumersTakeOnlyTheProducerSettingsConsumersKnow() {
    Map<String, String> producer = Map.of(
        "bootstrap.servers", "broker:9092",
        "security.protocol", "SASL_SSL",
        "sasl.jaas.config", "jaas",
        "acks", "all",
        "linger.ms", "20",
        "transactional.id", "dagger-x-0");
    Map<String, String> consumer = ExactlyOnceKafkaWriter.markerConsumerSettings(producer, "read_committed");
    assertEquals("broker:9092", consumer.get("bootstrap.servers"));
    assertEquals("SASL_SSL", consumer.get("security.protocol"));
    assertEquals("jaas", consumer.get("sasl.jaas.config"));
    assertEquals("read_committed", consumer.get("isolation.level"));
    assertEquals("false", consumer.get("enable.auto.commit"));
    for (String producerOnly : new String[] {"acks", "linger.ms", "transactional.id"}) {
      assertFalse(consumer.containsKey(producerOnly), producerOnly);
    }
  }
}

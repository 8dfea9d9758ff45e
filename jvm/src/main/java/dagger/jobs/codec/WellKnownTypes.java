package dagger.jobs.codec;

import java.util.Set;

/** The protobuf well-known types both JVM codecs give their own shapes (see jobs/codec/protobuf.py). */
final class WellKnownTypes {
  private WellKnownTypes() {}

  static final String TIMESTAMP = "google.protobuf.Timestamp";
  static final String DURATION = "google.protobuf.Duration";
  /** Read and written as JSON text. */
  static final Set<String> JSON_TYPES =
      Set.of("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue");
  /** Read as their nullable scalar (or Dagger's STRUCT<value>). */
  static final Set<String> WRAPPERS = Set.of(
      "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
      "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
      "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue");
}

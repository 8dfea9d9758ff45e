package dagger.jobs.codec;

import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import org.apache.spark.sql.api.java.UDF1;

/**
 * Why a payload is not a valid message (null when it is): the reason an invalid-record error gives. Only
 * the records {@link ProtobufRowDecoder} could not decode are parsed a second time by it.
 */
public final class ProtobufParseError implements UDF1<byte[], String> {
  private static final long serialVersionUID = 1L;

  private final byte[] descriptorSet;
  private final String messageName;
  private transient Descriptor descriptor;

  public ProtobufParseError(byte[] descriptorSet, String messageName) {
    this.descriptorSet = descriptorSet;
    this.messageName = messageName;
    this.descriptor = ProtobufRowDecoder.findMessage(descriptorSet, messageName);
  }

  @Override
  public String call(byte[] payload) {
    if (payload == null) {
      return "record has no value (tombstone)"; // the Python source's words
    }
    if (descriptor == null) {
      descriptor = ProtobufRowDecoder.findMessage(descriptorSet, messageName);
    }
    try {
      DynamicMessage.parseFrom(descriptor, payload);
      return null;
    } catch (InvalidProtocolBufferException e) {
      return "failed to decode Protobuf message: " + e.getMessage(); // the Python source's words first
    }
  }
}

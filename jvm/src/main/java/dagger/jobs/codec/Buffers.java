package dagger.jobs.codec;

import com.google.protobuf.CodedOutputStream;
import com.google.protobuf.WireFormat;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The buffers of one row, one per nesting depth: a length-delimited value is written into the buffer of
 * its depth, then copied after its tag and length into its parent's.
 */
final class Buffers {
  private static final int MAX_SIZE = Integer.MAX_VALUE - 8;
  private final List<Buffer> depths = new ArrayList<>();
  private int depth;

  /** Writes a length-delimited value's bytes into a buffer: false when it stands for nothing at all. */
  @FunctionalInterface
  interface Content {
    boolean write(CodedOutputStream out, Object value, Buffers buffers) throws IOException;
  }

  /**
   * The next depth's buffer, holding what {@code content} writes for {@code value}, or null when that is
   * nothing at all. A buffer too small is grown and written again: writing has no other effect.
   */
  Buffer fill(Content content, Object value) throws IOException {
    int at = depth;
    if (at == depths.size()) {
      depths.add(new Buffer());
    }
    Buffer buffer = depths.get(at);
    depth = at + 1;
    try {
      while (true) {
        CodedOutputStream out = CodedOutputStream.newInstance(buffer.bytes);
        try {
          if (!content.write(out, value, this)) {
            return null;
          }
          buffer.size = out.getTotalBytesWritten();
          return buffer;
        } catch (CodedOutputStream.OutOfSpaceException full) {
          if (buffer.bytes.length == MAX_SIZE) {
            throw full;
          }
          buffer.bytes = new byte[(int) Math.min(2L * buffer.bytes.length, MAX_SIZE)];
        }
      }
    } finally {
      depth = at;
    }
  }

  /** One depth's bytes: kept until the depth is filled again. */
  static final class Buffer {
    private byte[] bytes = new byte[256];
    private int size;

    int size() {
      return size;
    }

    /** Its bytes as the value of field {@code number}, after the tag and their length. */
    void writeDelimited(CodedOutputStream target, int number) throws IOException {
      target.writeTag(number, WireFormat.WIRETYPE_LENGTH_DELIMITED);
      target.writeUInt32NoTag(size);
      target.writeRawBytes(bytes, 0, size);
    }

    /** Its bytes as a group, field {@code number}. */
    void writeGroup(CodedOutputStream target, int number) throws IOException {
      target.writeTag(number, WireFormat.WIRETYPE_START_GROUP);
      target.writeRawBytes(bytes, 0, size);
      target.writeTag(number, WireFormat.WIRETYPE_END_GROUP);
    }

    /** {@code length} of its bytes from {@code from}, as they are: fields already tagged. */
    void writeRange(CodedOutputStream target, int from, int length) throws IOException {
      target.writeRawBytes(bytes, from, length);
    }

    byte[] toByteArray() {
      return Arrays.copyOf(bytes, size);
    }
  }
}

package dagger.jobs.codec;

import com.google.protobuf.CodedOutputStream;
import java.io.IOException;

/** Writes one field, its tag and its value, from its column's value (never null). */
@FunctionalInterface
interface FieldWriter {
  void write(CodedOutputStream out, Object value, Buffers buffers) throws IOException;
}

package dagger.jobs.engine;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system, setting permissions through java.nio instead of a `chmod` process.
 *
 * <p>Without Hadoop's native library (pip's Spark has none), every file Hadoop creates on the local file
 * system gets its permissions from a forked `chmod`: four per micro-batch for the checkpoint's offset and
 * commit files and their checksums, each a process launch from a JVM of several hundred MB on the stream's
 * own thread. `jobs.engine.spark` makes this the `file://` file system of sessions on a local master.
 */
public final class ForklessLocalFileSystem extends LocalFileSystem {

  public ForklessLocalFileSystem() {
    super(new ForklessRawLocalFileSystem());
  }

  /** The raw file system under the checksums: only `setPermission` differs from Hadoop's. */
  static final class ForklessRawLocalFileSystem extends RawLocalFileSystem {

    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE,
      PosixFilePermission.OTHERS_WRITE,
      PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE,
      PosixFilePermission.GROUP_WRITE,
      PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE,
      PosixFilePermission.OWNER_WRITE,
      PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      if (permission.getStickyBit()) { // java.nio cannot set it: Hadoop's own way does
        super.setPermission(path, permission);
        return;
      }
      short mode = permission.toShort();
      Set<PosixFilePermission> granted = EnumSet.noneOf(PosixFilePermission.class);
      for (int bit = 0; bit < BITS.length; bit++) {
        if ((mode & (1 << bit)) != 0) {
          granted.add(BITS[bit]);
        }
      }
      Files.setPosixFilePermissions(pathToFile(path).toPath(), granted);
    }
  }
}

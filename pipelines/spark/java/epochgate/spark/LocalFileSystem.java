package epochgate.spark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's local file system (with its checksum files), which sets the permissions of the files
 * and directories it creates with chmod(2) in the JVM. Hadoop's own, without its native library
 * (which the PySpark wheel does not carry), starts a chmod process for each: about a dozen for
 * every Parquet write of two partitions.
 */
public class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new Raw());
  }

  /** Hadoop's raw local file system, with permissions set in the JVM. */
  public static class Raw extends RawLocalFileSystem {
    /** The permission bits from the lowest (others' execute) to the highest (owner's read). */
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

    /** A mode with a sticky bit, or a JVM with Hadoop's native library, goes Hadoop's way. */
    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      short mode = permission.toShort();
      if ((mode & ~0777) != 0 || NativeIO.isAvailable()) {
        super.setPermission(path, permission);
        return;
      }
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

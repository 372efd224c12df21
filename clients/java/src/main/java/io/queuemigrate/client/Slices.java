package io.queuemigrate.client;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/** The slice function of docs/design.md, byte-for-byte queue-migrate's {@code slice_of}. */
public final class Slices {
  private Slices() {}

  /**
   * The slice of an aggregate key: the first four bytes of SHA-256 over the key's UTF-8, read as
   * an unsigned big-endian integer, modulo {@code slices} (a {@code slices} below 1 counts as 1).
   * A message goes to the new broker when {@code sliceOf(key, slices_total) < slices_migrated}.
   *
   * @param key the aggregate key (hashed as UTF-8, not UTF-16)
   * @param slices the slice count, 1 to 2^32-1
   * @return the slice, 0 to slices-1
   */
  public static long sliceOf(String key, long slices) {
    byte[] d = sha256().digest(key.getBytes(StandardCharsets.UTF_8));
    long first =
        ((d[0] & 0xffL) << 24) | ((d[1] & 0xffL) << 16) | ((d[2] & 0xffL) << 8) | (d[3] & 0xffL);
    return first % Math.max(slices, 1L);
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      // Every Java platform must provide SHA-256 (java.security.MessageDigest's contract).
      throw new IllegalStateException("SHA-256 is missing from this Java platform", e);
    }
  }
}

package io.queuemigrate.client;

/**
 * A running follower (a daemon thread) of a {@link Router}: {@link #status()} says how it is
 * doing; {@link #close()} stops it.
 */
public final class Follower implements AutoCloseable {
  /**
   * How a follower is doing, for health checks ("routing stale for 10 minutes").
   *
   * @param accepted documents accepted from this follower's source
   * @param consecutiveFailures failed attempts since the last success (0: the source answered)
   * @param lastError the last failure while the source is failing, else null: a document
   *     refused (another migration's, incoherent, malformed) is a failure
   */
  public record Status(long accepted, int consecutiveFailures, String lastError) {}

  private long accepted;
  private int consecutiveFailures;
  private String lastError;
  private volatile boolean stopped;
  private final Object lock = new Object();
  private Thread thread;
  private Runnable onStop = () -> {};

  Follower() {}

  /** How the follower is doing now. */
  public Status status() {
    synchronized (lock) {
      return new Status(accepted, consecutiveFailures, lastError);
    }
  }

  /** Stop the follower (its thread ends at its next step; an open request is cancelled). */
  @Override
  public void close() {
    stopped = true;
    onStop.run();
    Thread t = thread;
    if (t != null) {
      t.interrupt();
    }
  }

  boolean stopped() {
    return stopped;
  }

  void start(Thread t, Runnable onStop) {
    this.onStop = onStop;
    this.thread = t;
    t.setDaemon(true);
    t.start();
  }

  void ok(boolean wasAccepted) {
    synchronized (lock) {
      if (wasAccepted) {
        accepted++;
      }
      consecutiveFailures = 0;
      lastError = null;
    }
  }

  void failed(Exception e) {
    synchronized (lock) {
      consecutiveFailures++;
      lastError = e.getMessage() == null ? e.toString() : e.getMessage();
    }
  }

  /** Sleep up to {@code millis}; false if stopped meanwhile. */
  boolean pause(long millis) {
    if (millis <= 0) {
      return !stopped;
    }
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
    return !stopped;
  }
}

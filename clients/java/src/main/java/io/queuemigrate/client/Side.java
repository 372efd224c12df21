package io.queuemigrate.client;

/** One side of a migration: the old broker or the new one. */
public enum Side {
  /** The broker the flow moves away from. */
  OLD("old"),
  /** The broker the flow moves to. */
  NEW("new");

  private final String wire;

  Side(String wire) {
    this.wire = wire;
  }

  /** The side as written in documents and stamps: {@code old} or {@code new}. */
  public String wire() {
    return wire;
  }

  /**
   * The side named {@code old} or {@code new}.
   *
   * @throws IllegalArgumentException for any other text
   */
  public static Side of(String wire) {
    if ("old".equals(wire)) {
      return OLD;
    }
    if ("new".equals(wire)) {
      return NEW;
    }
    throw new IllegalArgumentException("a side is old or new, not " + wire);
  }

  @Override
  public String toString() {
    return wire;
  }
}

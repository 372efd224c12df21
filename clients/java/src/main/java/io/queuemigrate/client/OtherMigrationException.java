package io.queuemigrate.client;

/** A routing document for another migration than the router's: refused, the current one kept. */
public final class OtherMigrationException extends RoutingException {
  private static final long serialVersionUID = 1L;

  private final String expected;
  private final String got;

  /** The router follows {@code expected}; the document names {@code got}. */
  public OtherMigrationException(String expected, String got) {
    super(
        "routing document is for migration "
            + Json.quote(got)
            + ", but this router follows "
            + Json.quote(expected));
    this.expected = expected;
    this.got = got;
  }

  /** The migration the router follows. */
  public String expected() {
    return expected;
  }

  /** The migration the document names. */
  public String got() {
    return got;
  }
}

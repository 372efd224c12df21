package io.queuemigrate.client;

/**
 * A routing document refused: not one (malformed), incoherent, or for another migration than
 * the router's. The router keeps its current document.
 */
public class RoutingException extends Exception {
  private static final long serialVersionUID = 1L;

  /** A refusal saying why. */
  public RoutingException(String message) {
    super(message);
  }

  /** A refusal saying why, with its cause. */
  public RoutingException(String message, Throwable cause) {
    super(message, cause);
  }
}

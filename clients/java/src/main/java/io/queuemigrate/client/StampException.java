package io.queuemigrate.client;

/** A route stamp that is missing, repeated or not in the wire format; the message names the field. */
public class StampException extends Exception {
  private static final long serialVersionUID = 1L;

  /** An error naming the field. */
  public StampException(String message) {
    super(message);
  }
}

package io.queuemigrate.client;

import java.math.BigInteger;
import java.util.List;
import java.util.Map;

/**
 * The routing document the controller publishes (docs/routing.md, section 1): the fields a
 * producer needs. Other fields ({@code state}, {@code step}, {@code paused}, {@code updated_at})
 * are for people and logs and are not kept.
 *
 * @param migration the migration's name
 * @param generation increases with every transition
 * @param slicesTotal the slice count, 1 to 2^32-1
 * @param slicesMigrated the slices on the new broker, 0 to slicesTotal
 * @param consume the sides consumers read now, at least one
 * @param oldBroker the old broker's name, as in stamps and metrics
 * @param newBroker the new broker's name
 */
public record RoutingDocument(
    String migration,
    long generation,
    long slicesTotal,
    long slicesMigrated,
    List<Side> consume,
    String oldBroker,
    String newBroker) {

  private static final long U32 = 0xffffffffL;

  /** The document, with {@code consume} copied unmodifiable. */
  public RoutingDocument {
    consume = List.copyOf(consume);
  }

  /** The route of {@code key}: new when its slice is below {@code slicesMigrated}. */
  public Route route(String key) {
    long slice = Slices.sliceOf(key, slicesTotal);
    return new Route(slice < slicesMigrated ? Side.NEW : Side.OLD, slice, generation);
  }

  /** The broker's name on {@code side}. */
  public String brokerName(Side side) {
    return side == Side.OLD ? oldBroker : newBroker;
  }

  /**
   * Read a document from JSON text, with the Router's rules: {@code migration} a non-empty
   * string, {@code generation} a non-negative integer below 2^63, {@code slices_total} 1 to
   * 2^32-1, {@code slices_migrated} 0 to {@code slices_total}, {@code consume} a non-empty list of
   * {@code old}/{@code new}, {@code brokers} naming both.
   *
   * @throws RoutingException saying what is wrong
   */
  public static RoutingDocument parse(String json) throws RoutingException {
    Object v;
    try {
      v = Json.parse(json);
    } catch (Json.JsonException e) {
      throw new RoutingException("routing document refused: " + e.getMessage(), e);
    }
    return from(v);
  }

  /**
   * A document from a parsed JSON value ({@link Json#parse}), with the rules of {@link #parse}.
   *
   * @throws RoutingException saying what is wrong
   */
  public static RoutingDocument from(Object value) throws RoutingException {
    if (!(value instanceof Map<?, ?> m)) {
      throw refused("not an object");
    }
    if (!(m.get("migration") instanceof String migration) || migration.isEmpty()) {
      throw refused("migration is not a non-empty string");
    }
    long generation = integer(m.get("generation"), Long.MAX_VALUE, "generation");
    long total = integer(m.get("slices_total"), U32, "slices_total");
    if (total < 1) {
      throw refused("slices_total must be 1 to 2^32-1");
    }
    long migrated = integer(m.get("slices_migrated"), total, "slices_migrated");
    if (!(m.get("consume") instanceof List<?> sides) || sides.isEmpty()) {
      throw refused("consume must list old and/or new");
    }
    List<Side> consume = new java.util.ArrayList<>();
    for (Object s : sides) {
      if (!"old".equals(s) && !"new".equals(s)) {
        throw refused("consume must list old and/or new");
      }
      consume.add(Side.of((String) s));
    }
    if (!(m.get("brokers") instanceof Map<?, ?> brokers)
        || !(brokers.get("old") instanceof String oldName)
        || !(brokers.get("new") instanceof String newName)) {
      throw refused("brokers must name old and new");
    }
    return new RoutingDocument(migration, generation, total, migrated, consume, oldName, newName);
  }

  private static long integer(Object v, long max, String field) throws RoutingException {
    if (!(v instanceof BigInteger n)
        || n.signum() < 0
        || n.compareTo(BigInteger.valueOf(max)) > 0) {
      throw refused(field + " must be an integer from 0 to " + max);
    }
    return n.longValueExact();
  }

  private static RoutingException refused(String why) {
    return new RoutingException("routing document refused: " + why);
  }
}

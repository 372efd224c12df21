package io.queuemigrate.client;

import java.math.BigInteger;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The route stamp (docs/routing.md, section 4): where a message went and under which routing
 * that was decided, as six headers or a {@code route} object in a JSON payload.
 *
 * @param broker the broker's name as in the routing document's {@code brokers}
 * @param route {@code old}, {@code new}, {@code bridge} or {@code replay}
 * @param slice the aggregate key's slice, 0 to 2^32-1
 * @param generation the routing generation that decided the route, unsigned 64-bit (held in a
 *     {@code long}'s bits: read it with {@link Long#toUnsignedString(long)})
 * @param producer the producer's stable service name
 * @param at publish time, milliseconds since the Unix epoch, 0 to 2^63-1
 */
public record RouteStamp(
    String broker, String route, long slice, long generation, String producer, long at) {

  /** The six header names, lowercase, in the order they are written. */
  public static final List<String> HEADERS =
      List.of(
          "x-qm-broker", "x-qm-route", "x-qm-slice", "x-qm-generation", "x-qm-producer", "x-qm-at");

  /** The routes a stamp may name. */
  public static final List<String> ROUTES = List.of("old", "new", "bridge", "replay");

  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._\\-:@/+]{1,128}");
  private static final Pattern DIGITS = Pattern.compile("[0-9]{1,20}");
  private static final BigInteger U32 = BigInteger.valueOf(0xffffffffL);
  private static final BigInteger U64 = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.ONE);
  private static final BigInteger I64 = BigInteger.valueOf(Long.MAX_VALUE);

  /**
   * The stamp of a message routed by {@code route}, published to {@code broker} by
   * {@code producer} at {@code atMs} (a negative time counts as 0).
   *
   * @throws StampException if a name is outside the wire format
   */
  public static RouteStamp of(Route route, String broker, String producer, long atMs)
      throws StampException {
    return new RouteStamp(
        name("x-qm-broker", broker),
        route.target().wire(),
        route.slice(),
        route.generation(),
        name("x-qm-producer", producer),
        Math.max(0, atMs));
  }

  /** The six headers: lowercase names, decimal values, in {@link #HEADERS} order. */
  public Map<String, String> headers() {
    Map<String, String> h = new LinkedHashMap<>();
    h.put("x-qm-broker", broker);
    h.put("x-qm-route", route);
    h.put("x-qm-slice", Long.toString(slice));
    h.put("x-qm-generation", Long.toUnsignedString(generation));
    h.put("x-qm-producer", producer);
    h.put("x-qm-at", Long.toString(at));
    return h;
  }

  /**
   * Read a stamp from message headers (names case-insensitive, other headers ignored).
   *
   * @throws StampException naming the field that is missing, repeated or invalid
   */
  public static RouteStamp fromHeaders(Iterable<? extends Map.Entry<String, String>> headers)
      throws StampException {
    Map<String, String> found = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : headers) {
      String lower = e.getKey().toLowerCase(Locale.ROOT);
      if (!HEADERS.contains(lower)) {
        continue;
      }
      if (found.putIfAbsent(lower, String.valueOf(e.getValue())) != null) {
        throw new StampException("route stamp: header " + lower + " appears more than once");
      }
    }
    for (String h : HEADERS) {
      if (!found.containsKey(h)) {
        throw new StampException("route stamp: " + h + " is missing");
      }
    }
    String route = found.get("x-qm-route");
    if (!ROUTES.contains(route)) {
      throw invalid("x-qm-route", route, "old, new, bridge or replay");
    }
    return new RouteStamp(
        name("x-qm-broker", found.get("x-qm-broker")),
        route,
        decimal("x-qm-slice", found.get("x-qm-slice"), U32),
        decimal("x-qm-generation", found.get("x-qm-generation"), U64),
        name("x-qm-producer", found.get("x-qm-producer")),
        decimal("x-qm-at", found.get("x-qm-at"), I64));
  }

  /** The JSON form, the payload's {@code route} object, as compact JSON text. */
  public String toJson() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("broker", broker);
    m.put("route", route);
    m.put("slice", slice);
    m.put("generation", new BigInteger(Long.toUnsignedString(generation)));
    m.put("producer", producer);
    m.put("at", at);
    return Json.write(m);
  }

  /**
   * Read the JSON form from a parsed {@code route} object ({@link Json#parse}); unknown fields
   * are ignored.
   *
   * @throws StampException naming the field that is missing or invalid
   */
  public static RouteStamp fromJson(Object value) throws StampException {
    if (!(value instanceof Map<?, ?> m)) {
      throw new StampException("route stamp: the route field is not a JSON object");
    }
    Object route = get(m, "route");
    if (!ROUTES.contains(route)) {
      throw invalid("route.route", Json.write(route), "old, new, bridge or replay");
    }
    return new RouteStamp(
        name("route.broker", get(m, "broker")),
        (String) route,
        integer(m, "slice", U32),
        integer(m, "generation", U64),
        name("route.producer", get(m, "producer")),
        integer(m, "at", I64));
  }

  private static Object get(Map<?, ?> m, String field) throws StampException {
    if (!m.containsKey(field)) {
      throw new StampException("route stamp: route." + field + " is missing");
    }
    return m.get(field);
  }

  private static long integer(Map<?, ?> m, String field, BigInteger max) throws StampException {
    Object v = get(m, field);
    if (!(v instanceof BigInteger n) || n.signum() < 0 || n.compareTo(max) > 0) {
      throw invalid("route." + field, Json.write(v), "an integer from 0 to " + max);
    }
    return n.longValue();
  }

  private static StampException invalid(String field, Object value, String expected) {
    String text = String.valueOf(value);
    if (text.length() > 64) {
      text = text.substring(0, 64);
    }
    return new StampException(
        "route stamp: " + field + " = " + Json.quote(text) + " is invalid: expected " + expected);
  }

  private static String name(String field, Object value) throws StampException {
    if (!(value instanceof String s) || !NAME.matcher(s).matches()) {
      throw invalid(field, value, "1 to 128 characters of A-Z a-z 0-9 . _ - : @ / +");
    }
    return s;
  }

  private static long decimal(String field, String text, BigInteger max) throws StampException {
    if (!DIGITS.matcher(text).matches() || new BigInteger(text).compareTo(max) > 0) {
      throw invalid(field, text, "a decimal integer from 0 to " + max);
    }
    // A generation above 2^63-1 is kept as its unsigned bits (Long.toUnsignedString reads it).
    return new BigInteger(text).longValue();
  }
}

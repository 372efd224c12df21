package io.queuemigrate.client;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small JSON reader and writer (RFC 8259), enough for the routing document, the stamp's JSON
 * form and the route-keys program: objects become {@code Map<String, Object>} (in document order),
 * arrays {@code List<Object>}, strings {@code String}, integers {@code BigInteger}, other numbers
 * {@code BigDecimal}, {@code true}/{@code false} {@code Boolean} and {@code null} {@code null}.
 * Nesting deeper than 64 levels is refused (no stack overflow on hostile input).
 */
public final class Json {
  private static final int MAX_DEPTH = 64;

  private final String text;
  private int at;

  private Json(String text) {
    this.text = text;
  }

  /** A JSON text that is not well-formed; the message says where. */
  public static final class JsonException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    JsonException(String message) {
      super(message);
    }
  }

  /**
   * Read one JSON value; only whitespace may follow it.
   *
   * @throws JsonException if the text is not one well-formed JSON value
   */
  public static Object parse(String text) {
    Json p = new Json(text);
    p.space();
    Object v = p.value(0);
    p.space();
    if (p.at != text.length()) {
      throw p.error("unexpected text after the value");
    }
    return v;
  }

  private JsonException error(String what) {
    return new JsonException("not JSON: " + what + " at offset " + at);
  }

  private void space() {
    while (at < text.length()) {
      char c = text.charAt(at);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        return;
      }
      at++;
    }
  }

  private Object value(int depth) {
    if (depth > MAX_DEPTH) {
      throw error("nested deeper than " + MAX_DEPTH);
    }
    if (at >= text.length()) {
      throw error("unexpected end");
    }
    char c = text.charAt(at);
    switch (c) {
      case '{':
        return object(depth);
      case '[':
        return array(depth);
      case '"':
        return string();
      case 't':
        return literal("true", Boolean.TRUE);
      case 'f':
        return literal("false", Boolean.FALSE);
      case 'n':
        return literal("null", null);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          return number();
        }
        throw error("unexpected character '" + c + "'");
    }
  }

  private Object literal(String word, Object v) {
    if (!text.startsWith(word, at)) {
      throw error("expected " + word);
    }
    at += word.length();
    return v;
  }

  private Map<String, Object> object(int depth) {
    Map<String, Object> m = new LinkedHashMap<>();
    at++;
    space();
    if (at < text.length() && text.charAt(at) == '}') {
      at++;
      return m;
    }
    for (; ; ) {
      space();
      if (at >= text.length() || text.charAt(at) != '"') {
        throw error("expected a member name");
      }
      String name = string();
      space();
      expect(':');
      space();
      m.put(name, value(depth + 1));
      space();
      if (at < text.length() && text.charAt(at) == ',') {
        at++;
        continue;
      }
      expect('}');
      return m;
    }
  }

  private List<Object> array(int depth) {
    List<Object> l = new ArrayList<>();
    at++;
    space();
    if (at < text.length() && text.charAt(at) == ']') {
      at++;
      return l;
    }
    for (; ; ) {
      space();
      l.add(value(depth + 1));
      space();
      if (at < text.length() && text.charAt(at) == ',') {
        at++;
        continue;
      }
      expect(']');
      return l;
    }
  }

  private void expect(char c) {
    if (at >= text.length() || text.charAt(at) != c) {
      throw error("expected '" + c + "'");
    }
    at++;
  }

  private String string() {
    at++;
    StringBuilder b = new StringBuilder();
    for (; ; ) {
      if (at >= text.length()) {
        throw error("unterminated string");
      }
      char c = text.charAt(at++);
      if (c == '"') {
        return b.toString();
      }
      if (c < 0x20) {
        throw error("control character in a string");
      }
      if (c != '\\') {
        b.append(c);
        continue;
      }
      if (at >= text.length()) {
        throw error("unterminated escape");
      }
      char e = text.charAt(at++);
      switch (e) {
        case '"':
        case '\\':
        case '/':
          b.append(e);
          break;
        case 'b':
          b.append('\b');
          break;
        case 'f':
          b.append('\f');
          break;
        case 'n':
          b.append('\n');
          break;
        case 'r':
          b.append('\r');
          break;
        case 't':
          b.append('\t');
          break;
        case 'u':
          if (at + 4 > text.length()) {
            throw error("short \\u escape");
          }
          try {
            b.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
          } catch (NumberFormatException x) {
            throw error("bad \\u escape");
          }
          at += 4;
          break;
        default:
          throw error("bad escape \\" + e);
      }
    }
  }

  private Object number() {
    int start = at;
    if (text.charAt(at) == '-') {
      at++;
    }
    int digits = digits();
    if (digits == 0) {
      throw error("expected a digit");
    }
    if (digits > 1 && text.charAt(at - digits) == '0') {
      throw error("leading zero");
    }
    boolean integer = true;
    if (at < text.length() && text.charAt(at) == '.') {
      at++;
      integer = false;
      if (digits() == 0) {
        throw error("expected a digit after '.'");
      }
    }
    if (at < text.length() && (text.charAt(at) == 'e' || text.charAt(at) == 'E')) {
      at++;
      integer = false;
      if (at < text.length() && (text.charAt(at) == '+' || text.charAt(at) == '-')) {
        at++;
      }
      if (digits() == 0) {
        throw error("expected a digit in the exponent");
      }
    }
    String n = text.substring(start, at);
    if (n.length() > 400) {
      throw error("number too long");
    }
    return integer ? new BigInteger(n) : new BigDecimal(n);
  }

  private int digits() {
    int n = 0;
    while (at < text.length() && text.charAt(at) >= '0' && text.charAt(at) <= '9') {
      at++;
      n++;
    }
    return n;
  }

  /** {@code value} as a JSON string literal (quotes and escapes). */
  public static String quote(String value) {
    StringBuilder b = new StringBuilder(value.length() + 2).append('"');
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      switch (c) {
        case '"':
          b.append("\\\"");
          break;
        case '\\':
          b.append("\\\\");
          break;
        case '\n':
          b.append("\\n");
          break;
        case '\r':
          b.append("\\r");
          break;
        case '\t':
          b.append("\\t");
          break;
        default:
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    return b.append('"').toString();
  }

  /**
   * Write a value of the types {@link #parse} returns (and {@code Integer}, {@code Long}) as
   * compact JSON.
   *
   * @throws IllegalArgumentException for a type outside that set
   */
  public static String write(Object v) {
    StringBuilder b = new StringBuilder();
    write(b, v);
    return b.toString();
  }

  private static void write(StringBuilder b, Object v) {
    if (v == null) {
      b.append("null");
    } else if (v instanceof String s) {
      b.append(quote(s));
    } else if (v instanceof Boolean
        || v instanceof Integer
        || v instanceof Long
        || v instanceof BigInteger) {
      b.append(v);
    } else if (v instanceof BigDecimal d) {
      b.append(d.toString());
    } else if (v instanceof Map<?, ?> m) {
      b.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!first) {
          b.append(',');
        }
        first = false;
        b.append(quote(String.valueOf(e.getKey()))).append(':');
        write(b, e.getValue());
      }
      b.append('}');
    } else if (v instanceof List<?> l) {
      b.append('[');
      for (int i = 0; i < l.size(); i++) {
        if (i > 0) {
          b.append(',');
        }
        write(b, l.get(i));
      }
      b.append(']');
    } else {
      throw new IllegalArgumentException("cannot write " + v.getClass().getName() + " as JSON");
    }
  }

  /** An unmodifiable view, for values handed out. */
  static List<String> strings(List<String> l) {
    return Collections.unmodifiableList(new ArrayList<>(l));
  }
}

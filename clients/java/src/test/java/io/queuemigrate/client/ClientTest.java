package io.queuemigrate.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.math.BigInteger;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The client against the slice vectors (tests/fixtures/vectors), the stamp examples of
 * docs/routing.md, the Router's document rules and both followers; the same checks as
 * clients/node/test.js and clients/python/test_queue_migrate.py.
 */
class ClientTest {
  static final Path ROOT = Path.of(System.getProperty("qm.root", "../.."));

  static String doc(String migration, long generation, long migrated) {
    return "{\"migration\": \""
        + migration
        + "\", \"generation\": "
        + generation
        + ", \"state\": \"slices\", \"step\": 0, \"paused\": false, \"slices_total\": 128,"
        + " \"slices_migrated\": "
        + migrated
        + ", \"consume\": [\"old\", \"new\"], \"brokers\": {\"old\": \"rabbitmq\", \"new\":"
        + " \"nats\"}, \"updated_at\": \"2026-11-30T00:00:00Z\"}";
  }

  static RoutingDocument parsed(String migration, long generation, long migrated)
      throws RoutingException {
    return RoutingDocument.parse(doc(migration, generation, migrated));
  }

  @Test
  void sliceOfMatchesEveryVector() throws IOException {
    int n = 0;
    for (String line :
        Files.readAllLines(ROOT.resolve("tests/fixtures/vectors/slices.jsonl"))) {
      if (line.isBlank()) {
        continue;
      }
      Map<?, ?> v = (Map<?, ?>) Json.parse(line);
      String key = (String) v.get("key");
      long slices = ((BigInteger) v.get("slices")).longValueExact();
      long slice = ((BigInteger) v.get("slice")).longValueExact();
      assertEquals(slice, Slices.sliceOf(key, slices), key + " / " + slices);
      n++;
    }
    assertTrue(n > 1000, "only " + n + " vectors");
    assertEquals(0, Slices.sliceOf("order-0", 0), "0 slices count as 1");
  }

  /** The block after {@code <!-- marker -->} in docs/routing.md. */
  static String block(String marker) throws IOException {
    String docs = Files.readString(ROOT.resolve("docs/routing.md"));
    String after = docs.split("<!-- " + marker + " -->", 2)[1];
    String fenced = after.split("```", 3)[1];
    return fenced.substring(fenced.indexOf('\n') + 1);
  }

  static List<Map.Entry<String, String>> docHeaders() throws IOException {
    List<Map.Entry<String, String>> headers = new ArrayList<>();
    for (String line : block("stamp-headers").strip().split("\n")) {
      String[] kv = line.split(": ", 2);
      headers.add(Map.entry(kv[0], kv[1]));
    }
    return headers;
  }

  @Test
  void theStampExamplesOfTheDocsAreOneStamp() throws Exception {
    List<Map.Entry<String, String>> headers = docHeaders();
    RouteStamp stamp = RouteStamp.fromHeaders(headers);
    assertEquals(new RouteStamp("nats", "new", 8, 7, "checkout", 1764460800123L), stamp);
    Map<?, ?> payload = (Map<?, ?>) Json.parse(block("stamp-json"));
    assertEquals(stamp, RouteStamp.fromJson(payload.get("route")));
    assertEquals(Json.parse(Json.write(payload.get("route"))), Json.parse(stamp.toJson()));
    assertEquals(stamp, RouteStamp.fromJson(Json.parse(stamp.toJson())));
    assertEquals(headers, new ArrayList<>(stamp.headers().entrySet()));
    assertEquals(stamp, RouteStamp.fromHeaders(stamp.headers().entrySet()));
  }

  static void throwsWith(String text, Executable f) {
    Exception e = assertThrows(Exception.class, f::run, "expected an error with " + text);
    assertTrue(e.getMessage().contains(text), e.getMessage() + " lacks " + text);
  }

  interface Executable {
    void run() throws Exception;
  }

  @Test
  void stampHeadersAreReadByTheRulesOfTheDocs() throws Exception {
    List<Map.Entry<String, String>> headers = docHeaders();
    RouteStamp stamp = RouteStamp.fromHeaders(headers);
    List<Map.Entry<String, String>> upper = new ArrayList<>();
    for (Map.Entry<String, String> h : headers) {
      upper.add(Map.entry(h.getKey().toUpperCase(Locale.ROOT), h.getValue()));
    }
    upper.add(Map.entry("content-type", "x"));
    upper.add(Map.entry("x-qm-future", "1"));
    assertEquals(stamp, RouteStamp.fromHeaders(upper));
    List<Map.Entry<String, String>> without = new ArrayList<>(headers);
    without.removeIf(h -> h.getKey().equals("x-qm-slice"));
    throwsWith("x-qm-slice is missing", () -> RouteStamp.fromHeaders(without));
    List<Map.Entry<String, String>> twice = new ArrayList<>(headers);
    twice.add(Map.entry("X-QM-AT", "1"));
    throwsWith("x-qm-at appears more than once", () -> RouteStamp.fromHeaders(twice));
    String[][] bad = {
      {"x-qm-slice", "4294967296"}, {"x-qm-slice", "-1"}, {"x-qm-slice", "+8"},
      {"x-qm-generation", " 7"}, {"x-qm-at", "1e3"}, {"x-qm-at", "9223372036854775808"},
      {"x-qm-route", "OLD"}, {"x-qm-broker", ""}, {"x-qm-producer", "has space"}
    };
    for (String[] b : bad) {
      List<Map.Entry<String, String>> changed = new ArrayList<>();
      for (Map.Entry<String, String> h : headers) {
        changed.add(Map.entry(h.getKey(), h.getKey().equals(b[0]) ? b[1] : h.getValue()));
      }
      throwsWith(b[0] + " = ", () -> RouteStamp.fromHeaders(changed));
    }
    // The largest generation (2^64-1) round-trips through a long's bits.
    List<Map.Entry<String, String>> top = new ArrayList<>();
    for (Map.Entry<String, String> h : headers) {
      boolean g = h.getKey().equals("x-qm-generation");
      top.add(Map.entry(h.getKey(), g ? "18446744073709551615" : h.getValue()));
    }
    RouteStamp largest = RouteStamp.fromHeaders(top);
    assertEquals("18446744073709551615", largest.headers().get("x-qm-generation"));
    throwsWith("route.slice", () -> RouteStamp.fromJson(Json.parse("{\"broker\":\"b\","
        + "\"route\":\"old\",\"slice\":\"8\",\"generation\":1,\"producer\":\"p\",\"at\":1}")));
    throwsWith("route.at is missing", () -> RouteStamp.fromJson(Json.parse("{\"broker\":\"b\","
        + "\"route\":\"old\",\"slice\":8,\"generation\":1,\"producer\":\"p\"}")));
  }

  @Test
  void theRouterDefaultsSafelyAndOnlyGoesForward() throws Exception {
    Router router = new Router("orders", 128, "rabbitmq", "nats");
    assertEquals(new Route(Side.OLD, 8, 0), router.route("order-0"));
    assertEquals("rabbitmq", router.stamp(router.route("order-0"), "checkout", 1).broker());
    assertEquals(List.of(Side.OLD), router.consume());
    assertEquals(Router.Offer.ACCEPTED, router.offer(parsed("orders", 7, 9)));
    assertEquals(new Route(Side.NEW, 8, 7), router.route("order-0"));
    assertEquals("nats", router.stamp(router.route("order-0"), "checkout", 1).broker());
    assertEquals(Router.Offer.NOT_NEWER, router.offer(parsed("orders", 6, 0)));
    assertEquals(Router.Offer.NOT_NEWER, router.offer(parsed("orders", 7, 0)));
    throwsWith("slices_migrated", () -> parsed("orders", 9, 129));
    throwsWith("consume", () -> RoutingDocument.parse(
        doc("orders", 9, 0).replace("[\"old\", \"new\"]", "[]")));
    throwsWith("generation", () -> parsed("orders", -1, 0));
    throwsWith("not JSON", () -> RoutingDocument.parse("{ not json"));
    assertEquals(7, router.generation());
    throwsWith("x-qm-broker is unknown",
        () -> new Router("orders", 128).stamp(new Router("orders", 128).route("k"), "p", 0));
    assertThrows(IllegalArgumentException.class, () -> new Router("", 128));
  }

  /** Issue 56: a router of `orders` given the `payments` document took it and stamped `nats`. */
  @Test
  void aRouterRefusesAnotherMigrationsDocumentEvenBeforeItsFirst() throws Exception {
    Router router = new Router("orders", 128, "rabbitmq", "nats");
    OtherMigrationException e =
        assertThrows(OtherMigrationException.class, () -> router.offer(parsed("payments", 3, 128)));
    assertEquals("payments", e.got());
    assertEquals("orders", e.expected());
    assertTrue(e.getMessage().contains("\"payments\""), e.getMessage());
    assertEquals(new Route(Side.OLD, 8, 0), router.route("order-0"));
    assertEquals("rabbitmq", router.stamp(router.route("order-0"), "checkout", 1).broker());
  }

  @Test
  void theFileFollowerTakesNewerDocumentsAndKeepsTheLastGoodOne(@TempDir Path dir)
      throws Exception {
    Path file = dir.resolve("orders.routing.json");
    write(file, doc("orders", 3, 0));
    Router followed = new Router("orders", 128);
    try (Follower f = followed.followFile(file, Duration.ofMillis(20))) {
      assertEquals(3, followed.generation());
      write(file, "{ not json");
      waitFor(() -> f.status().lastError() != null);
      assertEquals(3, followed.generation());
      write(file, doc("orders", 4, 128));
      assertTrue(followed.awaitGeneration(4, Duration.ofSeconds(5)));
      assertEquals(Side.NEW, followed.route("order-0").target());
      waitFor(() -> f.status().lastError() == null);
      // Rewritten for another migration later: refused, said in the status, routes unchanged.
      write(file, doc("payments", 9, 0));
      waitFor(() -> f.status().lastError() != null);
      assertTrue(f.status().lastError().contains("payments"), f.status().lastError());
      assertEquals(4, followed.generation());
      assertEquals(Side.NEW, followed.route("order-0").target());
    }
  }

  /** Issue 56: `follow_file` of another migration's file accepted it with only a warning. */
  @Test
  void followingAnotherMigrationsFileIsAnErrorTheCallerSees(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("payments.routing.json");
    write(file, doc("payments", 3, 128));
    Router router = new Router("orders", 16, "rabbitmq", "nats");
    OtherMigrationException e =
        assertThrows(
            OtherMigrationException.class, () -> router.followFile(file, Duration.ofMillis(20)));
    assertEquals("payments", e.got());
    assertEquals(0, router.generation());
    assertEquals(Side.OLD, router.route("order-0").target());
  }

  /**
   * The long-poll against a stand-in of the daemon's endpoint (the real daemon is followed in
   * tests/integration/library/clients.rs): the path, If-None-Match after the first document, and
   * another migration's document refused in the status.
   */
  @Test
  void theHttpFollowerLongPollsWithTheGenerationAndRefusesAnotherMigration() throws Exception {
    List<String> seen = new CopyOnWriteArrayList<>();
    String[] serving = {doc("orders", 5, 0)};
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext(
        "/",
        exchange -> {
          String tag = exchange.getRequestHeaders().getFirst("If-None-Match");
          seen.add(exchange.getRequestURI() + " " + tag);
          byte[] body = serving[0].getBytes(StandardCharsets.UTF_8);
          exchange.sendResponseHeaders(200, body.length);
          exchange.getResponseBody().write(body);
          exchange.close();
        });
    server.start();
    try {
      String base = "http://127.0.0.1:" + server.getAddress().getPort() + "/";
      Router router = new Router("orders", 128, "rabbitmq", "nats", "java \"test\"\n1");
      assertTrue(
          router
              .metricsText()
              .contains(
                  "queue_migrate_routing_applied_generation{migration=\"orders\","
                      + "producer=\"java \\\"test\\\"\\n1\"} 0\n"),
          router.metricsText());
      assertTrue(new Router("orders", 128).producer().matches(".*-\\d+-\\d+"));
      Router.HttpOptions options =
          new Router.HttpOptions(
              null,
              Duration.ofSeconds(1),
              Duration.ofSeconds(5),
              Duration.ofMillis(20),
              Duration.ofMillis(40));
      try (Follower f = router.followHttp(base, options)) {
        assertTrue(router.awaitGeneration(5, Duration.ofSeconds(5)));
        waitFor(() -> seen.size() >= 2);
        // Issue 58: the producer's id and the generation it applied, on every poll.
        String asked = "/v1/migrations/orders/routing?wait=1s&producer=java%20%22test%22%0A1";
        assertEquals(asked + "&applied=0 null", seen.get(0));
        assertEquals(asked + "&applied=5 \"5\"", seen.get(1));
        assertTrue(router.metricsText().contains("\"} 5\n"), router.metricsText());
        serving[0] = doc("payments", 9, 128);
        waitFor(() -> f.status().lastError() != null);
        assertTrue(f.status().lastError().contains("\"payments\""), f.status().lastError());
        assertEquals(5, router.generation());
        assertEquals(Side.OLD, router.route("order-0").target());
      }
    } finally {
      server.stop(0);
    }
  }

  @Test
  void theJsonReaderKeepsTextAndNumbersExact() {
    Object v = Json.parse(" {\"k\": [\"\\u00e9\\n\", -0, 1.5e3, true, null, 18446744073709551615]} ");
    List<?> l = (List<?>) ((Map<?, ?>) v).get("k");
    assertEquals("\u00e9\n", l.get(0));
    assertEquals(new BigInteger("18446744073709551615"), l.get(5));
    assertNull(l.get(4));
    assertNotNull(l.get(2));
    assertEquals("{\"k\":[\"\\u00e9\\n\"]}".replace("\\u00e9", "\u00e9"),
        Json.write(Map.of("k", List.of("\u00e9\n"))));
    for (String bad : new String[] {"", "{", "[1,]", "01", "\"a", "{\"a\" 1}", "1 2", "nul"}) {
      assertThrows(Json.JsonException.class, () -> Json.parse(bad), bad);
    }
    assertThrows(Json.JsonException.class, () -> Json.parse("[".repeat(100)));
  }

  /** Write like the controller does: a temporary file, then a rename. */
  static void write(Path file, String text) throws IOException {
    Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
    Files.writeString(tmp, text);
    Files.move(tmp, file, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
  }

  static void waitFor(java.util.function.BooleanSupplier done) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (!done.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, "timed out");
      Thread.sleep(10);
    }
  }
}

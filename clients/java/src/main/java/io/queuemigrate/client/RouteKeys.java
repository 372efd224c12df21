package io.queuemigrate.client;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code java -cp queue-migrate-client.jar io.queuemigrate.client.RouteKeys DAEMON_URL MIGRATION
 * SLICES OLD_NAME NEW_NAME}: follows the daemon's routing document; for each stdin line
 * {@code {"keys": [...], "generation": G}} waits (up to 10 s) until a document of generation at
 * least G arrived, then prints one line {@code {"generation": g, "routes": [[target, slice,
 * broker], ...]}}. What tests/integration/library/clients.rs compares with the Rust Router and the
 * Node.js and Python modules.
 */
public final class RouteKeys {
  private RouteKeys() {}

  /** The program. */
  public static void main(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println("usage: RouteKeys DAEMON_URL MIGRATION SLICES OLD_NAME NEW_NAME");
      System.exit(2);
    }
    Router router =
        new Router(args[1], Long.parseLong(args[2]), args[3], args[4], "java-producer");
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    Follower follower =
        router.followHttp(
            args[0], Router.HttpOptions.defaults().withLongPoll(Duration.ofSeconds(5)));
    try {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        if (line.isBlank()) {
          continue;
        }
        Map<?, ?> ask = (Map<?, ?>) Json.parse(line);
        long generation = ((BigInteger) ask.get("generation")).longValueExact();
        router.awaitGeneration(generation, Duration.ofSeconds(10));
        List<Object> routes = new ArrayList<>();
        for (Object key : (List<?>) ask.get("keys")) {
          Route r = router.route((String) key);
          String broker = router.stamp(r, "java-producer", System.currentTimeMillis()).broker();
          routes.add(List.of(r.target().wire(), r.slice(), broker));
        }
        Map<String, Object> answer = new LinkedHashMap<>();
        answer.put("generation", router.generation());
        answer.put("routes", routes);
        out.println(Json.write(answer));
      }
    } finally {
      follower.close();
    }
  }
}

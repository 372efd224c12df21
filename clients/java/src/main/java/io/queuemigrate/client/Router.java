package io.queuemigrate.client;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The latest routing document of one migration and {@code route(key)} over it (thread-safe), with
 * followers that keep it current from the daemon (HTTP long-poll with ETag) or a file: the rules
 * of the Rust crate's {@code Router} (docs/routing.md, section 3).
 *
 * <p>Guarantees:
 *
 * <ul>
 *   <li>{@link #route} never waits: it reads one reference to a whole document, so a route never
 *       mixes two documents.
 *   <li>Until a first document: every key to old, generation 0, slices over the count given, and
 *       stamps naming the brokers given (the plan's names: one label from the first message on).
 *   <li>A document replaces the current one only if it is coherent, names this router's
 *       migration, and has a higher generation. Another migration's document is refused with a
 *       {@link RoutingException} ({@link #offer}) or in the follower's {@link Follower#status()};
 *       it never changes a route.
 * </ul>
 */
public final class Router {
  /** The largest routing document read (the real one is a few hundred bytes). */
  public static final int MAX_DOCUMENT_BYTES = 64 * 1024;

  /** The metric a router exposes: the generation it applied, by migration and producer. */
  public static final String APPLIED_METRIC = "queue_migrate_routing_applied_generation";

  private static final AtomicLong ROUTERS = new AtomicLong();

  /** What {@link #offer} did with a document. */
  public enum Offer {
    /** The document is now current. */
    ACCEPTED,
    /** The document is not newer than the current one, which stays. */
    NOT_NEWER
  }

  private final String migration;
  private final long slices;
  private final String oldBroker;
  private final String newBroker;
  private final String producer;
  private volatile RoutingDocument doc;
  private final Object lock = new Object();

  /**
   * A router of {@code migration} whose safe default routes over {@code slices} (the plan's
   * {@code slices}) and stamps the plan's broker names ({@code brokers.old.name},
   * {@code brokers.new.name}).
   *
   * @throws IllegalArgumentException if the migration's name is empty
   */
  public Router(String migration, long slices, String oldBroker, String newBroker) {
    this(migration, slices, oldBroker, newBroker, null);
  }

  /**
   * As {@link #Router(String, long, String, String)}, reporting {@code producer} as its id on
   * every long-poll (with the generation it applied, so that the daemon learns who follows) and
   * in {@link #metricsText()}; null: {@code HOSTNAME-PID-N}.
   *
   * @throws IllegalArgumentException if the migration's name is empty
   */
  public Router(
      String migration, long slices, String oldBroker, String newBroker, String producer) {
    this.migration = Objects.requireNonNull(migration, "migration");
    if (migration.isEmpty()) {
      throw new IllegalArgumentException("the migration's name is empty");
    }
    this.slices = Math.max(slices, 1L);
    this.oldBroker = oldBroker;
    this.newBroker = newBroker;
    long n = ROUTERS.incrementAndGet();
    if (producer != null) {
      this.producer = producer;
    } else {
      String host = System.getenv("HOSTNAME");
      host = host == null || host.isBlank() ? "producer" : host.strip();
      this.producer = host + "-" + ProcessHandle.current().pid() + "-" + n;
    }
  }

  /** The id this router reports on the routing long-poll and in {@link #metricsText()}. */
  public String producer() {
    return producer;
  }

  /**
   * Prometheus text: {@code queue_migrate_routing_applied_generation{migration, producer}}, the
   * generation this router applied (0 before the first document). Serve it on your /metrics.
   */
  public String metricsText() {
    return "# HELP "
        + APPLIED_METRIC
        + " The routing document's generation this producer applied (0: none yet, every key to"
        + " old).\n# TYPE "
        + APPLIED_METRIC
        + " gauge\n"
        + APPLIED_METRIC
        + "{migration=\""
        + labelValue(migration)
        + "\",producer=\""
        + labelValue(producer)
        + "\"} "
        + generation()
        + "\n";
  }

  /** A Prometheus label value, escaped (backslash, double quote, line feed). */
  static String labelValue(String v) {
    return v.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
  }

  /**
   * A router of {@code migration} without broker names: {@link #stamp} fails until the first
   * document names them.
   */
  public Router(String migration, long slices) {
    this(migration, slices, null, null);
  }

  /** The migration this router follows. */
  public String migration() {
    return migration;
  }

  /** Where a message of aggregate {@code key} goes now. Never waits, never fails. */
  public Route route(String key) {
    RoutingDocument d = doc; // one read of one reference: a whole document
    if (d == null) {
      return new Route(Side.OLD, Slices.sliceOf(key, slices), 0);
    }
    return d.route(key);
  }

  /** The current document, or null before the first. */
  public RoutingDocument document() {
    return doc;
  }

  /** The current generation (0 before any document). */
  public long generation() {
    RoutingDocument d = doc;
    return d == null ? 0 : d.generation();
  }

  /** The sides consumers read now (old only before any document). */
  public List<Side> consume() {
    RoutingDocument d = doc;
    return d == null ? List.of(Side.OLD) : d.consume();
  }

  /** The broker's name on {@code side}: the document's, else the names given; null if neither. */
  public String brokerName(Side side) {
    RoutingDocument d = doc;
    if (d != null) {
      return d.brokerName(side);
    }
    return side == Side.OLD ? oldBroker : newBroker;
  }

  /**
   * Offer a document: it becomes current if it is coherent (checked when it was read), names
   * this router's migration, and is newer than the current one.
   *
   * @throws OtherMigrationException if it is for another migration; the current document stays
   */
  public Offer offer(RoutingDocument candidate) throws OtherMigrationException {
    if (!migration.equals(candidate.migration())) {
      throw new OtherMigrationException(migration, candidate.migration());
    }
    synchronized (lock) {
      if (doc != null && candidate.generation() <= doc.generation()) {
        return Offer.NOT_NEWER;
      }
      doc = candidate;
      lock.notifyAll();
      return Offer.ACCEPTED;
    }
  }

  /**
   * Wait until a document of at least {@code generation} is current, or {@code timeout} passes.
   *
   * @return whether it is
   */
  public boolean awaitGeneration(long generation, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    synchronized (lock) {
      while (generation() < generation) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        lock.wait(Math.max(1, left / 1_000_000));
      }
      return true;
    }
  }

  /**
   * The route stamp of a message routed by {@code route}, published by {@code producer} at
   * {@code atMs}, naming the broker as {@link #brokerName} does.
   *
   * @throws StampException when no broker name is known yet, or a name is outside the wire format
   */
  public RouteStamp stamp(Route route, String producer, long atMs) throws StampException {
    String broker = brokerName(route.target());
    if (broker == null) {
      throw new StampException(
          "route stamp: x-qm-broker is unknown: give the plan's broker names to new Router(..)");
    }
    return RouteStamp.of(route, broker, producer, atMs);
  }

  /**
   * Options of {@link #followHttp(String, HttpOptions)}.
   *
   * @param token sent as {@code Authorization: Bearer <token>} if not null
   * @param longPoll how long the daemon may hold a request ({@code ?wait=}), default 30 s
   * @param requestMargin added to {@code longPoll} for the request's own timeout, default 15 s
   * @param minBackoff the first delay after a failure, and the least time between two requests
   *     that brought nothing new; default 1 s
   * @param maxBackoff the largest delay after repeated failures, default 30 s
   */
  public record HttpOptions(
      String token,
      Duration longPoll,
      Duration requestMargin,
      Duration minBackoff,
      Duration maxBackoff) {
    /** No token, wait 30 s, 15 s margin, back-off 1 s doubling to 30 s. */
    public static HttpOptions defaults() {
      return new HttpOptions(
          null,
          Duration.ofSeconds(30),
          Duration.ofSeconds(15),
          Duration.ofSeconds(1),
          Duration.ofSeconds(30));
    }

    /** These options with {@code Authorization: Bearer <token>}. */
    public HttpOptions withToken(String t) {
      return new HttpOptions(t, longPoll, requestMargin, minBackoff, maxBackoff);
    }

    /** These options with the daemon holding a request up to {@code w}. */
    public HttpOptions withLongPoll(Duration w) {
      return new HttpOptions(token, w, requestMargin, minBackoff, maxBackoff);
    }
  }

  /** {@link #followHttp(String, HttpOptions)} with the default timings. */
  public Follower followHttp(String baseUrl) {
    return followHttp(baseUrl, HttpOptions.defaults());
  }

  /**
   * Follow the daemon: long-poll {@code GET
   * {base}/v1/migrations/{migration}/routing?wait=30s&producer=ID&applied=GENERATION} (the daemon
   * learns who follows and which generation each applied) with {@code If-None-Match:
   * "<generation>"} once a document is current. A 200 brings a
   * document (accepted if newer), a 304 means no change; a failure (no answer, another status, a
   * refused document) keeps the last good document and retries after 1 s, doubling up to 30 s.
   * Never more than one request a second that brings nothing new. Redirects are not followed.
   *
   * @throws IllegalArgumentException if {@code baseUrl} is not an http:// or https:// URL
   */
  public Follower followHttp(String baseUrl, HttpOptions options) {
    URI uri = routingUri(baseUrl, migration, options.longPoll());
    String asProducer =
        uri + "&producer=" + URLEncoder.encode(producer, StandardCharsets.UTF_8).replace("+", "%20");
    HttpClient client =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10))
            .followRedirects(HttpClient.Redirect.NEVER)
            .build();
    Follower follower = new Follower();
    AtomicReference<CompletableFuture<?>> open = new AtomicReference<>();
    Runnable loop =
        () -> {
          long backoff = options.minBackoff().toMillis();
          while (!follower.stopped()) {
            long started = System.nanoTime();
            boolean brought = false;
            try {
              RoutingDocument current = doc;
              long applied = current == null ? 0 : current.generation();
              HttpRequest.Builder request =
                  HttpRequest.newBuilder(URI.create(asProducer + "&applied=" + applied))
                      .timeout(options.longPoll().plus(options.requestMargin()))
                      .header("Accept", "application/json")
                      .GET();
              if (current != null) {
                request.header("If-None-Match", "\"" + current.generation() + "\"");
              }
              if (options.token() != null) {
                request.header("Authorization", "Bearer " + options.token());
              }
              CompletableFuture<HttpResponse<InputStream>> call =
                  client.sendAsync(request.build(), HttpResponse.BodyHandlers.ofInputStream());
              open.set(call);
              HttpResponse<InputStream> response = call.get();
              try (InputStream body = response.body()) {
                if (response.statusCode() == 200) {
                  String text = readBounded(body, uri.toString());
                  brought = offer(RoutingDocument.parse(text)) == Offer.ACCEPTED;
                } else if (response.statusCode() != 304) {
                  throw new IOException(
                      "GET " + uri + ": unexpected status " + response.statusCode());
                }
              }
              follower.ok(brought);
              backoff = options.minBackoff().toMillis();
              if (!brought) {
                long elapsed = (System.nanoTime() - started) / 1_000_000;
                follower.pause(options.minBackoff().toMillis() - elapsed);
              }
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              return;
            } catch (Exception e) {
              if (follower.stopped()) {
                return;
              }
              follower.failed(unwrap(e, uri));
              if (!follower.pause(backoff)) {
                return;
              }
              backoff = Math.min(backoff * 2, options.maxBackoff().toMillis());
            }
          }
        };
    follower.start(
        new Thread(loop, "qm-follow-http-" + migration),
        () -> {
          CompletableFuture<?> c = open.get();
          if (c != null) {
            c.cancel(true);
          }
        });
    return follower;
  }

  /**
   * Follow a routing file (the daemon's mirror, the plan's {@code routing.file}): read it now
   * and whenever its modification time, size or inode changes, every {@code interval}. A
   * missing, unreadable, malformed or refused file is reported in {@link Follower#status()} and
   * the last good document is kept.
   *
   * @throws OtherMigrationException if the file names another migration now: the caller pointed the
   *     router at the wrong file (a file missing or malformed at start is only reported)
   */
  public Follower followFile(Path path, Duration interval) throws OtherMigrationException {
    Follower follower = new Follower();
    Object[] seen = new Object[1];
    OtherMigrationException[] foreign = new OtherMigrationException[1];
    Runnable check =
        () -> {
          try {
            BasicFileAttributes a = Files.readAttributes(path, BasicFileAttributes.class);
            String id = a.lastModifiedTime() + ":" + a.size() + ":" + a.fileKey();
            if (id.equals(seen[0])) {
              return;
            }
            seen[0] = id;
            if (a.size() > MAX_DOCUMENT_BYTES) {
              throw new IOException(path + " is larger than " + MAX_DOCUMENT_BYTES + " bytes");
            }
            String text;
            try (InputStream in = Files.newInputStream(path)) {
              text = readBounded(in, path.toString());
            }
            follower.ok(offer(RoutingDocument.parse(text)) == Offer.ACCEPTED);
          } catch (OtherMigrationException e) {
            foreign[0] = e;
            follower.failed(e);
          } catch (Exception e) {
            if (!Files.exists(path)) {
              seen[0] = null; // read again as soon as it comes back, whatever its signature
            }
            follower.failed(e);
          }
        };
    check.run();
    if (foreign[0] != null) {
      throw foreign[0];
    }
    long every = Math.max(10, interval.toMillis());
    follower.start(
        new Thread(
            () -> {
              while (follower.pause(every)) {
                check.run();
              }
            },
            "qm-follow-file-" + migration),
        () -> {});
    return follower;
  }

  private static String readBounded(InputStream in, String source) throws IOException {
    byte[] bytes = in.readNBytes(MAX_DOCUMENT_BYTES + 1);
    if (bytes.length > MAX_DOCUMENT_BYTES) {
      throw new IOException(source + ": document larger than " + MAX_DOCUMENT_BYTES + " bytes");
    }
    return new String(bytes, StandardCharsets.UTF_8);
  }

  private static Exception unwrap(Exception e, URI uri) {
    Throwable cause = e.getCause();
    if (e instanceof java.util.concurrent.ExecutionException && cause instanceof Exception c) {
      return new IOException("GET " + uri + ": " + c, c);
    }
    return e;
  }

  /** {@code {base}/v1/migrations/{migration}/routing?wait=<secs>s}, the name percent-encoded. */
  static URI routingUri(String baseUrl, String migration, Duration wait) {
    URI base = URI.create(baseUrl);
    if (!"http".equals(base.getScheme()) && !"https".equals(base.getScheme())) {
      throw new IllegalArgumentException(
          "expected an http:// or https:// daemon URL, not " + Json.quote(baseUrl));
    }
    String trimmed = baseUrl.replaceAll("/+$", "");
    String name = URLEncoder.encode(migration, StandardCharsets.UTF_8).replace("+", "%20");
    long seconds = Math.max(1, wait.toSeconds());
    return URI.create(trimmed + "/v1/migrations/" + name + "/routing?wait=" + seconds + "s");
  }
}

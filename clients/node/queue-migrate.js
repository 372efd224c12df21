'use strict';
// queue-migrate for Node.js producers (Node 18+, standard library only): the slice function, a
// Router that follows the routing document (the daemon's long-poll with ETag, or a file), and the
// route stamp's header and JSON forms. The same rules as the Rust crate (docs/routing.md):
//
//   const qm = require('./queue-migrate');
//   const router = new qm.Router({ migration: 'orders', slices: 128, brokers: { old: 'rabbitmq', new: 'nats' } });
//   const follower = router.followHttp('http://127.0.0.1:8480');
//   const route = router.route(order.id);             // { target: 'old'|'new', slice, generation }
//   const stamp = router.stamp(route, 'checkout', Date.now());
//   metricsText += router.metricsText();              // queue_migrate_routing_applied_generation
//   publish(route.target, qm.stampHeaders(stamp), body);
//   follower.stop();

const { createHash } = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');

/** sliceOf(key, slices): the first four bytes of SHA-256 over the key's UTF-8, big-endian, modulo slices (0 counts as 1). */
function sliceOf(key, slices) {
  const digest = createHash('sha256').update(key, 'utf8').digest();
  return digest.readUInt32BE(0) % Math.max(slices, 1);
}

/** The route of `key` under a routing document: new when its slice is below slices_migrated. */
function routeOf(doc, key) {
  const slice = sliceOf(key, doc.slices_total);
  return { target: slice < doc.slices_migrated ? 'new' : 'old', slice, generation: doc.generation };
}

/** Why a document is refused, or null if it is coherent (the Router's rule). */
function incoherent(doc) {
  if (doc === null || typeof doc !== 'object') return 'not an object';
  if (typeof doc.migration !== 'string') return 'migration is not a string';
  if (!Number.isSafeInteger(doc.generation) || doc.generation < 0) return 'generation is not a non-negative integer';
  if (!Number.isInteger(doc.slices_total) || doc.slices_total < 1 || doc.slices_total > 0xffffffff) return 'slices_total must be 1 to 2^32-1';
  if (!Number.isInteger(doc.slices_migrated) || doc.slices_migrated < 0 || doc.slices_migrated > doc.slices_total) return 'slices_migrated must be 0 to slices_total';
  if (!Array.isArray(doc.consume) || doc.consume.length === 0 || !doc.consume.every((s) => s === 'old' || s === 'new')) return 'consume must list old and/or new';
  if (!doc.brokers || typeof doc.brokers.old !== 'string' || typeof doc.brokers.new !== 'string') return 'brokers must name old and new';
  return null;
}

const MAX_DOCUMENT_BYTES = 64 * 1024;
/** The metric a router exposes: the generation it applied, by migration and producer. */
const APPLIED_METRIC = 'queue_migrate_routing_applied_generation';
let routers = 0;

/** A Prometheus label value, escaped (backslash, double quote, line feed). */
function labelValue(v) {
  return String(v).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** A response body as text, refused (and the connection dropped) beyond `max` bytes. */
async function readBounded(response, max) {
  const reader = response.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel();
      throw new Error(`document larger than ${max} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A routing document for another migration than the router's (err.expected, err.got). */
class OtherMigrationError extends Error {
  constructor(expected, got) {
    super(`routing document is for migration ${JSON.stringify(got)}, but this router follows ${JSON.stringify(expected)}`);
    this.name = 'OtherMigrationError';
    this.expected = expected;
    this.got = got;
  }
}

/** The migration a routing file names now, or null if it cannot be read as JSON. */
function fileMigration(path) {
  try {
    if (fs.statSync(path).size > MAX_DOCUMENT_BYTES) return null;
    const doc = JSON.parse(fs.readFileSync(path, 'utf8'));
    return doc && typeof doc.migration === 'string' ? doc.migration : null;
  } catch (e) {
    return null;
  }
}

/**
 * The latest routing document of one migration and route(key) over it. Until a first document:
 * every key to old, generation 0, slices over `slices`, broker names from `brokers` (the plan's
 * names: one label from the first message on). A document replaces the current one only if
 * coherent, for the router's migration and of a higher generation; another migration's document
 * throws an OtherMigrationError (offer, followFile at start) or is the follower's lastError.
 * A Router without `migration` is deprecated: it takes the first document's migration.
 * `producer` is the id it reports on every long-poll (with the generation it applied, so that the
 * daemon learns who follows) and in metricsText(); default HOSTNAME-PID-N.
 */
class Router {
  constructor({ migration = null, slices = 128, brokers = null, producer = null } = {}) {
    if (migration === null || migration === undefined) {
      process.emitWarning('new Router() without { migration } takes another migration\'s document: give the migration\'s name', 'DeprecationWarning', 'QM_ROUTER_NO_MIGRATION');
      migration = null;
    } else if (typeof migration !== 'string' || migration === '') {
      throw new TypeError('migration must be a non-empty string');
    }
    this.slices = Math.max(slices, 1);
    this.brokers = brokers;
    this.migration = migration;
    this.doc = null;
    this.listeners = [];
    routers += 1;
    this.producer = producer === null || producer === undefined ? `${os.hostname()}-${process.pid}-${routers}` : String(producer);
  }

  /**
   * Prometheus text: queue_migrate_routing_applied_generation{migration, producer}, the
   * generation this router applied (0 before the first document). Serve it on your /metrics.
   */
  metricsText() {
    let out = `# HELP ${APPLIED_METRIC} The routing document's generation this producer applied (0: none yet, every key to old).\n# TYPE ${APPLIED_METRIC} gauge\n`;
    if (this.migration !== null) {
      out += `${APPLIED_METRIC}{migration="${labelValue(this.migration)}",producer="${labelValue(this.producer)}"} ${this.generation}\n`;
    }
    return out;
  }

  route(key) {
    if (this.doc === null) return { target: 'old', slice: sliceOf(key, this.slices), generation: 0 };
    return routeOf(this.doc, key);
  }

  get generation() {
    return this.doc === null ? 0 : this.doc.generation;
  }

  /** The sides consumers read now (old only before any document). */
  consume() {
    return this.doc === null ? ['old'] : this.doc.consume.slice();
  }

  /** The broker's name on `side`: the document's, else the names given; null if neither. */
  brokerName(side) {
    const names = this.doc === null ? this.brokers : this.doc.brokers;
    return names ? names[side] : null;
  }

  /** 'accepted', 'not newer', or throws with why the document is refused. */
  offer(doc) {
    const why = incoherent(doc);
    if (why) throw new Error(`routing document refused: ${why}`);
    const expected = this.doc ? this.doc.migration : this.migration;
    if (expected !== null && doc.migration !== expected) throw new OtherMigrationError(expected, doc.migration);
    if (this.doc !== null && doc.generation <= this.doc.generation) return 'not newer';
    this.doc = doc;
    for (const f of this.listeners) f(doc.generation);
    return 'accepted';
  }

  /** Call f(generation) after each accepted document. */
  onChange(f) {
    this.listeners.push(f);
  }

  /** The route stamp of a message routed by `route`, published by `producer` at `atMs`. */
  stamp(route, producer, atMs) {
    const broker = this.brokerName(route.target);
    if (broker === null || broker === undefined) {
      throw new Error('route stamp: x-qm-broker is unknown: give the plan\'s broker names to new Router({brokers})');
    }
    return newStamp(route, broker, producer, atMs);
  }

  /**
   * Follow the daemon: long-poll GET {base}/v1/migrations/{migration}/routing?wait=30s
   * &producer=ID&applied=GENERATION with If-None-Match: "<generation>" (the daemon learns who
   * follows and which generation each applied). A failure keeps the last good document and retries after 1 s,
   * doubling up to 30 s; never more than one request a second that brings nothing new.
   * `migration` defaults to the router's (another name throws an OtherMigrationError).
   * Returns { stop(), status() }.
   */
  followHttp(baseUrl, migration = this.migration, { token = null, waitSeconds = 30, minBackoffMs = 1000, maxBackoffMs = 30000 } = {}) {
    if (typeof migration === 'object' && migration !== null) return this.followHttp(baseUrl, this.migration, migration);
    if (typeof migration !== 'string' || migration === '') throw new TypeError('followHttp needs the migration\'s name');
    if (this.migration !== null && migration !== this.migration) throw new OtherMigrationError(this.migration, migration);
    if (this.migration === null) this.migration = migration;
    const url = `${baseUrl.replace(/\/+$/, '')}/v1/migrations/${encodeURIComponent(migration)}/routing?wait=${waitSeconds}s&producer=${encodeURIComponent(this.producer)}`;
    const status = { accepted: 0, consecutiveFailures: 0, lastError: null };
    let stopped = false;
    let controller = null;
    const sleep = (ms) => new Promise((resolve) => { const t = setTimeout(resolve, ms); t.unref?.(); });
    const loop = async () => {
      let backoff = minBackoffMs;
      while (!stopped) {
        const started = Date.now();
        let brought = false;
        try {
          const headers = {};
          if (this.doc !== null) headers['If-None-Match'] = `"${this.doc.generation}"`;
          if (token) headers.Authorization = `Bearer ${token}`;
          controller = new AbortController();
          const timer = setTimeout(() => controller.abort(), (waitSeconds + 15) * 1000);
          let response;
          try {
            response = await fetch(`${url}&applied=${this.generation}`, { headers, signal: controller.signal });
            if (response.status === 200) {
              const text = await readBounded(response, MAX_DOCUMENT_BYTES);
              if (this.offer(JSON.parse(text)) === 'accepted') { status.accepted += 1; brought = true; }
            } else if (response.status !== 304) {
              await response.body?.cancel();
              throw new Error(`${url} answered ${response.status}`);
            }
          } finally {
            clearTimeout(timer);
          }
          status.consecutiveFailures = 0;
          status.lastError = null;
          backoff = minBackoffMs;
          if (!brought) {
            const left = minBackoffMs - (Date.now() - started);
            if (left > 0) await sleep(left);
          }
        } catch (e) {
          if (stopped) return;
          status.consecutiveFailures += 1;
          status.lastError = String(e && e.message ? e.message : e);
          await sleep(backoff);
          backoff = Math.min(backoff * 2, maxBackoffMs);
        }
      }
    };
    loop();
    return {
      stop() { stopped = true; if (controller) controller.abort(); },
      status() { return { ...status }; },
    };
  }

  /**
   * Follow a routing file: read it now and whenever its mtime, size or inode changes. Throws an
   * OtherMigrationError if the file names another migration than the router's now (the wrong
   * file); later refusals, like a missing or malformed file, are the follower's lastError.
   */
  followFile(path, intervalMs = 1000) {
    const named = fileMigration(path);
    if (this.migration !== null && named !== null && named !== this.migration) throw new OtherMigrationError(this.migration, named);
    const status = { accepted: 0, consecutiveFailures: 0, lastError: null };
    let seen = null;
    const check = () => {
      try {
        const st = fs.statSync(path);
        const id = `${st.mtimeMs}:${st.size}:${st.ino}`;
        if (id === seen) return;
        if (st.size > MAX_DOCUMENT_BYTES) throw new Error(`${path} is larger than ${MAX_DOCUMENT_BYTES} bytes`);
        const doc = JSON.parse(fs.readFileSync(path, 'utf8'));
        seen = id;
        if (this.offer(doc) === 'accepted') status.accepted += 1;
        status.consecutiveFailures = 0;
        status.lastError = null;
      } catch (e) {
        status.consecutiveFailures += 1;
        status.lastError = String(e && e.message ? e.message : e);
      }
    };
    check();
    const timer = setInterval(check, intervalMs);
    timer.unref?.();
    return { stop() { clearInterval(timer); }, status() { return { ...status }; } };
  }
}

// --- The route stamp -------------------------------------------------------------------------

const HEADERS = ['x-qm-broker', 'x-qm-route', 'x-qm-slice', 'x-qm-generation', 'x-qm-producer', 'x-qm-at'];
const ROUTES = ['old', 'new', 'bridge', 'replay'];
const NAME = /^[A-Za-z0-9._\-:@/+]{1,128}$/;
const DIGITS = /^[0-9]{1,20}$/;

function invalid(field, value, expected) {
  return new Error(`route stamp: ${field} = ${JSON.stringify(String(value).slice(0, 64))} is invalid: expected ${expected}`);
}

function checkName(field, value) {
  if (typeof value !== 'string' || !NAME.test(value)) throw invalid(field, value, '1 to 128 characters of A-Z a-z 0-9 . _ - : @ / +');
  return value;
}

/** A stamp { broker, route, slice, generation, producer, at } for a message routed by `route`. */
function newStamp(route, broker, producer, atMs) {
  return {
    broker: checkName('x-qm-broker', broker),
    route: route.target,
    slice: route.slice,
    generation: route.generation,
    producer: checkName('x-qm-producer', producer),
    at: Math.max(0, Math.trunc(atMs)),
  };
}

/** The six headers, lowercase names, decimal values. */
function stampHeaders(stamp) {
  return {
    'x-qm-broker': stamp.broker,
    'x-qm-route': stamp.route,
    'x-qm-slice': String(stamp.slice),
    'x-qm-generation': String(stamp.generation),
    'x-qm-producer': stamp.producer,
    'x-qm-at': String(stamp.at),
  };
}

function decimal(field, text, max) {
  if (typeof text !== 'string' || !DIGITS.test(text) || BigInt(text) > max) {
    throw invalid(field, text, `a decimal integer from 0 to ${max}`);
  }
  return Number(text);
}

/** Read a stamp from headers (an object or [name, value] pairs; names case-insensitive). */
function stampFromHeaders(headers) {
  const pairs = Array.isArray(headers) ? headers : Object.entries(headers);
  const found = {};
  for (const [name, value] of pairs) {
    const lower = String(name).toLowerCase();
    if (!HEADERS.includes(lower)) continue;
    if (lower in found) throw new Error(`route stamp: header ${lower} appears more than once`);
    found[lower] = String(value);
  }
  for (const h of HEADERS) if (!(h in found)) throw new Error(`route stamp: ${h} is missing`);
  const route = found['x-qm-route'];
  if (!ROUTES.includes(route)) throw invalid('x-qm-route', route, 'old, new, bridge or replay');
  return {
    broker: checkName('x-qm-broker', found['x-qm-broker']),
    route,
    slice: decimal('x-qm-slice', found['x-qm-slice'], 4294967295n),
    generation: decimal('x-qm-generation', found['x-qm-generation'], 18446744073709551615n),
    producer: checkName('x-qm-producer', found['x-qm-producer']),
    at: decimal('x-qm-at', found['x-qm-at'], 9223372036854775807n),
  };
}

/** The JSON form (the payload's `route` field). */
function stampToJson(stamp) {
  const { broker, route, slice, generation, producer, at } = stamp;
  return { broker, route, slice, generation, producer, at };
}

/** Read the JSON form; unknown fields are ignored. */
function stampFromJson(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('route stamp: the route field is not a JSON object');
  const get = (name) => {
    if (!(name in value)) throw new Error(`route stamp: route.${name} is missing`);
    return value[name];
  };
  const int = (name, max) => {
    const v = get(name);
    if (!Number.isSafeInteger(v) || v < 0 || v > max) throw invalid(`route.${name}`, JSON.stringify(v), `an integer from 0 to ${max}`);
    return v;
  };
  const route = get('route');
  if (!ROUTES.includes(route)) throw invalid('route.route', JSON.stringify(route), 'old, new, bridge or replay');
  return {
    broker: checkName('route.broker', get('broker')),
    route,
    slice: int('slice', 4294967295),
    generation: int('generation', Number.MAX_SAFE_INTEGER),
    producer: checkName('route.producer', get('producer')),
    at: int('at', Number.MAX_SAFE_INTEGER),
  };
}

module.exports = {
  sliceOf, routeOf, Router, APPLIED_METRIC, OtherMigrationError, newStamp, stampHeaders, stampFromHeaders, stampToJson, stampFromJson, HEADERS,
};

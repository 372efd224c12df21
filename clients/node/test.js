'use strict';
// node clients/node/test.js: the module against the slice vectors (tests/fixtures/vectors), the
// stamp examples of docs/routing.md, the Router's document rules and the file follower.
// Exits non-zero on the first failure. Run by tests/integration/library/clients.rs (cargo test) and by hand.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const qm = require('./queue-migrate');

const root = path.resolve(__dirname, '..', '..');
const vectors = process.argv[2] || path.join(root, 'tests/fixtures/vectors/slices.jsonl');
let n = 0;
for (const line of fs.readFileSync(vectors, 'utf8').split('\n')) {
  if (!line.trim()) continue;
  const v = JSON.parse(line);
  assert.equal(qm.sliceOf(v.key, v.slices), v.slice, `${JSON.stringify(v.key)} / ${v.slices}`);
  n += 1;
}
assert.ok(n > 1000, `only ${n} vectors`);

// The stamp examples of docs/routing.md (the blocks after <!-- stamp-headers --> / <!-- stamp-json -->).
const docs = fs.readFileSync(path.join(root, 'docs/routing.md'), 'utf8');
const block = (marker) => docs.split(`<!-- ${marker} -->`)[1].split('```')[1].replace(/^[a-z]*\n/, '');
const headers = block('stamp-headers').trim().split('\n').map((l) => l.split(': '));
const fromHeaders = qm.stampFromHeaders(headers);
const payload = JSON.parse(block('stamp-json'));
assert.deepEqual(qm.stampFromJson(payload.route), fromHeaders);
assert.deepEqual(qm.stampFromHeaders(qm.stampHeaders(fromHeaders)), fromHeaders);
assert.deepEqual(Object.entries(qm.stampHeaders(fromHeaders)), headers);
// Names are case-insensitive, other headers ignored; errors name the field.
const upper = headers.map(([k, v]) => [k.toUpperCase(), v]).concat([['content-type', 'x'], ['x-qm-future', '1']]);
assert.deepEqual(qm.stampFromHeaders(upper), fromHeaders);
const without = headers.filter(([k]) => k !== 'x-qm-slice');
assert.throws(() => qm.stampFromHeaders(without), /x-qm-slice is missing/);
assert.throws(() => qm.stampFromHeaders(headers.concat([['X-QM-AT', '1']])), /x-qm-at appears more than once/);
for (const [field, bad] of [['x-qm-slice', '4294967296'], ['x-qm-slice', '-1'], ['x-qm-slice', '+8'],
  ['x-qm-generation', ' 7'], ['x-qm-at', '1e3'], ['x-qm-at', '9223372036854775808'], ['x-qm-route', 'OLD'],
  ['x-qm-broker', ''], ['x-qm-producer', 'has space']]) {
  const changed = headers.map(([k, v]) => [k, k === field ? bad : v]);
  assert.throws(() => qm.stampFromHeaders(changed), new RegExp(`${field} = .* is invalid`), `${field}=${bad}`);
}

// The Router: safe default, the plan's broker names from the first message on, only forward.
const doc = (generation, migrated) => ({
  migration: 'orders', generation, state: 'slices', step: 0, paused: false, slices_total: 128,
  slices_migrated: migrated, consume: ['old', 'new'], brokers: { old: 'rabbitmq', new: 'nats' },
  updated_at: '2026-11-30T00:00:00Z',
});
const router = new qm.Router({ migration: 'orders', slices: 128, brokers: { old: 'rabbitmq', new: 'nats' } });
assert.deepEqual(router.route('order-0'), { target: 'old', slice: 8, generation: 0 });
assert.equal(router.stamp(router.route('order-0'), 'checkout', 1).broker, 'rabbitmq');
assert.equal(router.offer(doc(7, 9)), 'accepted');
assert.deepEqual(router.route('order-0'), { target: 'new', slice: 8, generation: 7 });
assert.equal(router.stamp(router.route('order-0'), 'checkout', 1).broker, 'nats');
assert.equal(router.offer(doc(6, 0)), 'not newer');
assert.throws(() => router.offer({ ...doc(8, 0), migration: 'other' }), qm.OtherMigrationError);
assert.throws(() => router.offer({ ...doc(8, 0), migration: 'other' }), /migration "other"/);
assert.throws(() => router.offer(doc(9, 129)), /slices_migrated/);
assert.equal(router.generation, 7);
const unnamed = new qm.Router({ migration: 'orders' });
assert.throws(() => unnamed.stamp(unnamed.route('k'), 'p', 0), /x-qm-broker is unknown/);

// Regression (issue 56): a router of `orders` took the `payments` document before its first one
// (from offer or a file) and stamped `nats`; now refused with an error the caller sees.
const orders = new qm.Router({ migration: 'orders', slices: 128, brokers: { old: 'rabbitmq', new: 'nats' } });
assert.throws(() => orders.offer({ ...doc(3, 128), migration: 'payments' }), /"payments", but this router follows "orders"/);
assert.equal(orders.stamp(orders.route('order-0'), 'checkout', 1).broker, 'rabbitmq');
assert.throws(() => orders.followHttp('http://127.0.0.1:9', 'payments'), qm.OtherMigrationError);
const wrongDir = fs.mkdtempSync(path.join(os.tmpdir(), 'qm-node-'));
const wrongFile = path.join(wrongDir, 'payments.routing.json');
fs.writeFileSync(wrongFile, JSON.stringify({ ...doc(3, 128), migration: 'payments' }));
assert.throws(() => orders.followFile(wrongFile, 20), qm.OtherMigrationError);
assert.equal(orders.generation, 0);
fs.rmSync(wrongDir, { recursive: true });

// The file follower: reads the file, takes a newer one, keeps the last good one over garbage.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qm-node-'));
const file = path.join(dir, 'orders.routing.json');
fs.writeFileSync(file, JSON.stringify(doc(3, 0)));
const followed = new qm.Router({ migration: 'orders', slices: 128 });
const f = followed.followFile(file, 20);
assert.equal(followed.generation, 3);
fs.writeFileSync(file, '{ not json');
setTimeout(() => {
  assert.equal(followed.generation, 3);
  assert.ok(f.status().lastError);
  fs.writeFileSync(file, JSON.stringify(doc(4, 128)));
  setTimeout(() => {
    assert.equal(followed.generation, 4);
    assert.equal(followed.route('order-0').target, 'new');
    // Rewritten for another migration later: refused, said in the status, routes kept.
    fs.writeFileSync(file, JSON.stringify({ ...doc(9, 0), migration: 'payments' }));
    setTimeout(() => {
      f.stop();
      assert.equal(followed.generation, 4);
      assert.match(f.status().lastError, /"payments"/);
      assert.equal(followed.route('order-0').target, 'new');
      fs.rmSync(dir, { recursive: true });
      console.log(`ok: ${n} vectors, stamp wire format, router rules, another migration refused, file follower`);
    }, 200);
  }, 200);
}, 200);

// Issue 58: the producer says which generation it applied, on the long-poll and as a metric.
const http = require('node:http');
const asked = [];
const server = http.createServer((req, res) => {
  asked.push(req.url);
  if (req.headers['if-none-match'] === '"5"') {
    setTimeout(() => { res.writeHead(304, { ETag: '"5"' }); res.end(); }, 50);
    return;
  }
  res.writeHead(200, { 'Content-Type': 'application/json', ETag: '"5"' });
  res.end(JSON.stringify(doc(5, 2)));
});
server.listen(0, '127.0.0.1', () => {
  const reporting = new qm.Router({ migration: 'orders', slices: 128, producer: 'node "test"\n1' });
  assert.match(reporting.metricsText(), /queue_migrate_routing_applied_generation\{migration="orders",producer="node \\"test\\"\\n1"\} 0\n/);
  assert.match(new qm.Router({ migration: 'orders' }).producer, /-\d+-\d+$/);
  const follower = reporting.followHttp(`http://127.0.0.1:${server.address().port}`, 'orders', { waitSeconds: 1, minBackoffMs: 20 });
  const wait = () => {
    if (asked.length < 2) { setTimeout(wait, 10); return; }
    follower.stop();
    server.close();
    const params = asked.map((u) => new URL(u, 'http://x').searchParams);
    assert.equal(params[0].get('producer'), 'node "test"\n1');
    assert.equal(params[0].get('applied'), '0');
    assert.equal(params[1].get('applied'), '5');
    assert.equal(params[1].get('wait'), '1s');
    assert.match(reporting.metricsText(), /producer="node \\"test\\"\\n1"\} 5\n/);
    assert.equal(qm.APPLIED_METRIC, 'queue_migrate_routing_applied_generation');
    console.log('ok: producer id and applied generation on the long-poll and in metricsText');
  };
  wait();
});

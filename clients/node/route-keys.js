'use strict';
// node clients/node/route-keys.js DAEMON_URL MIGRATION SLICES OLD_NAME NEW_NAME
// Follows the daemon's routing document; for each stdin line {"keys": [...], "generation": G}
// waits (up to 10 s) until the document of generation >= G arrived, then prints one line:
// {"generation": g, "routes": [[target, slice, broker], ...]}. What tests/integration/library/clients.rs compares
// with the Rust Router and the Python module.
const readline = require('node:readline');
const { Router } = require('./queue-migrate');

const [url, migration, slices, oldName, newName] = process.argv.slice(2);
const router = new Router({ migration, slices: Number(slices), brokers: { old: oldName, new: newName }, producer: 'node-producer' });
const follower = router.followHttp(url, migration, { waitSeconds: 5 });

const lines = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
lines.on('line', (line) => {
  if (!line.trim()) return;
  queue = queue.then(async () => {
    const { keys, generation } = JSON.parse(line);
    const deadline = Date.now() + 10000;
    while (router.generation < generation && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const routes = keys.map((k) => {
      const r = router.route(k);
      return [r.target, r.slice, router.stamp(r, 'node-producer', Date.now()).broker];
    });
    process.stdout.write(`${JSON.stringify({ generation: router.generation, routes })}\n`);
  });
});
lines.on('close', () => queue.then(() => follower.stop()));

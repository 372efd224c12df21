#!/usr/bin/env node
// The baseline of the slice benchmark: the migration article's slice function in Node.js, timed on
// the same 1,024 keys as benches/slice.rs (mulberry32 with seed 42: even indices `order-<uuid v4>`,
// odd `customer:<8 digits>`), with the same checksum of the slices so that bench/slice.sh can check
// that both sides agree.
//
//   node bench/slice_node.js [calls per round (default 2000000)] [rounds (default 7)]
//
// Prints one JSON line: {"checksum": "...", "ns_per_call": <median wall time per call of the
// rounds>, "cpu_ns_per_call": <median process CPU time (user + system) per call>, "rounds": [...]}.
'use strict';
const { createHash } = require('node:crypto');

// ---- the migration article's function, as published (only the name of the constant differs) ---
const TOTAL_FATIAS = 128;
const fatiaDe = (chaveAgregado) => {
  const digest = createHash('sha256').update(chaveAgregado).digest();
  return digest.readUInt32BE(0) % TOTAL_FATIAS;
};
// -------------------------------------------------------------------------------------------------

const KEYS = 1024;

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t = (t + Math.imul(t ^ (t >>> 7), t | 61)) ^ t;
    return (t ^ (t >>> 14)) >>> 0;
  };
}

function keys() {
  const rng = mulberry32(42);
  const out = [];
  for (let i = 0; i < KEYS; i++) {
    if (i % 2 === 0) {
      const w = [rng(), rng(), rng(), rng()];
      const hex = w.map((x) => x.toString(16).padStart(8, '0')).join('');
      const variant = '89ab'[(w[2] >>> 28) & 3];
      out.push(
        `order-${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`,
      );
    } else {
      out.push(`customer:${String(rng() % 100000000).padStart(8, '0')}`);
    }
  }
  return out;
}

function checksum(ks) {
  let h = 0x811c9dc5;
  for (const k of ks) h = Math.imul((h ^ fatiaDe(k)) >>> 0, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}

const calls = Number(process.argv[2] || 2000000);
const rounds = Number(process.argv[3] || 7);
const ks = keys();
let sink = 0;
// Warm-up: let the JIT settle.
for (let i = 0; i < 200000; i++) sink += fatiaDe(ks[i & (KEYS - 1)]);
const perCall = [];
const cpuPerCall = [];
for (let r = 0; r < rounds; r++) {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) sink += fatiaDe(ks[i & (KEYS - 1)]);
  const t1 = process.hrtime.bigint();
  const c1 = process.cpuUsage(c0);
  perCall.push(Number(t1 - t0) / calls);
  cpuPerCall.push(((c1.user + c1.system) * 1000) / calls);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sorted = [...perCall].sort((a, b) => a - b);
console.log(
  JSON.stringify({
    keys: [ks[0], ks[1]],
    checksum: checksum(ks),
    calls,
    ns_per_call: Number(sorted[Math.floor(sorted.length / 2)].toFixed(1)),
    min_ns_per_call: Number(sorted[0].toFixed(1)),
    cpu_ns_per_call: Number(median(cpuPerCall).toFixed(1)),
    rounds: perCall.map((x) => Number(x.toFixed(1))),
    sink: sink % 1000,
  }),
);

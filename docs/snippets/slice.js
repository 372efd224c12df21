// sliceOf(key, slices): the slice of an aggregate key, byte-for-byte queue-migrate's slice_of.
// A message goes to the new broker when sliceOf(key, slices_total) < slices_migrated.
const { createHash } = require('node:crypto');

function sliceOf(key, slices) {
  const digest = createHash('sha256').update(key, 'utf8').digest();
  return digest.readUInt32BE(0) % Math.max(slices, 1);
}

module.exports = { sliceOf };

// As a script: {"key": ..., "slices": ...} JSON lines on stdin, one slice per line on stdout.
if (require.main === module) {
  const lines = require('node:fs').readFileSync(0, 'utf8').split('\n').filter((l) => l.trim());
  const out = lines.map((l) => { const v = JSON.parse(l); return sliceOf(v.key, v.slices); });
  process.stdout.write(out.join('\n') + '\n');
}

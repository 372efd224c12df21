// A straightforward Node.js triage of an NDJSON dead-letter export, for bench/triage.sh: the
// same grouping as the dead-letter article (its signatureOf and its accumulator, applied line by
// line as the article's "one pass, one summary per group" says), readline over a stream,
// JSON.parse, the article's sort and spanHours. Prints the groups as JSON on stdout, a summary on
// stderr.
'use strict';
const fs = require('fs');
const readline = require('readline');

const signatureOf = (errorMessage) =>
  errorMessage
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<id>')
    .replace(/\d+/g, '<n>')
    .replace(/'[^']*'|"[^"]*"/g, '<v>')
    .slice(0, 120);

const main = async () => {
  const input = fs.createReadStream(process.argv[2], { highWaterMark: 1 << 16 });
  const lines = readline.createInterface({ input, crlfDelay: Infinity });
  const groups = new Map();
  let entries = 0;
  let skipped = 0;
  for await (const line of lines) {
    if (line.trim() === '') continue;
    let entry;
    try {
      entry = JSON.parse(line);
    } catch {
      skipped += 1;
      continue;
    }
    if (
      entry === null ||
      typeof entry !== 'object' ||
      typeof entry.errorClass !== 'string' ||
      typeof entry.errorMessage !== 'string' ||
      typeof entry.consumerVersion !== 'string' ||
      typeof entry.firstAttemptAt !== 'string' ||
      Number.isNaN(Date.parse(entry.firstAttemptAt)) ||
      typeof entry.deadLetteredAt !== 'string' ||
      Number.isNaN(Date.parse(entry.deadLetteredAt)) ||
      !Number.isInteger(entry.attempts) ||
      entry.attempts < 0 ||
      !('payload' in entry)
    ) {
      skipped += 1;
      continue;
    }
    entries += 1;
    const signature = signatureOf(entry.errorMessage);
    const key = `${entry.errorClass}|${entry.consumerVersion}|${signature}`;
    const group = groups.get(key) ?? {
      errorClass: entry.errorClass,
      consumerVersion: entry.consumerVersion,
      signature,
      count: 0,
      firstSeen: entry.firstAttemptAt,
      lastSeen: entry.firstAttemptAt,
      sample: entry,
    };
    group.count += 1;
    if (entry.firstAttemptAt < group.firstSeen) group.firstSeen = entry.firstAttemptAt;
    if (entry.firstAttemptAt > group.lastSeen) group.lastSeen = entry.firstAttemptAt;
    groups.set(key, group);
  }
  const result = [...groups.values()]
    .map((group) => ({
      ...group,
      spanHours: (Date.parse(group.lastSeen) - Date.parse(group.firstSeen)) / 3_600_000,
    }))
    .sort((a, b) => b.count - a.count);
  process.stdout.write(JSON.stringify(result));
  process.stderr.write(`${entries} entries in ${result.length} groups; ${skipped} skipped\n`);
};

main();

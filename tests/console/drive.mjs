// Drives headless Chromium through the DevTools protocol for tests/daemon/console.rs, over the pipe
// Chromium offers (--remote-debugging-pipe: JSON messages ended by a NUL byte on fds 3 and 4),
// so it needs no package and no WebSocket client (Node 18 or later): loads the console of a
// running `migrate run`, reads what it shows, acts without and with the token, takes
// screenshots. Prints one JSON object on stdout.
//
//   node drive.mjs CHROMIUM BASE_URL MIGRATION TOKEN OUT_DIR VIEWER_TOKEN
//   DRIVE_MODE=complete node drive.mjs ...: only read the actions of a complete migration.
//   DRIVE_MODE=roles|refusal|visits node drive.mjs ...: one point of issue 56 each (TOKEN an
//   operator's, VIEWER_TOKEN then an admin's): the buttons of the signed-in role, the token
//   state after a 403, a past step's chart heading.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [chromium, base, migration, token, outDir, viewerToken] = process.argv.slice(2);
const mode = process.env.DRIVE_MODE || "full";
const sleep = ms => new Promise(ok => setTimeout(ok, ms));
const profile = mkdtempSync(join(tmpdir(), "qm-console-chromium-"));
const browser = spawn(chromium, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-pipe",
  "--user-data-dir=" + profile, "--window-size=1280,900", "about:blank",
], { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
let browserLog = "";
browser.stderr.on("data", d => { browserLog += d; });
// Ends the run with `code`: Chromium asked to close (Browser.close: killed, its helper processes
// would go on writing to the profile, and its socket dir in /tmp would stay), killed if it has not
// within 5 s, waited for, then its profile removed. The promise never settles: the process exits.
function finish(code) {
  return new Promise(() => {
    browser.removeAllListeners("exit");
    const done = () => {
      try { rmSync(profile, { recursive: true, force: true, maxRetries: 5 }); } catch {}
      process.exit(code);
    };
    if (browser.exitCode !== null || browser.signalCode !== null) return done();
    browser.once("exit", done);
    setTimeout(() => { try { browser.kill("SIGKILL"); } catch { done(); } }, 5000);
    try { toBrowser.write(JSON.stringify({ id: 0, method: "Browser.close" }) + "\0"); } catch {}
  });
}
function fail(message) {
  process.stdout.write(JSON.stringify({ error: message, browser: browserLog.slice(-2000) }) + "\n");
  finish(1);
}
setTimeout(() => fail("timed out"), 120000).unref();
browser.on("exit", code => fail("chromium exited (" + code + ")"));

const toBrowser = browser.stdio[3], fromBrowser = browser.stdio[4];
let next = 1, pending = Buffer.alloc(0);
const waiting = new Map();
fromBrowser.on("data", chunk => {
  pending = Buffer.concat([pending, chunk]);
  let end;
  while ((end = pending.indexOf(0)) >= 0) {
    const msg = JSON.parse(pending.subarray(0, end).toString("utf8"));
    pending = pending.subarray(end + 1);
    if (msg.id && waiting.has(msg.id)) {
      const { ok, ko } = waiting.get(msg.id);
      waiting.delete(msg.id);
      if (msg.error) ko(new Error(JSON.stringify(msg.error))); else ok(msg.result);
    }
  }
});
function send(method, params = {}, sessionId) {
  const id = next++;
  toBrowser.write(JSON.stringify({ id, method, params, sessionId }) + "\0");
  return new Promise((ok, ko) => waiting.set(id, { ok, ko }));
}
const { targetId } = await send("Target.createTarget", { url: "about:blank" });
const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
const page = (method, params) => send(method, params, sessionId);
async function js(expression) {
  const r = await page("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
  if (r.exceptionDetails) throw new Error(expression + ": " + JSON.stringify(r.exceptionDetails));
  return r.result.value;
}
async function until(expression, what, ms = 20000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await js(expression).catch(() => false)) return;
    await sleep(100);
  }
  const shown = await js("(document.getElementById('action-result') || {}).textContent + ' | ' + " +
    "(document.getElementById('summary') || {}).textContent").catch(e => String(e));
  fail("waited in vain for " + what + ": " + expression + " (page: " + shown + ")");
}
async function shot(file, width, height, dark) {
  await page("Emulation.setDeviceMetricsOverride", { width, height, deviceScaleFactor: 1, mobile: width < 600 });
  await page("Emulation.setEmulatedMedia", { features: [{ name: "prefers-color-scheme", value: dark ? "dark" : "light" }] });
  await sleep(400);
  const { data } = await page("Page.captureScreenshot", { format: "png" });
  writeFileSync(join(outDir, file), Buffer.from(data, "base64"));
  return js("document.documentElement.scrollWidth");
}
await page("Page.enable");
await page("Runtime.enable");
const result = {};
const buttonsNow = `[...document.querySelectorAll('#buttons button')].map(b => ({
  action: b.value, disabled: b.disabled, why: document.getElementById('why-' + b.value)?.textContent || '',
  visible: !!b.offsetParent }))`;
if (mode === "complete") {
  await page("Page.navigate", { url: base + "/migrations/" + encodeURIComponent(migration) });
  await until("document.readyState === 'complete' && !!document.getElementById('buttons')", "the page");
  result.state = await js("document.getElementById('summary').dataset.state");
  result.buttons = await js(buttonsNow);
  result.why_all = await js("document.getElementById('why-all')?.textContent || ''");
  // A click on a disabled button sends nothing.
  await js("document.getElementById('do-rollback').click(); true");
  await sleep(300);
  result.result_after_click = await js("document.getElementById('action-result').textContent");
  await shot("console-complete-desktop.png", 1280, 900, false);
  process.stdout.write(JSON.stringify(result) + "\n");
  await finish(0);
}

const signIn = async (t) => {
  await js(`document.getElementById('token').value = ${JSON.stringify(t)}; document.getElementById('sign-in').click(); true`);
  await until("!document.getElementById('signed-in').hidden && document.getElementById('token-row').hidden", "signed in");
  await sleep(300);
};
const tokenState = `({ signed_in: document.getElementById('signed-in').hidden ? null : document.getElementById('signed-in').textContent,
  token_held: !document.getElementById('token-held').hidden, token_row: !document.getElementById('token-row').hidden,
  result: document.getElementById('action-result').textContent })`;
const advanceButton = `(() => { const b = document.getElementById('do-advance');
  return { disabled: b.disabled, why: document.getElementById('why-advance').textContent }; })()`;
if (mode === "roles" || mode === "refusal") {
  await page("Page.navigate", { url: base + "/migrations/" + encodeURIComponent(migration) });
  await until("document.readyState === 'complete' && !!document.getElementById('buttons')", "the page");
  result.state = await js("document.getElementById('summary').dataset.state");
  result.signed_out = await js(advanceButton);
  await signIn(token);
  result.operator = await js(advanceButton);
  result.operator_buttons = await js(buttonsNow);
}
if (mode === "roles") {
  // The page reads itself again every 5 s: the button stays as the role says.
  await sleep(6000);
  result.operator_after_refresh = await js(advanceButton);
  // The admin, in a page of their own.
  await page("Page.navigate", { url: base + "/migrations/" + encodeURIComponent(migration) });
  await until("document.readyState === 'complete' && !!document.getElementById('buttons')", "the page again");
  await signIn(viewerToken);
  result.admin = await js(advanceButton);
  await shot("console-roles-desktop.png", 1280, 900, false);
  process.stdout.write(JSON.stringify(result) + "\n");
  await finish(0);
}
if (mode === "refusal") {
  // A page older than the role check (the migration moved on since it was drawn): the click
  // reaches the API, which refuses it (403, not an admin).
  await js(`(() => { const b = document.getElementById('do-advance'); b.disabled = false;
    document.getElementById('confirm').value = ${JSON.stringify(migration)};
    document.getElementById('reason').value = 'to complete'; b.click(); return true; })()`);
  const settled = "(() => { const t = document.getElementById('action-result').textContent; return t !== '' && !t.endsWith('…'); })()";
  await until(settled, "the refusal");
  await sleep(500);
  result.after_403 = await js(tokenState);
  // What the page says is what it holds: the next action goes with the token it names.
  await js("document.getElementById('action-result').textContent = ''; document.getElementById('reason').value = 'pause after the 403'; document.getElementById('do-pause').click(); true");
  await until(settled, "the pause");
  result.pause_after_403 = await js(tokenState);
  await js("document.getElementById('forget').click(); true");
  await sleep(500);
  result.after_forget = await js(tokenState);
  process.stdout.write(JSON.stringify(result) + "\n");
  await finish(0);
}
if (mode === "visits") {
  await page("Page.navigate", { url: base + "/migrations/" + encodeURIComponent(migration) + "?step=" + encodeURIComponent("slices[0]") });
  await until("document.readyState === 'complete' && document.querySelectorAll('figure.chart').length > 0 && " +
    "[...document.querySelectorAll('figure.chart .plot')].every(p => p.querySelector('svg, .no-values'))", "the past step's charts");
  result.past = await js(`({ state: document.getElementById('charts').dataset.state,
    heading: document.getElementById('charts-h').textContent,
    points: [...document.querySelectorAll('figure.chart svg')].map(s => Number(s.dataset.points)) })`);
  process.stdout.write(JSON.stringify(result) + "\n");
  await finish(0);
}

// The fleet.
await page("Page.navigate", { url: base + "/" });
await until("document.readyState === 'complete' && !!document.querySelector('table.fleet')", "the fleet");
result.fleet = await js(`[...document.querySelectorAll('table.fleet tbody tr')].map(tr => ({
  migration: tr.dataset.migration, phase: tr.querySelector('.phase')?.textContent,
  step: tr.querySelector('.step')?.textContent, flags: tr.querySelector('.flags')?.textContent,
  progress: tr.querySelector('progress')?.value }))`);
result.fleet_leader = await js("document.getElementById('leader').textContent");
await shot("console-fleet-desktop.png", 1280, 900, false);

// One migration.
await page("Page.navigate", { url: base + "/migrations/" + encodeURIComponent(migration) });
await until("document.readyState === 'complete' && document.querySelectorAll('figure.chart').length > 0 && " +
  "[...document.querySelectorAll('figure.chart .plot')].every(p => p.querySelector('svg, .no-values'))", "the charts");
const read = `({
  phase: document.getElementById('phase').textContent,
  step: document.getElementById('step').textContent,
  state: document.getElementById('summary').dataset.state,
  paused: document.getElementById('summary').dataset.paused,
  ladder_here: document.querySelector('.ladder li.here .rung')?.textContent,
  min_left: document.getElementById('min-left')?.textContent,
  gates: [...document.querySelectorAll('#gates tbody tr')].map(tr => ({
    name: tr.dataset.gate, kind: tr.dataset.kind,
    verdict: tr.querySelector('.verdict').textContent, value: tr.querySelector('.value').textContent,
    reason: tr.querySelector('.reason').textContent })),
  charts: [...document.querySelectorAll('figure.chart')].map(f => ({
    name: f.dataset.gate, kind: f.dataset.kind, points: Number(f.querySelector('svg')?.dataset.points || 0),
    threshold_line: !!f.querySelector('svg .threshold'), transitions: f.querySelectorAll('svg .transition').length })),
  journal: [...document.querySelectorAll('#journal > tbody > tr')].map(tr => ({
    seq: Number(tr.dataset.seq), command: tr.querySelector('.command').textContent,
    actor: tr.querySelector('.actor').textContent, reason: tr.querySelector('.reason').textContent })),
  routing: JSON.parse(document.getElementById('routing').textContent),
  actions_first: !!(document.getElementById('actions').compareDocumentPosition(document.querySelector('.ladder')) &
    Node.DOCUMENT_POSITION_FOLLOWING),
  queries: [...document.querySelectorAll('#gates > tbody > tr details.query pre')].map(p => p.textContent),
  evidence_tables: document.querySelectorAll('#journal table.evidence').length,
  evidence_times: [...document.querySelectorAll('#journal table.evidence td.at')].map(t => t.textContent),
  evidence_raw_ms: /_ms|\b1[0-9]{12}\b/.test([...document.querySelectorAll('#journal td.evidence')].map(t => t.textContent).join(' ')),
  past_steps: [...document.querySelectorAll('.ladder li a')].map(a => a.closest('li').dataset.state),
  buttons: ${buttonsNow},
})`;
result.before = await js(read);
result.desktop_width = await shot("console-migration-desktop.png", 1280, 900, false);
result.phone_width = await shot("console-migration-phone.png", 390, 844, false);
result.phone_dark_width = await shot("console-migration-phone-dark.png", 390, 844, true);
// 200% zoom of a 1280×900 window: a 640×450 layout viewport.
result.zoom200_width = await shot("console-migration-zoom200.png", 640, 450, false);
// Keyboard: Enter in the reason field sends nothing.
result.enter_sends_nothing = await js(`(() => {
  const r = document.getElementById('reason');
  r.focus();
  const ev = new KeyboardEvent('keydown', { key: 'Enter', bubbles: true, cancelable: true });
  r.dispatchEvent(ev);
  return ev.defaultPrevented && document.getElementById('action-result').textContent === '';
})()`);
await page("Emulation.setDeviceMetricsOverride", { width: 1280, height: 900, deviceScaleFactor: 1, mobile: false });
await page("Emulation.setEmulatedMedia", { features: [{ name: "prefers-color-scheme", value: "light" }] });

// An action without the token, then with it; no reload in between (the marker survives).
await js("window.__no_reload = 42; true");
const click = (reason, id) => js(`(() => {
  document.getElementById('reason').value = ${JSON.stringify(reason)};
  document.getElementById('${id}').click(); return true; })()`);
const settled = "(() => { const t = document.getElementById('action-result').textContent; return t !== '' && !t.endsWith('…'); })()";
await click("paused from the console, no token", "do-pause");
await until(settled, "the refusal");
result.without_token = await js("document.getElementById('action-result').textContent");
result.paused_after_refusal = await js("document.getElementById('summary').dataset.paused");
await js(`document.getElementById('action-result').textContent = ''; document.getElementById('token').value = ${JSON.stringify(token)}; true`);
await click("paused from the console", "do-pause");
await until(settled, "the answer");
result.with_token = await js("document.getElementById('action-result').textContent");
await until("document.getElementById('summary').dataset.paused === 'true'", "the pause shown", 15000);
result.token_field_cleared = await js("document.getElementById('token').value === '' && document.getElementById('token-row').hidden");
// The token held in memory: the next action needs no typing.
await js("document.getElementById('action-result').textContent = ''; true");
await click("resumed from the console", "do-resume");
await until(settled, "the resume");
result.resume = await js("document.getElementById('action-result').textContent");
await until("document.getElementById('summary').dataset.paused === 'false'", "the resume shown", 15000);
result.after = await js(read);
// Roll back: "and pause" is ticked by default.
await js("document.getElementById('action-result').textContent = ''; true");
result.rollback_pause_default = await js("document.getElementById('rollback-pause').checked");
await click("rolled back from the console", "do-rollback");
await until(settled, "the rollback");
result.rollback = await js("document.getElementById('action-result').textContent");
await until("document.getElementById('summary').dataset.state === 'slices[0]'", "the rollback shown", 15000);
result.after_rollback = { state: await js("document.getElementById('summary').dataset.state"),
  paused: await js("document.getElementById('summary').dataset.paused"), buttons: await js(buttonsNow) };
// Abort asks for the name: nothing is sent without it, nor with another one.
await js("document.getElementById('action-result').textContent = ''; true");
await click("aborted from the console", "do-abort");
await until(settled, "the abort's question");
result.abort_asks = await js("document.getElementById('action-result').textContent");
result.abort_row_shown = await js("!document.getElementById('abort-row').hidden");
await js("document.getElementById('abort-confirm').value = 'not-the-name'; true");
await click("aborted from the console", "do-abort");
await sleep(300);
result.abort_wrong_name = await js("document.getElementById('action-result').textContent");
result.state_before_abort = await js("document.getElementById('summary').dataset.state");
await js(`document.getElementById('abort-confirm').value = ${JSON.stringify(migration)}; document.getElementById('action-result').textContent = ''; true`);
await click("aborted from the console", "do-abort");
await until("document.getElementById('action-result').textContent.includes('applied')", "the abort applied");
result.abort = await js("document.getElementById('action-result').textContent");
await until("document.getElementById('summary').dataset.state !== 'slices[0]'", "the abort shown", 15000);
result.final = await js(read);
result.no_reload = await js("window.__no_reload === 42");
result.token_in_storage = await js("JSON.stringify(localStorage) + JSON.stringify(sessionStorage) + document.cookie");
await shot("console-after-actions-desktop.png", 1280, 900, false);

// A past step's charts, chosen on the ladder.
await page("Page.navigate", { url: base + "/migrations/" + encodeURIComponent(migration) + "?step=" + encodeURIComponent("slices[0]") });
await until("document.readyState === 'complete' && document.querySelectorAll('figure.chart').length > 0 && " +
  "[...document.querySelectorAll('figure.chart .plot')].every(p => p.querySelector('svg, .no-values'))", "the past step's charts");
result.past = await js(`({ state: document.getElementById('charts').dataset.state,
  heading: document.getElementById('charts-h').textContent,
  selected: document.querySelector('.ladder li.selected')?.dataset.state,
  points: [...document.querySelectorAll('figure.chart svg')].map(s => Number(s.dataset.points)) })`);

// A viewer: signed in, no action button.
await page("Page.navigate", { url: base + "/migrations/" + encodeURIComponent(migration) });
await until("document.readyState === 'complete' && !!document.getElementById('sign-in')", "the page again");
await js(`document.getElementById('token').value = ${JSON.stringify(viewerToken)}; document.getElementById('sign-in').click(); true`);
await until("!document.getElementById('viewer-note').hidden", "the viewer's note");
result.viewer = await js(`({ note: document.getElementById('viewer-note').textContent,
  signed: document.getElementById('signed-in').textContent,
  visible_buttons: [...document.querySelectorAll('#actions button[value]')].filter(b => !!b.offsetParent).length })`);
await shot("console-viewer-desktop.png", 1280, 900, false);

process.stdout.write(JSON.stringify(result) + "\n");
await finish(0);

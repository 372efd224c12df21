// queue-migrate console: live updates, charts drawn as inline SVG, actions through the API.
// No library, no request to any other origin. The API token lives in `token` below only:
// never in storage, a cookie or the URL.
"use strict";
(function () {
  const body = document.body;
  const page = body.dataset.page;
  const name = body.dataset.migration;
  const SVG = "http://www.w3.org/2000/svg";
  let token = null;
  // Who the held token (or the proxy) is, as GET /v1/whoami last answered; null: not known.
  let who = null;
  let busy = false;

  function el(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function short(x) {
    if (!isFinite(x)) return String(x);
    const a = Math.abs(x);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return x.toExponential(2);
    return String(Math.round(x * 1e4) / 1e4);
  }

  function clock(ms) {
    return new Date(ms).toISOString().slice(11, 16);
  }

  // One chart: the gate's recorded values in this phase against its threshold, with the
  // transitions marked.
  function drawChart(fig, data) {
    const gate = fig.dataset.gate, kind = fig.dataset.kind;
    // The current step: its whole phase; a past step chosen on the ladder: that step only.
    const box = document.getElementById("charts");
    const current = !box || box.dataset.current !== "false";
    const phase = data.state.replace(/\[.*$/, "");
    const pts = data.evaluations.filter(p => p.gate === gate && p.kind === kind &&
      (current ? p.state.replace(/\[.*$/, "") === phase : p.state === box.dataset.state));
    const plot = fig.querySelector(".plot");
    plot.textContent = "";
    const thr = fig.dataset.threshold !== undefined ? Number(fig.dataset.threshold) : null;
    const valued = pts.filter(p => p.value !== null);
    if (valued.length === 0) {
      const p = document.createElement("p");
      p.className = "muted no-values";
      p.textContent = pts.length ? "Evaluated " + pts.length + " times, no value yet." :
        (current ? "No recorded values yet in this phase." : "No recorded values kept for this step.");
      plot.appendChild(p);
      return;
    }
    const W = 400, H = 170, L = 52, R = 8, T = 10, B = 22;
    let t0 = Math.min(...pts.map(p => p.at_ms)), t1 = Math.max(...pts.map(p => p.at_ms));
    if (t1 === t0) { t0 -= 30000; t1 += 30000; }
    const vals = valued.map(p => p.value);
    if (thr !== null) vals.push(thr);
    let v0 = Math.min(...vals), v1 = Math.max(...vals);
    if (v1 === v0) { const d = Math.abs(v0) * 0.1 || 1; v0 -= d; v1 += d; }
    const pad = (v1 - v0) * 0.08; v0 -= pad; v1 += pad;
    const x = t => L + (t - t0) / (t1 - t0) * (W - L - R);
    const y = v => T + (v1 - v) / (v1 - v0) * (H - T - B);
    const last = valued[valued.length - 1];
    const label = gate + ": " + valued.length + " recorded values, last " + short(last.value) +
      " (" + last.verdict + ")" + (thr !== null ? ", passes if " + fig.dataset.op + " " + short(thr) : "");
    const svg = el("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": label,
      "data-points": valued.length });
    svg.appendChild(el("title", {}, label));
    svg.appendChild(el("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
    svg.appendChild(el("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
    svg.appendChild(el("text", { x: L - 4, y: T + 8, "text-anchor": "end" }, short(v1)));
    svg.appendChild(el("text", { x: L - 4, y: H - B, "text-anchor": "end" }, short(v0)));
    svg.appendChild(el("text", { x: L, y: H - 6 }, clock(t0)));
    svg.appendChild(el("text", { x: W - R, y: H - 6, "text-anchor": "end" }, clock(t1)));
    for (const tr of data.transitions) {
      if (tr.at_ms < t0 || tr.at_ms > t1) continue;
      const g = el("g", { class: "transition-mark" });
      g.appendChild(el("line", { class: "transition", x1: x(tr.at_ms), y1: T, x2: x(tr.at_ms), y2: H - B }));
      g.appendChild(el("title", {}, tr.command + " → " + tr.to + " at " + new Date(tr.at_ms).toISOString()));
      svg.appendChild(g);
    }
    if (thr !== null) {
      svg.appendChild(el("line", { class: "threshold", x1: L, y1: y(thr), x2: W - R, y2: y(thr) }));
      svg.appendChild(el("text", { x: W - R - 2, y: y(thr) - 4, "text-anchor": "end" },
        fig.dataset.op + " " + short(thr)));
    }
    svg.appendChild(el("polyline", { class: "series",
      points: valued.map(p => x(p.at_ms).toFixed(1) + "," + y(p.value).toFixed(1)).join(" ") }));
    const step = Math.max(1, Math.ceil(valued.length / 60));
    valued.forEach((p, i) => {
      if (i % step !== 0 && i !== valued.length - 1) return;
      svg.appendChild(el("circle", { class: "dot " + p.verdict, cx: x(p.at_ms).toFixed(1), cy: y(p.value).toFixed(1), r: 2.5 }));
    });
    plot.appendChild(svg);
  }

  async function drawCharts() {
    const figs = document.querySelectorAll("figure.chart");
    if (!figs.length) return;
    try {
      const r = await fetch("/v1/migrations/" + encodeURIComponent(name) + "/evaluations?limit=2000",
        { cache: "no-store" });
      if (!r.ok) throw new Error("HTTP " + r.status);
      const data = await r.json();
      figs.forEach(f => drawChart(f, data));
    } catch (e) {
      figs.forEach(f => { f.querySelector(".plot").textContent = "Cannot read the recorded values: " + e.message; });
    }
  }

  // Read the page again and put its content in place: no reload, the form keeps what was typed.
  async function refresh() {
    try {
      const r = await fetch(location.pathname + location.search, { cache: "no-store" });
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      const leader = doc.getElementById("leader");
      // What the page shows, and the buttons (enabled or not, with why): never the fields.
      for (const id of (page === "migration" ? ["live-head", "live", "buttons"] : ["main"])) {
        const fresh = doc.getElementById(id), old = document.getElementById(id);
        if (fresh && old) old.innerHTML = fresh.innerHTML;
      }
      if (leader) document.getElementById("leader").replaceWith(leader);
      const form = document.getElementById("action-form"), newForm = doc.getElementById("action-form");
      if (form && newForm) {
        form.dataset.confirm = newForm.dataset.confirm;
        document.getElementById("confirm-row").hidden = newForm.dataset.confirm !== "true";
      }
      if (doc.body.dataset.generation) body.dataset.generation = doc.body.dataset.generation;
      applyRoles();
      await drawCharts();
    } catch (e) {
      const u = document.getElementById("updated");
      if (u) u.textContent = "Cannot reach the controller (" + e.message + "); retrying.";
    }
  }

  // The routing long-poll: answers as soon as the migration moves.
  async function follow() {
    for (;;) {
      try {
        const r = await fetch("/v1/migrations/" + encodeURIComponent(name) + "/routing?wait=25s", {
          cache: "no-store", headers: { "If-None-Match": '"' + (body.dataset.generation || "0") + '"' } });
        if (r.status === 200) {
          const doc = await r.json();
          if (String(doc.generation) !== body.dataset.generation) {
            body.dataset.generation = String(doc.generation);
            await refresh();
          }
        } else if (r.status !== 304) {
          await new Promise(ok => setTimeout(ok, 5000));
        }
      } catch (e) {
        await new Promise(ok => setTimeout(ok, 5000));
      }
    }
  }

  function showToken() {
    if (document.getElementById("action-form").dataset.proxy === "true") return;
    document.getElementById("token-row").hidden = token !== null;
    document.getElementById("token-held").hidden = token === null;
  }

  // Whether `w` (a whoami answer) may do what needs `needs` ("operator", "admin"): the server's
  // own answer (may_act, may_complete), never a rule of the page's.
  function allowed(needs, w) {
    return needs === "admin" ? !!w.may_complete : !!w.may_act;
  }

  // Disable each button the signed-in role cannot do, with the reason (data-needs comes from
  // the server's rule of who may do what; the page only compares it with whoami's answer).
  function applyRoles() {
    if (!who) return;
    for (const b of document.querySelectorAll("#buttons button[data-needs]")) {
      if (b.disabled || allowed(b.dataset.needs, who)) continue;
      b.disabled = true;
      const why = document.getElementById("why-" + b.value);
      if (why) {
        why.className = "why disabled";
        why.textContent = b.dataset.needsWhy + " " + (who.name || "this token") + " (" + who.role + ") is not one.";
      }
    }
  }

  // No token held any more: nothing says who is signed in, and the buttons are the page's again.
  function signedOut() {
    token = null;
    who = null;
    showToken();
    document.getElementById("signed-in").hidden = true;
    document.getElementById("viewer-note").hidden = true;
    document.getElementById("act-fields").hidden = false;
    refresh();
  }

  // Who the token is (GET /v1/whoami): a viewer sees no action; null when it is not known.
  async function whoami() {
    const headers = token !== null ? { Authorization: "Bearer " + token } : {};
    let r, answer;
    try {
      r = await fetch("/v1/whoami", { headers, cache: "no-store" });
      answer = await r.json().catch(() => ({}));
    } catch (e) {
      return null;
    }
    const signed = document.getElementById("signed-in");
    const note = document.getElementById("viewer-note");
    const fields = document.getElementById("act-fields");
    if (!r.ok) {
      signedOut();
      return { refused: r.status, error: answer.error || "" };
    }
    who = answer;
    signed.hidden = !who.may_act;
    signed.textContent = "Signed in as " + (who.name || "the shared token") + " (" + who.role + ").";
    fields.hidden = !who.may_act;
    note.hidden = who.may_act;
    note.textContent = who.may_act ? "" : "Signed in as " + (who.name || "this token") +
      ", a " + who.role + ": you may read, not act.";
    applyRoles();
    return who;
  }

  async function signIn() {
    const out = document.getElementById("action-result");
    const typed = document.getElementById("token").value.trim();
    if (!typed) { document.getElementById("token").focus(); return; }
    token = typed;
    document.getElementById("token").value = "";
    showToken();
    const w = await whoami();
    if (w && w.refused) {
      out.className = "refused";
      out.textContent = "Sign-in refused (" + w.refused + "): " + w.error;
      document.getElementById("token").focus();
    }
  }

  let warned = null;

  async function act(button) {
    const action = button.value;
    const out = document.getElementById("action-result");
    const form = document.getElementById("action-form");
    const reason = document.getElementById("reason").value.trim();
    const typed = document.getElementById("token").value.trim();
    if (typed) {
      token = typed;
      document.getElementById("token").value = "";
      const w = await whoami();
      if (w && !w.refused && (!w.may_act || !allowed(button.dataset.needs, w))) return;
    }
    const payload = {};
    if (reason) payload.reason = reason;
    if (action === "abort") {
      const typedName = document.getElementById("abort-confirm").value.trim();
      if (typedName !== name) {
        document.getElementById("abort-row").hidden = false;
        out.className = "refused";
        out.textContent = "Not sent: Abort moves every slice back to the old broker at once. Type the migration's name (" +
          name + ") in the field above, then click Abort again.";
        document.getElementById("abort-confirm").focus();
        return;
      }
    }
    if (action === "resume" && button.dataset.warn && warned !== button.dataset.warn) {
      warned = button.dataset.warn;
      out.className = "warning";
      out.textContent = button.dataset.warn;
      return;
    }
    if (action === "rollback") payload.pause = document.getElementById("rollback-pause").checked;
    if (action === "advance" && form.dataset.confirm === "true") {
      const confirm = document.getElementById("confirm").value.trim();
      if (confirm !== name) {
        out.className = "refused";
        out.textContent = "Not sent: advancing enters complete, the point of no return; type the migration's name (" + name + ") to confirm.";
        document.getElementById("confirm").focus();
        return;
      }
      payload.confirm = confirm;
    }
    const headers = { "Content-Type": "application/json" };
    if (token !== null) headers.Authorization = "Bearer " + token;
    out.className = "";
    out.textContent = action + "…";
    let r, answer;
    try {
      r = await fetch("/v1/migrations/" + encodeURIComponent(name) + "/" + action,
        { method: "POST", headers, body: JSON.stringify(payload), cache: "no-store" });
      answer = await r.json().catch(() => ({}));
    } catch (e) {
      out.className = "refused";
      out.textContent = action + " not sent: " + e.message;
      return;
    }
    if (r.status === 401 || r.status === 403) {
      // Refused for the credential (missing, wrong) or for what it may do (a viewer, an
      // operator entering complete): whoami tells which. A token that still answers is kept and
      // its holder still named; one that does not is forgotten, and nothing names anyone.
      const w = await whoami();
      const kept = token !== null && w && !w.refused;
      out.className = "refused";
      out.textContent = action + " refused (" + r.status + "): " + (answer.console || answer.error || "") +
        (kept ? " Your token is kept (" + (w.name || "the shared token") + ", " + w.role + ")." :
          (form.dataset.proxy === "true" ? "" : " Enter the API token."));
      if (!kept && form.dataset.proxy !== "true") document.getElementById("token").focus();
      return;
    }
    showToken();
    if (!r.ok) {
      const blockers = Array.isArray(answer.blockers) ? " " + answer.blockers.join("; ") : "";
      out.className = "refused";
      out.textContent = action + " refused (" + r.status + "): " + (answer.console || answer.error || "") + blockers;
      return;
    }
    const a = answer.applied || answer;
    out.className = "applied";
    out.textContent = action + " applied" + (a && a.from ? ": " + a.from + " → " + a.to : "") + "." +
      (action === "resume" && a && a.earliest_advance_at
        ? " It can advance at " + a.earliest_advance_at + " at the earliest: its minimum time and for: count from this resume."
        : "");
    document.getElementById("reason").value = "";
    document.getElementById("abort-confirm").value = "";
    document.getElementById("abort-row").hidden = true;
    warned = null;
    // The page catches up on its own: a click on the next action is not dropped while the
    // charts redraw (busy covers the action's request only).
    refresh();
  }

  function wire(form) {
    // Enter in a field sends nothing: an action is always the button the person chose.
    form.addEventListener("keydown", ev => {
      if (ev.key === "Enter" && ev.target instanceof HTMLInputElement) ev.preventDefault();
    });
    form.addEventListener("submit", async ev => {
      ev.preventDefault();
      if (busy) return;
      busy = true;
      try { if (ev.submitter) await act(ev.submitter); } finally { busy = false; }
    });
    document.getElementById("forget").addEventListener("click", () => {
      signedOut(); document.getElementById("token").focus();
    });
    document.getElementById("sign-in").addEventListener("click", signIn);
    showToken();
    if (form.dataset.proxy === "true") whoami();
  }

  if (page === "migration") {
    // No form: a viewer named by the proxy, who may not act.
    const form = document.getElementById("action-form");
    if (form) wire(form);
    drawCharts();
    follow();
    setInterval(refresh, 5000);
  } else if (page === "fleet") {
    setInterval(refresh, 5000);
  }
})();

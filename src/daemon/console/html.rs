//! The console's pages as HTML text: everything that came from a plan, a person or a source
//! (names, reasons, evidence) goes through [`esc`].

use std::fmt::Write;

use super::gate_data::GateData;
use super::model::{Charts, Detail, FleetRow, Place, Serving, human, when};
use crate::daemon::auth::Role;
use crate::plan::round_value;

/// `text` safe inside HTML text and inside a double-quoted attribute.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A text from a source, a person or the store (a reason, an actor, an error, evidence) as
/// shown: the one text rule ([`crate::outgoing::text`]: URL credentials masked, no control
/// character, at most a stored reason's length), then [`esc`]. `Block` keeps its lines.
pub fn shown(text: &str, shape: crate::outgoing::Shape) -> String {
    esc(&crate::outgoing::text(
        text,
        &crate::outgoing::Secrets::none(),
        shape,
        crate::outgoing::REASON_MAX,
    ))
}

/// [`shown`] on one line.
fn said(text: &str) -> String {
    shown(text, crate::outgoing::Shape::Line)
}

/// A name as a path segment of `/migrations/{name}` (or a query value).
pub fn path_segment(name: &str) -> String {
    super::gate_data::encode(name)
}

fn head(title: &str, body_attrs: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <title>{} · queue-migrate</title>\n\
         <link rel=\"stylesheet\" href=\"/console/console.css\">\n</head>\n<body {body_attrs}>\n\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\n",
        esc(title)
    )
}

fn header(s: &Serving) -> String {
    let role = match (s.leader, s.read_only) {
        (_, true) => "read-only API",
        (true, false) => "active",
        (false, false) => "standing by",
    };
    format!(
        "<header class=\"top\"><a class=\"brand\" href=\"/\">queue-migrate</a>\
         <span class=\"leader\" id=\"leader\" data-leader=\"{}\">controller <b>{}</b> · {role}</span></header>\n",
        s.leader,
        esc(&s.holder)
    )
}

const FOOT: &str = "<script src=\"/console/console.js\"></script>\n</body>\n</html>\n";

pub fn error(message: &str) -> String {
    format!(
        "{}<main id=\"main\"><h1>Not shown</h1><p class=\"error\">{}</p><p><a href=\"/\">All migrations</a></p></main>\n</body>\n</html>\n",
        head("error", ""),
        said(message)
    )
}

fn badge(class: &str, text: &str) -> String {
    format!("<span class=\"badge {class}\">{text}</span>")
}

fn step_text(step: Option<usize>) -> String {
    step.map_or_else(|| "–".into(), |s| s.to_string())
}

/// The fleet: every migration, its phase and step, slices on the new broker, paused or
/// breached, and who serves.
pub fn fleet(s: &Serving, rows: &[FleetRow], failed: &[(String, String)]) -> String {
    let mut out = head("migrations", "data-page=\"fleet\"");
    out.push_str(&header(s));
    out.push_str("<main id=\"main\">\n<h1>Migrations</h1>\n");
    if rows.is_empty() && failed.is_empty() {
        out.push_str("<p>No migrations in this store yet (<code>migrate init PLAN</code>).</p>\n");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table class=\"fleet\">\n<caption class=\"sr\">Every migration of this store</caption>\n\
             <thead><tr><th scope=\"col\">Migration</th><th scope=\"col\">Phase</th><th scope=\"col\">Step</th>\
             <th scope=\"col\">Slices on the new broker</th><th scope=\"col\">State</th></tr></thead>\n<tbody>\n",
        );
        for r in rows {
            let v = &r.view;
            let mut flags = String::new();
            if v.paused {
                flags.push_str(&badge("paused", "paused"));
            }
            if r.breached {
                flags.push_str(&badge("fail", "breached"));
            }
            if !v.routing_published {
                flags.push_str(&badge("hold", "not published"));
            }
            // Where it stands, in the colour of what it needs: never a green "running" for a
            // migration that is complete, blind or waiting on a person.
            flags.push_str(&standing_pill(&v.standing));
            let _ = writeln!(
                out,
                "<tr data-migration=\"{name}\"><th scope=\"row\"><a href=\"/migrations/{path}\">{name}</a></th>\
                 <td class=\"phase\">{state}</td><td class=\"step\">{step}</td>\
                 <td><progress max=\"{total}\" value=\"{moved}\" aria-label=\"{moved} of {total} slices on the new broker\">{moved}/{total}</progress> \
                 <span class=\"num\">{moved}/{total}</span></td><td class=\"flags\">{flags}</td></tr>",
                name = esc(&v.migration),
                path = path_segment(&v.migration),
                state = esc(&v.state),
                step = step_text(v.step),
                total = v.routing.slices_total,
                moved = v.routing.slices_migrated,
            );
        }
        for (name, e) in failed {
            let _ = writeln!(
                out,
                "<tr><th scope=\"row\">{}</th><td colspan=\"4\" class=\"error\">{}</td></tr>",
                esc(name),
                said(e)
            );
        }
        out.push_str("</tbody></table></div>\n");
    }
    out.push_str("<p class=\"updated\" id=\"updated\" aria-live=\"polite\"></p>\n</main>\n");
    out.push_str(FOOT);
    out
}

/// The standing's pill and sentence, in the colour of what it needs.
fn standing_pill(s: &crate::standing::StandingView) -> String {
    let class = match s.standing.kind() {
        "moving" => "ok",
        "waiting" | "soaking" => "hold",
        "blocked" | "blind" | "aborted" => "fail",
        "needs_person" | "not_driven" => "paused",
        _ => "done",
    };
    format!(
        "<span class=\"standing\" data-standing=\"{kind}\">{pill} <span class=\"sentence\">{sentence}</span></span>",
        kind = s.standing.kind(),
        pill = badge(class, s.standing.label()),
        sentence = esc(&s.sentence),
    )
}

fn verdict_class(verdict: &str) -> &'static str {
    match verdict {
        "pass" => "ok",
        "fail" => "fail",
        _ => "hold",
    }
}

/// One migration: where it stands, the actions (at the top), ladder, gates (and a chart each),
/// journal, routing document.
pub fn migration(s: &Serving, d: &Detail) -> String {
    let v = &d.view;
    let mut out = head(
        &v.migration,
        &format!(
            "data-page=\"migration\" data-migration=\"{}\" data-generation=\"{}\"",
            esc(&v.migration),
            v.routing.generation
        ),
    );
    out.push_str(&header(s));
    out.push_str("<main id=\"main\">\n<div id=\"live-head\">");
    out.push_str(&live_head(d));
    out.push_str("</div>\n");
    out.push_str(&actions(s, d));
    out.push_str("<div id=\"live\">");
    out.push_str(&migration_main(d));
    out.push_str("</div>\n</main>\n");
    out.push_str(FOOT);
    out
}

/// The migration's name and summary: what a refresh replaces above the actions.
fn live_head(d: &Detail) -> String {
    let v = &d.view;
    let mut out = String::new();
    let mut flags = String::new();
    if v.paused {
        flags.push_str(&badge("paused", "paused"));
    }
    if d.breached {
        flags.push_str(&badge("fail", "breached"));
    }
    let _ = writeln!(
        out,
        "<p class=\"crumbs\"><a href=\"/\">Migrations</a> /</p><h1>{name}</h1>\n\
         <p class=\"summary\" id=\"summary\" data-state=\"{state_full}\" data-paused=\"{paused}\">\
         phase <b id=\"phase\">{state}</b> · step <b id=\"step\">{step}</b> · \
         <span class=\"num\">{moved}/{total}</span> slices on the new broker · version {version} {flags}</p>\n\
         <p class=\"standing-line\" id=\"standing\">{standing}</p>",
        name = esc(&v.migration),
        state_full = esc(&format!(
            "{}{}",
            v.state,
            v.step.map(|s| format!("[{s}]")).unwrap_or_default()
        )),
        paused = v.paused,
        state = esc(&v.state),
        step = step_text(v.step),
        moved = v.routing.slices_migrated,
        total = v.routing.slices_total,
        version = v.version,
        standing = standing_pill(&v.standing),
    );
    if let Some(e) = &v.publish_error {
        let _ = writeln!(out, "<p class=\"error\">Publisher behind: {}</p>", said(e));
    }
    out
}

/// A time as a person reads it: `2026-11-30 01:59:13 UTC`.
fn readable(ms: i64) -> String {
    when(ms).replace('T', " ").replace('Z', " UTC")
}

/// A gate's query, collapsed, and its "open in Prometheus" link.
fn query_html(data: Option<&GateData>) -> String {
    let Some(g) = data else {
        return String::new();
    };
    let link = g
        .link
        .as_ref()
        .map(|l| {
            format!(
                " <a class=\"prom\" href=\"{}\" target=\"_blank\" rel=\"noopener noreferrer\">open in Prometheus</a>",
                esc(l)
            )
        })
        .unwrap_or_default();
    format!(
        "<details class=\"query\"><summary>query <span class=\"muted\">({})</span></summary><pre><code>{}</code></pre></details>{link}",
        said(&g.source),
        esc(&g.query)
    )
}

/// What a refresh replaces below the actions.
fn migration_main(d: &Detail) -> String {
    let mut out = String::new();
    ladder_section(&mut out, d);
    gates_section(&mut out, d);
    journal_section(&mut out, d);
    routing_section(&mut out, d);
    producers_section(&mut out, d);
    out
}

/// The producers that lag behind the step's generation, by id, with the generation each applied
/// (ids went through the outgoing rule at intake; escaped here as every text).
fn producers_section(out: &mut String, d: &Detail) {
    let Some(p) = &d.producers else { return };
    let _ = write!(
        out,
        "<section aria-labelledby=\"producers-h\"><h2 id=\"producers-h\">Producers</h2>\n\
         <p id=\"producers\">{} seen on the routing long-poll in the last {}; {} behind generation {}</p>",
        p.seen.len(),
        esc(&p.window),
        p.lagging.len(),
        p.generation
    );
    if !p.lagging.is_empty() {
        out.push_str("<ul class=\"lagging\">");
        for f in &p.lagging {
            let _ = write!(out, "<li>{} at {}</li>", esc(&f.producer), f.applied);
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>\n");
}

/// The ladder: a step the migration was in shows its charts when chosen.
fn ladder_section(out: &mut String, d: &Detail) {
    let v = &d.view;
    out.push_str("<section aria-labelledby=\"ladder-h\"><h2 id=\"ladder-h\">Ladder</h2>\n<ol class=\"ladder\">");
    for r in &d.rungs {
        let (class, current) = match r.at {
            Place::Done => ("done", ""),
            Place::Here => ("here", " aria-current=\"step\""),
            Place::Ahead => ("ahead", ""),
        };
        let selected = if r.selected { " selected" } else { "" };
        let rung = format!(
            "<span class=\"rung\">{}</span> <span class=\"slices\">{} slices</span>",
            esc(&r.state),
            r.slices
        );
        let rung = if r.visited && !r.selected {
            format!(
                "<a href=\"?step={}\" title=\"Show the recorded values of {}\">{rung}</a>",
                path_segment(&r.state),
                esc(&r.state)
            )
        } else {
            rung
        };
        let _ = write!(
            out,
            "<li class=\"{class}{selected}\" data-state=\"{}\"{current}>{rung}</li>",
            esc(&r.state)
        );
    }
    out.push_str("</ol>\n");
    if let Some((left, min)) = d.min_left {
        let _ = writeln!(
            out,
            "<p id=\"min-left\">Minimum time in this step: {} · left: <b>{}</b> (entered {})</p>",
            human(min),
            if left == 0 { "met".into() } else { human(left) },
            esc(&v.entered_at)
        );
    }
    out.push_str("</section>\n");
}

/// The gates of the step, with the charts of the step the ladder chose.
fn gates_section(out: &mut String, d: &Detail) {
    let v = &d.view;
    out.push_str("<section aria-labelledby=\"gates-h\"><h2 id=\"gates-h\">Gates</h2>\n");
    if v.gates.is_empty() {
        out.push_str("<p>No gates in this state.</p>\n");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table class=\"gates\" id=\"gates\">\n\
             <thead><tr><th scope=\"col\">Gate</th><th scope=\"col\">Kind</th><th scope=\"col\">Verdict</th>\
             <th scope=\"col\">Value</th><th scope=\"col\">Threshold</th><th scope=\"col\">Reason</th></tr></thead>\n<tbody>\n",
        );
        for ((g, t), data) in v.gates.iter().zip(&d.thresholds).zip(&d.gate_data) {
            let verdict = g.verdict.as_str();
            let _ = writeln!(
                out,
                "<tr data-gate=\"{name}\" data-kind=\"{kind}\"><th scope=\"row\">{name}{query}</th><td>{kind}</td>\
                 <td><span class=\"badge {class} verdict\">{upper}</span></td>\
                 <td class=\"num value\" title=\"{exact}\">{value}</td><td class=\"num\">{threshold}</td>\
                 <td class=\"reason\">{reason}{at}</td></tr>",
                name = said(&g.name),
                query = query_html(data.as_ref()),
                kind = esc(g.kind.as_str()),
                class = verdict_class(verdict),
                upper = g.verdict.label(),
                exact = g.value.map(|x| x.to_string()).unwrap_or_default(),
                value = g
                    .value
                    .map_or_else(|| "–".into(), |x| esc(&round_value(x, *t)))
                    + &largest_html(g),
                threshold = t.map(|t| esc(&t.text())).unwrap_or_else(|| "–".into()),
                reason = said(&g.reason),
                at = g
                    .evaluated_at
                    .as_ref()
                    .map(|a| {
                        // Its age as of the page (issue 56): a stale reading shows it.
                        let age = g.age_ms.map_or_else(String::new, |ms| {
                            format!(", {} ago", crate::time::human_ms(ms))
                        });
                        format!(" <span class=\"at\">({}{})</span>", esc(a), esc(&age))
                    })
                    .unwrap_or_default(),
            );
        }
        out.push_str("</tbody></table></div>\n");
    }
    out.push_str(&charts(&d.charts));
    out.push_str("</section>\n");
}

/// A `kafka_lag` gate's largest partition lag under its value (issue 57): `max 900 on
/// orders/3`; empty for the other gates.
fn largest_html(g: &crate::controller::GateView) -> String {
    g.largest_partition
        .as_ref()
        .map(|l| format!(" <span class=\"max\">({})</span>", said(&l.text())))
        .unwrap_or_default()
}

/// The journal, newest first, a page at a time.
fn journal_section(out: &mut String, d: &Detail) {
    out.push_str(
        "<section aria-labelledby=\"journal-h\"><h2 id=\"journal-h\">Journal</h2>\n<div class=\"scroll\"><table class=\"journal\" id=\"journal\">\n\
         <thead><tr><th scope=\"col\">#</th><th scope=\"col\">At</th><th scope=\"col\">Command</th><th scope=\"col\">From → to</th>\
         <th scope=\"col\">Actor</th><th scope=\"col\">Reason</th><th scope=\"col\">Evidence</th></tr></thead>\n<tbody>\n",
    );
    for e in d.journal.iter().rev() {
        let _ = writeln!(
            out,
            "<tr data-seq=\"{seq}\"><td class=\"num\">{seq}</td><td class=\"at\">{at}</td><td class=\"command\">{command}{forced}</td>\
             <td>{from}{fp} → {to}{tp}</td><td class=\"actor\">{actor}</td><td class=\"reason\">{reason}</td><td class=\"evidence\">{evidence}</td></tr>",
            seq = e.seq,
            at = esc(&e.at),
            command = esc(&e.command),
            forced = if e.forced { " (forced)" } else { "" },
            from = esc(&e.from),
            fp = if e.from_paused { " (paused)" } else { "" },
            to = esc(&e.to),
            tp = if e.to_paused { " (paused)" } else { "" },
            actor = said(&e.actor),
            reason = e.reason.as_deref().map_or_else(|| "–".into(), said),
            evidence = evidence(&e.evidence),
        );
    }
    out.push_str("</tbody></table></div>\n");
    // The journal is paged: the newest entries, then older ones a page at a time.
    let path = path_segment(&d.view.migration);
    if let Some(before) = d.older {
        let _ = writeln!(
            out,
            "<p class=\"pager\"><a href=\"/migrations/{path}?before={before}\" rel=\"next\">Older entries</a></p>"
        );
    }
    if d.paged_back {
        let _ = writeln!(
            out,
            "<p class=\"pager\"><a href=\"/migrations/{path}\">Newest entries</a></p>"
        );
    }
    out.push_str("</section>\n");
}

/// The routing document, and when the page was read.
fn routing_section(out: &mut String, d: &Detail) {
    let v = &d.view;
    let _ = writeln!(
        out,
        "<section aria-labelledby=\"routing-h\"><h2 id=\"routing-h\">Routing document</h2>\n\
         <p>Generation {}{}</p><pre id=\"routing\">{}</pre></section>",
        v.routing.generation,
        if v.routing_published {
            ", published"
        } else {
            ", <b>not yet published</b>"
        },
        esc(&serde_json::to_string_pretty(&v.routing).unwrap_or_default())
    );
    let _ = writeln!(
        out,
        "<p class=\"updated\" id=\"updated\" aria-live=\"polite\">Read {}</p>",
        when(crate::time::now_ms())
    );
}

/// A chart per gate of the step the ladder chose.
fn charts(c: &Charts) -> String {
    let mut out = String::new();
    // A past step: every visit its charts plot (they plot every evaluation of the step).
    let visits: Vec<String> = c
        .visits
        .iter()
        .map(|&(from, to)| format!("from {} to {}", readable(from), readable(to)))
        .collect();
    let span = match (c.current, visits.len()) {
        (true, _) => " (this phase)".to_string(),
        (false, 0) => String::new(),
        (false, 1) => format!(" ({})", visits[0]),
        (false, n) => format!(" ({n} visits: {})", visits.join("; ")),
    };
    let _ = writeln!(
        out,
        "<h3 id=\"charts-h\">Recorded values in <span id=\"charts-state\">{}</span>{span}</h3>",
        esc(&c.state)
    );
    if c.gates.is_empty() {
        out.push_str("<p class=\"muted\">No gates in this step.</p>\n");
        return out;
    }
    let _ = writeln!(
        out,
        "<div class=\"charts\" id=\"charts\" data-state=\"{}\" data-current=\"{}\">",
        esc(&c.state),
        c.current
    );
    for g in &c.gates {
        let t = g.threshold;
        let _ = writeln!(
            out,
            "<figure class=\"chart\" data-gate=\"{name}\" data-kind=\"{kind}\"{thr}>\
             <figcaption>{name} <span class=\"kind\">{kind}</span>{cap}</figcaption>\
             <div class=\"plot\"><p class=\"muted\">Loading the recorded values…</p></div>{query}</figure>",
            name = esc(&g.name),
            kind = esc(g.kind.as_str()),
            thr = t
                .map(|t| format!(
                    " data-op=\"{}\" data-threshold=\"{}\"",
                    esc(t.op.as_str()),
                    t.value
                ))
                .unwrap_or_default(),
            cap = t
                .map(|t| format!(" <span class=\"thr\">pass if {}</span>", esc(&t.text())))
                .unwrap_or_default(),
            query = query_html(g.data.as_ref()),
        );
    }
    out.push_str("</div>\n");
    out
}

/// A JSON value in one cell: a time for `*_ms`, text as [`shown`] (at most a reason's length:
/// the journal page stays small), lists joined.
fn cell(key: &str, v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "–".into(),
        Value::Number(n) if key.ends_with("_ms") => {
            n.as_i64().map_or_else(|| esc(&n.to_string()), readable)
        }
        Value::String(t) if t.contains('\n') => {
            format!("<pre>{}</pre>", shown(t, crate::outgoing::Shape::Block))
        }
        Value::String(t) => said(t),
        Value::Array(items) if items.iter().all(Value::is_string) => said(
            &items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("; "),
        ),
        other => said(&other.to_string()),
    }
}

/// A transition's evidence: the gate readings as a table with readable times, the rest as a
/// list; collapsed.
fn evidence(e: &serde_json::Value) -> String {
    let Some(map) = e.as_object().filter(|m| !m.is_empty()) else {
        return "–".into();
    };
    let mut body = String::new();
    let gates = map.get("gates").and_then(serde_json::Value::as_array);
    if let Some(gates) = gates.filter(|g| !g.is_empty()) {
        body.push_str(
            "<table class=\"evidence\"><thead><tr><th scope=\"col\">Gate</th><th scope=\"col\">Kind</th>\
             <th scope=\"col\">Verdict</th><th scope=\"col\">Value</th><th scope=\"col\">Reason</th>\
             <th scope=\"col\">Samples</th><th scope=\"col\">Evaluated</th></tr></thead><tbody>",
        );
        for g in gates {
            let f = |k: &str| cell(k, g.get(k).unwrap_or(&serde_json::Value::Null));
            let _ = write!(
                body,
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"at\">{}</td></tr>",
                f("name"),
                f("kind"),
                f("verdict").to_uppercase(),
                f("value"),
                f("reason"),
                f("samples"),
                f("evaluated_at_ms"),
            );
        }
        body.push_str("</tbody></table>");
    }
    let rest: Vec<(&String, &serde_json::Value)> = map
        .iter()
        .filter(|(k, v)| {
            *k != "gates" && !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty())
        })
        .collect();
    if !rest.is_empty() {
        body.push_str("<dl class=\"evidence\">");
        for (k, v) in rest {
            let _ = write!(body, "<dt>{}</dt><dd>{}</dd>", esc(k), cell(k, v));
        }
        body.push_str("</dl>");
    }
    if body.is_empty() {
        return "–".into();
    }
    let summary = match gates.map(Vec::len) {
        Some(1) => "1 gate".to_string(),
        Some(n) if n > 1 => format!("{n} gates"),
        _ => "show".to_string(),
    };
    format!("<details><summary>{summary}</summary>{body}</details>")
}

/// The actions, at the top: each button disabled with the reason when it cannot apply, what to
/// know before clicking under it; the reason, the token (asked once), the names asked for the
/// point of no return and for an abort. A viewer (named by the proxy) sees none.
fn actions(s: &Serving, d: &Detail) -> String {
    let name = esc(&d.view.migration);
    let mut out = String::from(
        "<section class=\"actions\" id=\"actions\" aria-labelledby=\"actions-h\"><h2 id=\"actions-h\">Actions</h2>\n",
    );
    if let Some(r) = s.reader.as_ref().filter(|r| r.role == Role::Viewer) {
        let _ = writeln!(
            out,
            "<p id=\"viewer-note\">Signed in as <b>{}</b>, a viewer: you may read, not act.</p></section>",
            esc(r.name.as_deref().unwrap_or("?"))
        );
        return out;
    }
    let signed_in = s
        .reader
        .as_ref()
        .map(|r| {
            format!(
                "<p id=\"signed-in\">Signed in as <b>{}</b> ({}).</p>",
                esc(r.name.as_deref().unwrap_or("?")),
                r.role.as_str()
            )
        })
        .unwrap_or_else(|| "<p id=\"signed-in\" hidden></p>".into());
    let _ = write!(
        out,
        "<form id=\"action-form\" data-migration=\"{name}\" data-confirm=\"{ponr}\" data-proxy=\"{proxy}\" novalidate>\n\
         {signed_in}\n<p id=\"viewer-note\" hidden></p>\n\
         <div id=\"token-row\"{token_hidden}><label for=\"token\">API token <span class=\"muted\">(kept in this page's memory only)</span></label>\n\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" maxlength=\"4096\"> \
         <button type=\"button\" id=\"sign-in\">Sign in</button></div>\n\
         <p id=\"token-held\" class=\"muted\" hidden>Token held in this page's memory. <button type=\"button\" id=\"forget\">Forget it</button></p>\n\
         <div id=\"act-fields\">\n\
         <label for=\"reason\">Reason <span class=\"muted\">(journaled; roll back and abort need one)</span></label>\n\
         <input id=\"reason\" name=\"reason\" type=\"text\" autocomplete=\"off\" maxlength=\"1000\">\n\
         <div id=\"confirm-row\"{confirm_hidden}><label for=\"confirm\">Advancing enters <b>complete</b>, the point of no return: type the migration's name, <code>{name}</code></label>\n\
         <input id=\"confirm\" name=\"confirm\" type=\"text\" autocomplete=\"off\" maxlength=\"300\"></div>\n\
         <div id=\"abort-row\" hidden><label for=\"abort-confirm\">Abort moves every slice back to the old broker at once: type the migration's name, <code>{name}</code>, then Abort again</label>\n\
         <input id=\"abort-confirm\" name=\"abort-confirm\" type=\"text\" autocomplete=\"off\" maxlength=\"300\"></div>\n\
         <p id=\"rollback-pause-row\"><label class=\"inline\"><input type=\"checkbox\" id=\"rollback-pause\" checked> Roll back <b>and pause</b> <span class=\"muted\">(the daemon does not advance again by itself)</span></label></p>\n\
         <div class=\"buttons\" id=\"buttons\">{buttons}</div>\n\
         <p id=\"action-result\" role=\"status\" aria-live=\"polite\"></p>\n</div></form></section>\n",
        ponr = d.point_of_no_return,
        proxy = s.reader.is_some(),
        token_hidden = if s.reader.is_some() { " hidden" } else { "" },
        confirm_hidden = if d.point_of_no_return { "" } else { " hidden" },
        buttons = buttons(d),
    );
    out
}

/// The five buttons, each with why it is disabled or what to know before clicking.
fn buttons(d: &Detail) -> String {
    let mut out = String::new();
    // One reason for all (complete, a read-only daemon, a standby): said once.
    let first = d.actions.first().and_then(|a| a.why_not.as_ref());
    let shared = first.filter(|w| d.actions.iter().all(|a| a.why_not.as_ref() == Some(*w)));
    if let Some(w) = shared {
        let _ = write!(out, "<p class=\"why-all\" id=\"why-all\">{}</p>", esc(w));
    }
    for a in &d.actions {
        let (why, class) = match (&a.why_not, &a.note) {
            (Some(w), _) if shared.is_some() => (w.as_str(), "why disabled sr"),
            (Some(w), _) => (w.as_str(), "why disabled"),
            (None, Some(n)) => (n.as_str(), "why"),
            (None, None) => ("", "why"),
        };
        let _ = write!(
            out,
            "<div class=\"action\"><button type=\"submit\" value=\"{id}\" id=\"do-{id}\"{danger}{disabled}{warn} data-needs=\"{needs}\" data-needs-why=\"{needs_why}\" aria-describedby=\"why-{id}\">{label}</button>\
             <p class=\"{class}\" id=\"why-{id}\">{why}</p></div>",
            id = a.action,
            danger = if a.action == "abort" {
                " class=\"danger\""
            } else {
                ""
            },
            disabled = if a.why_not.is_some() { " disabled" } else { "" },
            warn = a
                .warn
                .as_ref()
                .map(|w| format!(" data-warn=\"{}\"", esc(w)))
                .unwrap_or_default(),
            label = a.label,
            needs = a.needs.as_str(),
            needs_why = esc(super::actions::role_words(a.needs)),
            why = esc(why),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{Charts, Detail, Place, RungView, Serving};
    use super::*;
    use crate::controller::views::StatusView;

    fn detail(state: &str, point_of_no_return: bool) -> Detail {
        let routing = serde_json::from_value(serde_json::json!({
            "migration": "orders", "generation": 9, "state": state, "step": null,
            "slices_total": 8, "slices_migrated": 8, "consume": ["new"], "paused": false,
            "brokers": { "old": "rabbitmq", "new": "nats" }, "updated_at": "2026-11-30T00:00:00Z"
        }))
        .unwrap_or_else(|e| panic!("routing: {e}"));
        Detail {
            view: StatusView {
                migration: "orders".into(),
                state: state.into(),
                step: None,
                paused: false,
                version: 9,
                entered_at: "2026-11-30T00:00:00Z".into(),
                routing,
                routing_published: true,
                publish_error: None,
                plan_error: None,
                gates: Vec::new(),
                standing: crate::standing::Standing::Complete.view(),
                pause: None,
            },
            thresholds: Vec::new(),
            gate_data: Vec::new(),
            rungs: vec![RungView {
                state: state.into(),
                slices: 8,
                at: Place::Here,
                visited: true,
                selected: true,
            }],
            min_left: None,
            journal: Vec::new(),
            older: None,
            paged_back: false,
            breached: false,
            point_of_no_return,
            actions: Vec::new(),
            charts: Charts {
                state: state.into(),
                current: true,
                visits: Vec::new(),
                gates: Vec::new(),
            },
            producers: None,
        }
    }

    /// Issue 58: the page lists the producers that lag, by id with their generation, escaped.
    #[test]
    fn the_page_lists_the_lagging_producers_escaped() {
        let mut d = detail("slices", false);
        let f = |producer: &str, applied| crate::indicators::followers::Follower {
            producer: producer.into(),
            applied,
            seen_ms: 0,
        };
        d.producers = Some(crate::daemon::followers_view::ProducersView {
            generation: 9,
            window: "2m".into(),
            seen: vec![f("a", 9), f("<b>", 7)],
            lagging: vec![f("<b>", 7)],
            tracked: 2,
            cap: 10,
            evicted: 0,
        });
        let html = migration_main(&d);
        assert!(
            html.contains("2 seen on the routing long-poll in the last 2m; 1 behind generation 9"),
            "{html}"
        );
        assert!(html.contains("<li>&lt;b&gt; at 7</li>"), "{html}");
    }

    /// Issue 57: a kafka_lag gate showed one number per gate; its largest partition's lag,
    /// and which, shows under its value (escaped as any text from a plan).
    #[test]
    fn a_kafka_lag_gate_shows_its_largest_partition_under_its_value() {
        let mut d = detail("drain", false);
        let gate = |largest_partition| crate::controller::GateView {
            phase: "drain".into(),
            name: "old topic drained".into(),
            kind: crate::plan::GateKind::Exit,
            source: "old_lag".into(),
            verdict: crate::gate::Verdict::Fail,
            value: Some(1234.0),
            reason: "r".into(),
            evaluated_at: None,
            evaluated_at_ms: None,
            age_ms: None,
            soak: None,
            cause: None,
            largest_partition,
        };
        d.view.gates = vec![
            gate(Some(crate::indicators::kafka_lag::LargestPartition {
                topic: "<orders>".into(),
                partition: 3,
                lag: 900,
            })),
            gate(None),
        ];
        d.thresholds = vec![None, None];
        d.gate_data = vec![None, None];
        let mut out = String::new();
        gates_section(&mut out, &d);
        assert!(
            out.contains("1234 <span class=\"max\">(max 900 on &lt;orders&gt;/3)</span>"),
            "{out}"
        );
        assert_eq!(out.matches("class=\"max\"").count(), 1, "{out}");
    }

    #[test]
    fn the_point_of_no_return_asks_for_the_name_and_nowhere_else() {
        let s = Serving {
            holder: "a".into(),
            leader: true,
            read_only: false,
            reader: None,
        };
        let at = migration(&s, &detail("disconnect", true));
        assert!(at.contains("data-confirm=\"true\""), "{at}");
        assert!(at.contains("<div id=\"confirm-row\">"), "{at}");
        let before = migration(&s, &detail("drain", false));
        assert!(before.contains("data-confirm=\"false\""), "{before}");
        assert!(
            before.contains("<div id=\"confirm-row\" hidden>"),
            "{before}"
        );
    }

    #[test]
    fn text_from_a_plan_or_a_person_is_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(path_segment("orders eu/1"), "orders%20eu%2F1");
    }
}

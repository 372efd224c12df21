//! The console's pages as HTML text: everything that came from a plan, a person or a source
//! (names, reasons, evidence) goes through [`esc`].

use std::fmt::Write;

use super::{Detail, FleetRow, Place, Serving, human, when};
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

/// A name as a path segment of `/migrations/{name}`.
fn path_segment(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
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
        esc(message)
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
            if flags.is_empty() {
                flags.push_str(&badge("ok", "running"));
            }
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
                esc(e)
            );
        }
        out.push_str("</tbody></table></div>\n");
    }
    out.push_str("<p class=\"updated\" id=\"updated\" aria-live=\"polite\"></p>\n</main>\n");
    out.push_str(FOOT);
    out
}

fn verdict_class(verdict: &str) -> &'static str {
    match verdict {
        "pass" => "ok",
        "fail" => "fail",
        _ => "hold",
    }
}

/// One migration: ladder, gates (and a chart each), journal, routing document, actions.
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
    out.push_str("<main id=\"main\">\n");
    out.push_str(&migration_main(d));
    out.push_str("</main>\n");
    out.push_str(&actions(s, d));
    out.push_str(FOOT);
    out
}

/// What a refresh replaces: everything but the actions (whose fields keep what was typed).
fn migration_main(d: &Detail) -> String {
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
         <span class=\"num\">{moved}/{total}</span> slices on the new broker · version {version} {flags}</p>",
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
    );
    if let Some(e) = &v.publish_error {
        let _ = writeln!(out, "<p class=\"error\">Publisher behind: {}</p>", esc(e));
    }

    // The ladder.
    out.push_str("<section aria-labelledby=\"ladder-h\"><h2 id=\"ladder-h\">Ladder</h2>\n<ol class=\"ladder\">");
    for r in &d.rungs {
        let (class, current) = match r.at {
            Place::Done => ("done", ""),
            Place::Here => ("here", " aria-current=\"step\""),
            Place::Ahead => ("ahead", ""),
        };
        let _ = write!(
            out,
            "<li class=\"{class}\"{current}><span class=\"rung\">{}</span> <span class=\"slices\">{} slices</span></li>",
            esc(&r.state),
            r.slices
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

    // The gates, and a chart each.
    out.push_str("<section aria-labelledby=\"gates-h\"><h2 id=\"gates-h\">Gates</h2>\n");
    if v.gates.is_empty() {
        out.push_str("<p>No gates in this state.</p>\n");
    } else {
        out.push_str(
            "<div class=\"scroll\"><table class=\"gates\" id=\"gates\">\n\
             <thead><tr><th scope=\"col\">Gate</th><th scope=\"col\">Kind</th><th scope=\"col\">Verdict</th>\
             <th scope=\"col\">Value</th><th scope=\"col\">Threshold</th><th scope=\"col\">Reason</th></tr></thead>\n<tbody>\n",
        );
        for (g, t) in v.gates.iter().zip(&d.thresholds) {
            let verdict = g.verdict.as_str();
            let _ = writeln!(
                out,
                "<tr data-gate=\"{name}\" data-kind=\"{kind}\"><th scope=\"row\">{name}</th><td>{kind}</td>\
                 <td><span class=\"badge {class} verdict\">{upper}</span></td>\
                 <td class=\"num value\" title=\"{exact}\">{value}</td><td class=\"num\">{threshold}</td>\
                 <td class=\"reason\">{reason}{at}</td></tr>",
                name = esc(&g.name),
                kind = esc(g.kind.as_str()),
                class = verdict_class(verdict),
                upper = verdict.to_uppercase(),
                exact = g.value.map(|x| x.to_string()).unwrap_or_default(),
                value = g
                    .value
                    .map_or_else(|| "–".into(), |x| esc(&round_value(x, *t))),
                threshold = t.map(|t| esc(&t.text())).unwrap_or_else(|| "–".into()),
                reason = esc(&g.reason),
                at = g
                    .evaluated_at
                    .as_ref()
                    .map(|a| format!(" <span class=\"at\">({})</span>", esc(a)))
                    .unwrap_or_default(),
            );
        }
        out.push_str("</tbody></table></div>\n<h3>Recorded values</h3>\n<div class=\"charts\" id=\"charts\">\n");
        for (g, t) in v.gates.iter().zip(&d.thresholds) {
            let _ = writeln!(
                out,
                "<figure class=\"chart\" data-gate=\"{name}\" data-kind=\"{kind}\"{thr}>\
                 <figcaption>{name} <span class=\"kind\">{kind}</span>{cap}</figcaption>\
                 <div class=\"plot\"><p class=\"muted\">Loading the recorded values…</p></div></figure>",
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
            );
        }
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");

    // The journal, newest first.
    out.push_str(
        "<section aria-labelledby=\"journal-h\"><h2 id=\"journal-h\">Journal</h2>\n<div class=\"scroll\"><table class=\"journal\" id=\"journal\">\n\
         <thead><tr><th scope=\"col\">#</th><th scope=\"col\">At</th><th scope=\"col\">Command</th><th scope=\"col\">From → to</th>\
         <th scope=\"col\">Actor</th><th scope=\"col\">Reason</th><th scope=\"col\">Evidence</th></tr></thead>\n<tbody>\n",
    );
    for e in d.journal.iter().rev() {
        let evidence = if e.evidence.is_null()
            || e.evidence
                .as_object()
                .is_some_and(serde_json::Map::is_empty)
        {
            "–".to_string()
        } else {
            let evidence = serde_json::to_string_pretty(&e.evidence).unwrap_or_default();
            format!(
                "<details><summary>show</summary><pre>{}</pre></details>",
                esc(&crate::outgoing::cap(&evidence, crate::outgoing::LINE_MAX))
            )
        };
        let _ = writeln!(
            out,
            "<tr data-seq=\"{seq}\"><td class=\"num\">{seq}</td><td class=\"at\">{at}</td><td class=\"command\">{command}{forced}</td>\
             <td>{from}{fp} → {to}{tp}</td><td class=\"actor\">{actor}</td><td class=\"reason\">{reason}</td><td>{evidence}</td></tr>",
            seq = e.seq,
            at = esc(&e.at),
            command = esc(&e.command),
            forced = if e.forced { " (forced)" } else { "" },
            from = esc(&e.from),
            fp = if e.from_paused { " (paused)" } else { "" },
            to = esc(&e.to),
            tp = if e.to_paused { " (paused)" } else { "" },
            actor = esc(&e.actor),
            reason = e.reason.as_deref().map_or_else(
                || "–".into(),
                |r| esc(&crate::outgoing::cap(r, crate::outgoing::REASON_MAX))
            ),
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

    // The routing document.
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
    out
}

/// The actions: a reason, the token (asked once), the name for the point of no return.
fn actions(s: &Serving, d: &Detail) -> String {
    let name = esc(&d.view.migration);
    let disabled = if s.read_only {
        "<p class=\"muted\">This API is read-only (<code>--read-only</code>): actions are refused.</p>"
    } else {
        ""
    };
    format!(
        "<section class=\"actions\" id=\"actions\" aria-labelledby=\"actions-h\"><h2 id=\"actions-h\">Actions</h2>{disabled}\n\
         <form id=\"action-form\" data-migration=\"{name}\" data-confirm=\"{ponr}\" novalidate>\n\
         <label for=\"reason\">Reason <span class=\"muted\">(journaled)</span></label>\n\
         <input id=\"reason\" name=\"reason\" type=\"text\" autocomplete=\"off\" maxlength=\"1000\">\n\
         <div id=\"token-row\"><label for=\"token\">API token <span class=\"muted\">(kept in this page's memory only)</span></label>\n\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" maxlength=\"4096\"></div>\n\
         <p id=\"token-held\" class=\"muted\" hidden>Token held in this page's memory. <button type=\"button\" id=\"forget\">Forget it</button></p>\n\
         <div id=\"confirm-row\"{confirm_hidden}><label for=\"confirm\">Advancing enters <b>complete</b>, the point of no return: type the migration's name, <code>{name}</code></label>\n\
         <input id=\"confirm\" name=\"confirm\" type=\"text\" autocomplete=\"off\" maxlength=\"300\"></div>\n\
         <div class=\"buttons\">\
         <button type=\"submit\" value=\"advance\" id=\"do-advance\">Advance</button>\
         <button type=\"submit\" value=\"rollback\" id=\"do-rollback\">Roll back</button>\
         <button type=\"submit\" value=\"pause\" id=\"do-pause\">Pause</button>\
         <button type=\"submit\" value=\"resume\" id=\"do-resume\">Resume</button>\
         <button type=\"submit\" value=\"abort\" id=\"do-abort\" class=\"danger\">Abort</button></div>\n\
         <p id=\"action-result\" role=\"status\" aria-live=\"polite\"></p>\n</form></section>\n",
        ponr = d.point_of_no_return,
        confirm_hidden = if d.point_of_no_return { "" } else { " hidden" },
    )
}

#[cfg(test)]
mod tests {
    use super::super::{Detail, Place, RungView, Serving};
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
            },
            thresholds: Vec::new(),
            rungs: vec![RungView {
                state: state.into(),
                slices: 8,
                at: Place::Here,
            }],
            min_left: None,
            journal: Vec::new(),
            older: None,
            paged_back: false,
            breached: false,
            point_of_no_return,
        }
    }

    #[test]
    fn the_point_of_no_return_asks_for_the_name_and_nowhere_else() {
        let s = Serving {
            holder: "a".into(),
            leader: true,
            read_only: false,
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

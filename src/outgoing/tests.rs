use super::*;
use proptest::prelude::*;

const ESC: char = '\u{1b}';

#[test]
fn control_characters_become_visible_escapes() {
    assert!(matches!(
        sanitize("plain ünïcode", Shape::Line),
        Cow::Borrowed(_)
    ));
    assert_eq!(
        sanitize(
            "a\nb\r\tc\u{1b}]0;title\u{7}\u{9b}\u{2028}\u{202e}",
            Shape::Line
        ),
        "a\\nb\\r\\tc\\u{1b}]0;title\\u{7}\\u{9b}\\u{2028}\\u{202e}"
    );
    assert_eq!(
        sanitize("a\nb\tc\r\u{1b}", Shape::Block),
        "a\nb\tc\\r\\u{1b}"
    );
}

#[test]
fn a_log_line_keeps_colours_and_nothing_else() {
    assert!(matches!(
        sanitize_keeping_colours("\u{1b}[2m12:00\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m x"),
        Cow::Borrowed(_)
    ));
    assert_eq!(
        sanitize_keeping_colours("\u{1b}[32mok\u{1b}[0m \u{1b}]0;pwned\u{7}\u{1b}[2K\u{1b}[8mhid"),
        "\u{1b}[32mok\u{1b}[0m \\u{1b}]0;pwned\\u{7}\\u{1b}[2K\\u{1b}[8mhid"
    );
    assert_eq!(sanitize_keeping_colours("a\nb"), "a\\nb");
}

#[test]
fn a_long_text_is_cut_with_a_note_within_the_cap() {
    assert!(matches!(cap("short", 10), Cow::Borrowed(_)));
    let long = "x".repeat(3_000_000);
    let cut = cap(&long, REASON_MAX);
    assert!(cut.len() <= REASON_MAX, "{}", cut.len());
    assert!(cut.ends_with(" bytes cut)"), "{cut}");
    let n: usize = cut
        .rsplit_once("... (")
        .and_then(|(_, n)| n.strip_suffix(" bytes cut)"))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert_eq!(
        cut.len() - cut.rsplit_once("... (").unwrap().1.len() - 5 + n,
        long.len()
    );
    assert_eq!(cap("ééé", 3), "é");
}

#[test]
fn a_url_password_is_masked_raw_decoded_and_as_basic_auth() {
    let url = "http://promuser:Pr0mP4ss%40word@127.0.0.1:9/?token=T0kenValue";
    let secrets = Secrets::of([url]);
    let basic = base64::engine::general_purpose::STANDARD.encode("promuser:Pr0mP4ss@word");
    let echoed = format!(
        "user/password promuser:Pr0mP4ss@word not accepted (header Basic {basic}), \
         raw Pr0mP4ss%40word, token T0kenValue"
    );
    let shown = secrets.redact(&echoed);
    for secret in ["Pr0mP4ss", "cm9tUDRz", &basic[..12], "T0kenValue"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("header Basic ***"), "{shown}");
}

#[test]
fn quoted_forms_of_a_password_are_masked() {
    let secrets = Secrets::of([
        "amqp://rabbit:Quot'edPassw0rd@h:5672",
        "nats://u:Dbl\"QuotedPw9@h:4222",
    ]);
    let diff = "- url: 'amqp://rabbit:Quot''edPassw0rd@h:5672'\n+ url: \"nats://u:Dbl\\\"QuotedPw9@h:4222\"";
    let shown = secrets.redact(diff);
    assert!(
        !shown.contains("edPassw0rd") && !shown.contains("QuotedPw9"),
        "{shown}"
    );
}

#[test]
fn a_webhook_path_is_its_secret() {
    let slack = "https://hooks.slack.com/services/T000/B000/XXXXSECRET";
    assert_eq!(webhook_url(slack), "https://hooks.slack.com/***");
    assert_eq!(
        webhook_url("http://u:p@127.0.0.1:9/api/webhooks/1/tok?x=1"),
        "http://***@127.0.0.1:9/***?***"
    );
    assert_eq!(webhook_url("http://127.0.0.1:9"), "http://127.0.0.1:9");
    let mut s = Secrets::none();
    s.add_webhook(slack);
    assert_eq!(
        s.redact(&format!(
            "posting to {slack} failed; path services/T000/B000/XXXXSECRET"
        )),
        "posting to https://hooks.slack.com/*** failed; path ***"
    );
    assert!(webhook_path_looks_secret(slack));
    assert!(webhook_path_looks_secret(
        "https://discord.com/api/webhooks/1/abc"
    ));
    assert!(!webhook_path_looks_secret("http://127.0.0.1:9/hook"));
    assert!(!webhook_path_looks_secret("http://127.0.0.1:9"));
}

#[test]
fn chat_text_shows_brackets_literally() {
    assert_eq!(
        chat("<!channel> <https://evil.example|approve> & more"),
        "&lt;!channel&gt; &lt;https://evil.example|approve&gt; &amp; more"
    );
    assert!(matches!(chat("plain"), Cow::Borrowed(_)));
}

fn any_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            any::<char>(),
            Just('\u{1b}'),
            Just('\n'),
            Just('\r'),
            Just('\u{9b}'),
            Just('\u{202e}'),
            Just('\u{7f}'),
        ],
        0..200,
    )
    .prop_map(|v| v.into_iter().collect())
}

proptest! {
    #[test]
    fn no_control_character_survives(t in any_text(), block in any::<bool>(), max in 0usize..300) {
        let shape = if block { Shape::Block } else { Shape::Line };
        let out = text(&t, &Secrets::none(), shape, max);
        prop_assert!(out.len() <= max);
        for c in out.chars() {
            let kept = block && matches!(c, '\n' | '\t');
            prop_assert!(kept || !is_unsafe(c), "{:?} in {:?}", c, out);
        }
        for c in sanitize_keeping_colours(&t).chars() {
            prop_assert!(c == ESC || !is_unsafe(c), "{:?}", c);
        }
    }

    #[test]
    fn the_cap_holds(t in any_text(), max in 0usize..400) {
        let out = cap(&t, max);
        prop_assert!(out.len() <= max);
        if t.len() <= max { prop_assert_eq!(out.as_ref(), t.as_str()); }
    }

    #[test]
    fn a_secret_in_any_of_its_encodings_never_survives(
        user in "[a-z]{4,8}",
        pw in "[A-Za-z0-9@:/%'\"!]{6,16}",
        before in any_text(),
        after in any_text(),
        form in 0usize..5,
    ) {
        let encoded: String = percent_encoding::utf8_percent_encode(
            &pw, percent_encoding::NON_ALPHANUMERIC).to_string();
        let url = format!("http://{user}:{encoded}@127.0.0.1:9/");
        let secrets = Secrets::of([url.as_str()]);
        let echoed = match form {
            0 => pw.clone(),
            1 => encoded.clone(),
            2 => base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}")),
            3 => pw.replace('\'', "''"),
            _ => pw.replace('\\', "\\\\").replace('"', "\\\""),
        };
        let out = text(&format!("{before}{echoed}{after}"), &secrets, Shape::Line, 100_000);
        let clean = |s: &str| sanitize(s, Shape::Line).into_owned();
        // What surrounds it may itself hold the secret's text only if the secret was there.
        prop_assume!(!clean(&before).contains(&echoed) && !clean(&after).contains(&echoed));
        prop_assert!(!out.contains(&echoed), "{:?} in {:?}", echoed, out);
    }
}

#[test]
fn a_short_webhook_path_is_no_secret_in_free_text() {
    let mut s = Secrets::none();
    s.add_webhook("http://127.0.0.1:9/hook");
    assert_eq!(s.redact("the webhook said no"), "the webhook said no");
    s.add_webhook("http://127.0.0.1:9/hook/H00kPathS3cret");
    assert_eq!(s.redact("echo H00kPathS3cret"), "echo ***");
}

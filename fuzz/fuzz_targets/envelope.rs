//! The dead-letter envelope reader: `DeadLetter::from_line` and `EnvelopeRef::parse`.
//!
//! Besides "never panics", checks:
//! - both readers accept the same lines, and when they do they agree on every field they share
//!   (classes, versions, the instants as written and in ms, the error message); so does the
//!   `Deserialize` impl of `DeadLetter` (which the object check aside reads the same way);
//! - triage's fast read (`dlq::scan::skim`) vouches only for lines the readers accept, with
//!   their values;
//! - the round trip the module documents: `to_line` writes one line (no newline) that reads back
//!   to an equal `DeadLetter` (bytes exactly, a JSON payload as a value, a lone surrogate as its
//!   six-character escape).
#![no_main]

use libfuzzer_sys::fuzz_target;
use queue_migrate::dlq::envelope::{DeadLetter, EnvelopeRef, wtf8_to_string};
use queue_migrate::dlq::scan;
use queue_migrate::time::parse_timestamp;

fuzz_target!(|data: &[u8]| {
    let by_ref = EnvelopeRef::parse(data);
    let owned = DeadLetter::from_line(data);
    let mut unescaped = Vec::new();
    let skimmed = scan::skim(data, &mut unescaped);
    let (view, dl) = match (by_ref, owned) {
        (Ok(view), Ok(dl)) => (view, dl),
        (Err(a), Err(b)) => {
            assert!(skimmed.is_none(), "the scan vouches for {data:?}, which the readers refuse");
            assert_eq!(a, b, "the two readers reject {data:?} differently");
            let _ = a.to_string();
            return;
        }
        (a, b) => panic!("the readers disagree on {data:?}: {a:?} / {b:?}"),
    };

    if let Some(f) = skimmed {
        assert_eq!(f.error_class, view.error_class());
        assert_eq!(f.consumer_version, view.consumer_version());
        assert_eq!(f.error_message, view.error_message_wtf8());
        assert_eq!(f.first_attempt_at, view.first_attempt_at());
        assert_eq!(f.first_attempt_ms, view.first_attempt_ms());
        assert_eq!(f.dead_lettered_ms, view.dead_lettered_ms());
    }

    // Shared fields agree.
    assert_eq!(view.error_class(), dl.error_class);
    assert_eq!(view.consumer_version(), dl.consumer_version);
    assert_eq!(view.first_attempt_at(), dl.first_attempt_at);
    assert_eq!(view.dead_lettered_at(), dl.dead_lettered_at);
    assert_eq!(wtf8_to_string(view.error_message_wtf8()), dl.error_message);
    if let Ok(text) = std::str::from_utf8(view.error_message_wtf8()) {
        assert_eq!(text, dl.error_message);
    }
    assert_eq!(Some(view.first_attempt_ms()), dl.first_attempt_ms());
    assert_eq!(Some(view.dead_lettered_ms()), dl.dead_lettered_ms());
    assert_eq!(
        parse_timestamp(view.first_attempt_at()),
        Ok(view.first_attempt_ms())
    );
    assert_eq!(
        parse_timestamp(view.dead_lettered_at()),
        Ok(view.dead_lettered_ms())
    );
    assert_eq!(view.to_dead_letter(), dl);

    // The serde path reads the same envelope.
    let via_serde: DeadLetter = serde_json::from_slice(data)
        .unwrap_or_else(|e| panic!("from_line accepts {data:?} but Deserialize does not: {e}"));
    assert_eq!(via_serde, dl);

    // Written and read back: the same envelope.
    let line = dl.to_line();
    assert!(
        !line.is_empty() && !line.contains('\n'),
        "to_line wrote {line:?}"
    );
    let back = DeadLetter::from_line(line.as_bytes())
        .unwrap_or_else(|e| panic!("to_line of {dl:?} wrote {line:?}, which does not read: {e}"));
    assert_eq!(back, dl, "round trip through {line:?}");
});

//! What the dead-letter tests share.

/// An export line: class `c`, version `1`, one attempt, payload `p`.
pub(crate) fn envelope_line(msg: &str, first: &str, dead: &str) -> String {
    serde_json::json!({
        "payload": "p", "errorClass": "c", "errorMessage": msg, "consumerVersion": "1",
        "attempts": 1, "firstAttemptAt": first, "deadLetteredAt": dead
    })
    .to_string()
}

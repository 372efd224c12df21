//! The dead-letter envelope of the dead-letter article (docs/design.md, "Dead letters"), written
//! by a consumer at the moment it gives up on a message, and read back by triage, replay and the
//! drain gate.
//!
//! One file per role: [`Payload`] and its forms (`payload.rs`), the borrowed view triage reads
//! through ([`EnvelopeRef`], `borrowed.rs`), the owned envelope ([`DeadLetter`],
//! `dead_letter.rs`), the error class ([`ErrorClassifier`], `classify.rs`), the builder a
//! consumer calls ([`DeadLetterBuilder`], `builder.rs`), text as JS counts it (`js_text.rs`) and
//! the errors (`error.rs`). The instants are [`crate::time`]'s.
//!
//! # The JSON form (one object per line in an export)
//!
//! ```json
//! {"payload":"{\"order\":4711}","errorClass":"dependency_timeout",
//!  "errorMessage":"timeout after 30012ms","consumerVersion":"2.14.0","traceId":"4bf92f35",
//!  "attempts":3,"firstAttemptAt":"2026-03-02T10:15:00.000Z",
//!  "deadLetteredAt":"2026-03-02T10:16:30.512Z"}
//! ```
//!
//! The field names are the article's, in camelCase. Unknown fields are ignored (and not kept).
//!
//! - `payload` — the message body byte for byte. JSON cannot carry arbitrary bytes, so:
//!   a body that is valid UTF-8 is written as a JSON **string**; any other body is written as an
//!   object with one key, `{"base64": "<standard alphabet, padded>"}`. Reading accepts both, and
//!   also Node's `Buffer#toJSON` form `{"type":"Buffer","data":[...]}` (what the article's JS
//!   writes when the body is a `Buffer`). Any other JSON value (an object that a JS consumer put
//!   there after parsing the body, a number...) is kept as that JSON value ([`Payload::Json`]) and
//!   republished as its compact JSON text; it round-trips as a value, key order aside. Bytes
//!   round-trip exactly: `Payload::Bytes(b)` → JSON → `Payload::Bytes(b)`.
//! - `errorClass` — from an [`ErrorClassifier`] ([`SeedClassifier`] by default).
//! - `errorMessage` — cut like the article's `slice(0, 500)`: at 500 UTF-16 code units, so that an
//!   envelope written here and one written by a JS consumer agree; where that cut would split a
//!   surrogate pair we stop one unit earlier (JS would keep half a character). Reading accepts
//!   what JS writes in that case (a lone surrogate escape such as `\ud83d`, which Rust strings
//!   cannot hold): it is kept as the six characters `\ud83d` (lowercase hex).
//! - `consumerVersion`, `traceId` (string or null), `attempts` (a non-negative integer).
//! - `firstAttemptAt`, `deadLetteredAt` — instants as `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`
//!   (see [`parse_timestamp`]); the builder writes UTC with milliseconds, as JS `toISOString()`
//!   does, so that comparing them as strings (which the article's triage does) is comparing
//!   instants.
//!
//! A line is a valid envelope when it is UTF-8, parses as one JSON object, has every field above
//! with its type (`traceId` may be absent), and both instants parse.

mod borrowed;
mod builder;
mod classify;
mod dead_letter;
mod error;
mod js_text;
mod payload;

pub use borrowed::EnvelopeRef;
pub use builder::{DeadLetterBuilder, FailedMessage};
pub use classify::{Chain, ErrorClassifier, ErrorInfo, SeedClassifier};
#[cfg(test)]
pub(crate) use dead_letter::sample_dead_letter;
pub use dead_letter::{DeadLetter, MAX_ERROR_MESSAGE};
pub use error::EnvelopeError;
pub use js_text::{push_wtf8, truncate_utf16, wtf8_to_string};
pub use payload::{Payload, PayloadLean, PayloadProbe, base64_decode, base64_encode};

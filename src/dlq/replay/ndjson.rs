//! [`NdjsonPublisher`]: replayed messages as JSON lines on any `Write`.

use std::io::Write;

use super::error::PublishError;
use super::traits::{Publisher, ReplayMessage};

/// Writes `{"payload": ..., "headers": {"x-replay-of": ..., "x-replay-reason": ...}}` lines (the
/// payload in the envelope's form: a string, or `{"base64": ...}`).
///
/// # Guarantees
/// A line is written whole, in one `write_all`, or not at all as far as this publisher can
/// tell: once a write or a flush failed (a full disk), the output may end in part of a line, so
/// every later publish fails too instead of writing lines after that fragment.
#[derive(Debug)]
pub struct NdjsonPublisher<W> {
    /// The writer (the tests of `replay` read what it holds).
    pub(super) out: W,
    /// A write or flush failed: nothing more is written.
    broken: bool,
}

impl<W: Write + Send> NdjsonPublisher<W> {
    /// Write to `out`.
    pub fn new(out: W) -> Self {
        NdjsonPublisher { out, broken: false }
    }

    fn refuse_if_broken(&self) -> Result<(), PublishError> {
        if self.broken {
            return Err(PublishError::Io(std::io::Error::other(
                "an earlier write to the output failed, so it may end in part of a line: \
                 nothing more is written after it",
            )));
        }
        Ok(())
    }
    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write + Send> Publisher for NdjsonPublisher<W> {
    async fn publish(&mut self, message: &ReplayMessage<'_>) -> Result<(), PublishError> {
        let headers: serde_json::Map<String, serde_json::Value> = message
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    (*k).to_string(),
                    serde_json::Value::String((*v).to_string()),
                )
            })
            .collect();
        let value = serde_json::json!({ "payload": message.payload, "headers": headers });
        let mut line = serde_json::to_vec(&value).map_err(std::io::Error::from)?;
        line.push(b'\n');
        self.refuse_if_broken()?;
        let written = self.out.write_all(&line);
        self.broken = written.is_err();
        Ok(written?)
    }

    async fn flush(&mut self) -> Result<(), PublishError> {
        self.refuse_if_broken()?;
        let flushed = self.out.flush();
        self.broken = flushed.is_err();
        Ok(flushed?)
    }
}

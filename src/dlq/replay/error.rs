//! The errors of a replay: a policy out of range ([`ReplayError`]) and a publish that failed
//! ([`PublishError`]).

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A policy value out of range.
    #[error("{field}: {message}")]
    Policy {
        /// The option.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Why one message could not be published (counted; it does not stop the run by itself).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Writing failed.
    #[error("write failed: {0}")]
    Io(#[from] std::io::Error),
    /// The broker refused it.
    #[error("rejected: {0}")]
    Rejected(String),
    /// Where it goes cannot be decided (its key cannot be read): it was not published.
    #[error("{0}")]
    Unroutable(String),
    /// The broker did not confirm it, or cannot be reached: it may or may not be stored.
    #[error("not confirmed: {0}")]
    Broker(String),
    /// An earlier message of this key failed in this run: this one was not published, since it
    /// would arrive before that one, which can only be sent again later.
    #[error(
        "an earlier message of key {0:?} failed in this run: not sent, to keep the key's order; \
         run the replay again once the cause is fixed"
    )]
    KeyHeld(String),
    /// The broker cannot be reached (no connection): the message was not sent.
    #[error("not sent, so not confirmed: {0}")]
    Unreachable(String),
}

impl PublishError {
    /// The message certainly did not go out (a later run may send it): everything but a publish
    /// the broker did not confirm ([`PublishError::Broker`]), which may have been stored.
    pub fn certainly_not_sent(&self) -> bool {
        !matches!(self, PublishError::Broker(_))
    }
}

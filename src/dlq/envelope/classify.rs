//! The error class of a dead letter: what a consumer knows about the error ([`ErrorInfo`]), the
//! extensible [`ErrorClassifier`] and the dead-letter article's rules ([`SeedClassifier`]).

/// What a consumer knows about the error that made it give up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorInfo {
    /// The error's kind as the consumer names it (JS `error.name`: `ValidationError`...).
    pub name: Option<String>,
    /// An HTTP-like status from a dependency, when there is one.
    pub status: Option<u16>,
    /// The message.
    pub message: String,
}

impl ErrorInfo {
    /// An error with only a message.
    pub fn new(message: impl Into<String>) -> ErrorInfo {
        ErrorInfo {
            message: message.into(),
            ..ErrorInfo::default()
        }
    }
    /// With a name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> ErrorInfo {
        self.name = Some(name.into());
        self
    }
    /// With a status.
    #[must_use]
    pub fn status(mut self, status: u16) -> ErrorInfo {
        self.status = Some(status);
        self
    }
}

/// Turns an error into the class that groups it. Return `None` to let the next classifier of a
/// chain decide (see [`ErrorClassifier::or`]).
pub trait ErrorClassifier {
    /// The class of `error`, or `None` when this classifier has no opinion.
    fn classify(&self, error: &ErrorInfo) -> Option<String>;

    /// This classifier first, then `next` for what it leaves.
    fn or<N: ErrorClassifier>(self, next: N) -> Chain<Self, N>
    where
        Self: Sized,
    {
        Chain(self, next)
    }
}

impl<F: Fn(&ErrorInfo) -> Option<String>> ErrorClassifier for F {
    fn classify(&self, error: &ErrorInfo) -> Option<String> {
        self(error)
    }
}

/// Two classifiers, the first one first.
#[derive(Debug, Clone)]
pub struct Chain<A, B>(pub A, pub B);

impl<A: ErrorClassifier, B: ErrorClassifier> ErrorClassifier for Chain<A, B> {
    fn classify(&self, error: &ErrorInfo) -> Option<String> {
        self.0.classify(error).or_else(|| self.1.classify(error))
    }
}

/// The article's `classifyError`: always answers.
///
/// `ValidationError` → `validation`, `TimeoutError` → `dependency_timeout`, status 404 →
/// `reference_not_found`, status ≥ 500 → `dependency_unavailable`, else `unknown`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeedClassifier;

impl ErrorClassifier for SeedClassifier {
    fn classify(&self, error: &ErrorInfo) -> Option<String> {
        let class = match (error.name.as_deref(), error.status) {
            (Some("ValidationError"), _) => "validation",
            (Some("TimeoutError"), _) => "dependency_timeout",
            (_, Some(404)) => "reference_not_found",
            (_, Some(s)) if s >= 500 => "dependency_unavailable",
            _ => "unknown",
        };
        Some(class.to_string())
    }
}

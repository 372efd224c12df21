//! How the daemon's preflight reads a plan's brokers ([`super::preflight`]): through their
//! adapters, or a function of the plan (the demo's simulated world, tests).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::plan::Plan;
use crate::preflight::Preflighted;

/// What reading a plan's brokers gives.
pub type Reading = Pin<Box<dyn Future<Output = Preflighted> + Send>>;

/// How the daemon reads a plan's brokers: through their adapters, or (the demo's simulated
/// world, tests) a function of the plan.
#[derive(Clone)]
pub struct Reader(Arc<dyn Fn(Plan) -> Reading + Send + Sync>);

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("preflight::Reader")
    }
}

impl Reader {
    /// Reading with `f`.
    pub fn new(f: impl Fn(Plan) -> Reading + Send + Sync + 'static) -> Reader {
        Reader(Arc::new(f))
    }

    /// Reading the brokers through their adapters ([`crate::adapters::preflight::run`]).
    #[cfg(feature = "brokers")]
    pub fn brokers() -> Reader {
        Reader::new(|plan| Box::pin(async move { crate::adapters::preflight::run(&plan).await }))
    }

    /// What this build reads by default: the adapters with the feature `brokers`, nothing
    /// without it (a daemon without adapters publishes nothing to a broker either).
    pub fn default_for_build() -> Option<Reader> {
        #[cfg(feature = "brokers")]
        return Some(Reader::brokers());
        #[cfg(not(feature = "brokers"))]
        None
    }

    /// Read `plan`'s brokers.
    pub async fn read(&self, plan: Plan) -> Preflighted {
        (self.0)(plan).await
    }
}

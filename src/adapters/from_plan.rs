//! Connecting to a broker a stored plan names (`brokers.old` / `brokers.new`): the one place the
//! bridge, the daemon's probes and `migrate dlq` turn a plan's broker into an [`Adapter`].

use crate::plan::Broker;
use crate::routing::Side;

use crate::brokers::{Adapter, BrokerError, Kind};

/// Why a plan's broker cannot be connected to.
#[derive(Debug, thiserror::Error)]
pub enum PlanBrokerError {
    /// The plan's `kind` is one no adapter speaks (the plan compiles with a warning only).
    #[error(
        "brokers.{side}.kind {kind:?} has no adapter here: use rabbitmq (amqp), nats, redis or kafka"
    )]
    UnknownKind {
        /// `old` or `new`.
        side: &'static str,
        /// The kind as the plan wrote it.
        kind: String,
    },
    /// The broker's URL is a secret this machine cannot resolve (an unset variable, an unreadable
    /// file).
    #[error(
        "brokers.{side}.url ({reference}) of the stored plan has no value here: {why}; set it \
         in this environment as the plan expects"
    )]
    Url {
        /// `old` or `new`.
        side: &'static str,
        /// What the plan wrote (`${OLD_BROKER_URL}`), never the value.
        reference: String,
        /// Why it has no value here.
        why: String,
    },
    /// The broker did not answer, or refused the connection or the credentials.
    #[error("cannot connect to the {side} broker {name} ({url}): {source}")]
    Connect {
        /// `old` or `new`.
        side: &'static str,
        /// The broker's name in the plan.
        name: String,
        /// The URL with any password removed.
        url: String,
        /// What the adapter said.
        source: Box<BrokerError>,
    },
}

impl PlanBrokerError {
    /// Whether the plan (or this machine's environment for it) is at fault, rather than the
    /// broker: connecting again will not help until the plan or the environment changes.
    pub fn is_configuration(&self) -> bool {
        !matches!(self, PlanBrokerError::Connect { .. })
    }
}

/// The adapter kind and the resolved URL of `broker`, the `side` broker of a plan, without
/// connecting.
///
/// # Errors
/// [`PlanBrokerError::UnknownKind`], [`PlanBrokerError::Url`].
pub fn resolve(broker: &Broker, side: Side) -> Result<(Kind, &str), PlanBrokerError> {
    let kind = Kind::parse(&broker.kind).ok_or_else(|| PlanBrokerError::UnknownKind {
        side: side.as_str(),
        kind: broker.kind.clone(),
    })?;
    let url = broker.url.value().map_err(|why| PlanBrokerError::Url {
        side: side.as_str(),
        reference: broker.url.redacted(),
        why: why.to_string(),
    })?;
    Ok((kind, url))
}

/// Connect to `broker`, the `side` broker of a plan.
///
/// # Errors
/// As [`resolve`], and [`PlanBrokerError::Connect`] when the broker cannot be reached.
pub async fn connect(broker: &Broker, side: Side) -> Result<Adapter, PlanBrokerError> {
    let (kind, url) = resolve(broker, side)?;
    Adapter::connect(kind, url)
        .await
        .map_err(|source| PlanBrokerError::Connect {
            side: side.as_str(),
            name: broker.name.clone(),
            url: broker.url.redacted(),
            source: Box::new(source),
        })
}

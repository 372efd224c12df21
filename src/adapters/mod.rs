//! The brokers a plan names, as adapters: connecting to `brokers.old` / `brokers.new`
//! ([`from_plan`]), reading a message's key the way the plan says ([`key`]), and reading their
//! durability settings for the preflight ([`preflight`]). Above both
//! [`crate::brokers`] (the adapters, which know no plan) and [`crate::plan`]; read by the bridge,
//! the daemon's probes and dead-letter replay.

pub mod from_plan;
pub mod key;
pub mod preflight;

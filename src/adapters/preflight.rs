//! The preflight of a plan: both brokers' durability settings read at once
//! ([`crate::brokers::durability`], each within its deadline), then judged with the plan's
//! waivers ([`crate::preflight::judge`]). What `migrate preflight` prints and what the daemon
//! runs before a migration first writes to the new broker.

use crate::brokers::durability::{self, Target};
use crate::outgoing;
use crate::plan::{Broker, Plan};
use crate::preflight::{BrokerSettings, Preflighted, Side, Unread};

/// Reads both brokers of `plan` (at once) and judges them.
///
/// # Guarantees
/// Returns within [`durability::READ_DEADLINE`] (and a little); every text in the answer has
/// passed [`outgoing::reason`] with the plan's secrets.
pub async fn run(plan: &Plan) -> Preflighted {
    let (old, new) = tokio::join!(
        read(plan, Side::Old, &plan.brokers.old),
        read(plan, Side::New, &plan.brokers.new)
    );
    let secrets = plan.known_secrets();
    let mut settings = Vec::new();
    let mut unread = Vec::new();
    for (side, broker, r) in [
        (Side::Old, &plan.brokers.old, old),
        (Side::New, &plan.brokers.new, new),
    ] {
        match r {
            Ok(s) => settings.push(s),
            Err(e) => unread.push(Unread {
                side,
                broker: broker.name.clone(),
                error: outgoing::reason(&e, &secrets),
            }),
        }
    }
    let mut p = Preflighted::judge(settings, unread, &plan.preflight.waivers());
    for f in &mut p.report.findings {
        for text in [&mut f.setting, &mut f.value, &mut f.why] {
            *text = outgoing::reason(text, &secrets);
        }
    }
    p
}

async fn read(plan: &Plan, side: Side, broker: &Broker) -> Result<BrokerSettings, String> {
    let url = broker.url.value().map_err(|why| {
        format!(
            "brokers.{side}.url ({}) has no value here: {why}",
            broker.url.redacted()
        )
    })?;
    let destination = broker
        .destination()
        .ok_or_else(|| format!("brokers.{side} names no queue or stream: nothing to read"))?;
    let monitor = match &plan.preflight.side(side).monitor {
        Some(m) => Some(m.value().map_err(|why| {
            format!(
                "preflight.{side}.monitor ({}) has no value here: {why}",
                m.redacted()
            )
        })?),
        None => None,
    };
    durability::read(Target {
        side,
        name: &broker.name,
        kind: &broker.kind,
        url,
        destination,
        monitor,
    })
    .await
}

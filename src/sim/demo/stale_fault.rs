//! The `stale-producer` fault: as the second slice step is published, one instance of the
//! `refunds` producer stops following the routing document and keeps routing by the first
//! step's generation, so that slices the step moved still go to the old broker. The consumer's
//! stale-producer check counts them; the plan's built-in guard trips on them and pauses, naming
//! the producer; the team restarts the instance, waits for the guard's window to clear, resumes.

use super::{DemoError, FaultState, START_MS};
use crate::controller::{Actor, Controller};
use crate::machine::{Command, State};
use crate::sim::view::Event;
use crate::sim::world::World;
use crate::store::any::AnyStore;

/// The producer whose instance stops following.
pub const PRODUCER: &str = "refunds";
/// How long the team takes to restart the instance after the page.
const FIX_AFTER_MS: i64 = 20 * 60_000;
/// How long the stale count must stay flat before the team resumes (the plan's guard window,
/// 10 minutes, and a tick).
const QUIET_BEFORE_RESUME_MS: i64 = 12 * 60_000;

/// One tick of the fault: strike, notice, fix, resume. What a person would see is added to
/// `told`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn stale_producer(
    fs: &mut FaultState,
    world: &mut World,
    state: &State,
    paused: bool,
    c: &Controller<'_, AnyStore>,
    operator: &Actor,
    told: &mut Vec<Event>,
    now: i64,
) -> Result<(), DemoError> {
    if fs.arm(state, State::Slices(1), now, 0).is_some() && fs.active_from.is_none() {
        if let Some(generation) = world.pin_producer(PRODUCER) {
            fs.active_from = Some(now);
            told.push(Event::new(
                now,
                START_MS,
                format!(
                    "one instance of producer {PRODUCER} stops following the routing document: \
                     it keeps routing by generation {generation}, so the slices this step moved \
                     still go to the old broker"
                ),
            ));
        }
    }
    let stale_total = world.stale.counts().stale_total();
    if stale_total != fs.stale_seen {
        fs.stale_seen = stale_total;
        fs.stale_grew_at = Some(now);
    }
    if fs.active_from.is_some() && paused && fs.breach_seen_at.is_none() {
        fs.breach_seen_at = Some(now);
    }
    if let Some(seen) = fs.breach_seen_at
        && fs.fixed_at.is_none()
        && now - seen >= FIX_AFTER_MS
    {
        world.unpin_producer();
        fs.fixed_at = Some(now);
        fs.active_to = Some(now);
        told.push(Event::new(
            now,
            START_MS,
            format!(
                "the team restarts {PRODUCER}'s stuck instance, {} after the page: it follows \
                 the routing again; resuming once the stale count has been flat for {}",
                crate::time::human_ms(now - seen),
                crate::time::human_ms(QUIET_BEFORE_RESUME_MS)
            ),
        ));
    }
    if let Some(fixed) = fs.fixed_at
        && !fs.over
        && now - fixed >= QUIET_BEFORE_RESUME_MS
        && fs
            .stale_grew_at
            .is_none_or(|at| now - at >= QUIET_BEFORE_RESUME_MS)
    {
        fs.over = true;
        let actor = Actor {
            reason: Some(format!(
                "{PRODUCER}'s instance follows the routing again; resuming"
            )),
            ..operator.clone()
        };
        c.command("demo", &Command::Resume, &actor, serde_json::json!({}), now)
            .await?;
    }
    Ok(())
}

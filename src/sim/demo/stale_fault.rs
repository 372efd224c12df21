//! The `stale-producer` fault: as the second slice step is published, one instance of the
//! `refunds` producer stops following the routing document and keeps routing by the first
//! step's generation, so that slices the step moved still go to the old broker. The consumer's
//! stale-producer check counts them; the plan's built-in guard trips on them and pauses, naming
//! the producer; the team restarts the instance, waits for the stale count to stay flat past the
//! guard's window, and resumes.

use crate::machine::State;
use crate::sim::view::Event;
use crate::sim::world::World;

/// The producer whose instance stops following.
pub const PRODUCER: &str = "refunds";
/// How long the team takes to restart the instance after the page.
const FIX_AFTER_MS: i64 = 20 * 60_000;
/// How long the stale count must stay flat before the team resumes (the plan's guard window,
/// 10 minutes, and a tick).
const QUIET_BEFORE_RESUME_MS: i64 = 12 * 60_000;

/// Where the fault stands.
#[derive(Debug, Default)]
pub struct StaleFault {
    /// When the instance stopped following, and when it was restarted.
    pub active_from: Option<i64>,
    pub active_to: Option<i64>,
    breach_seen_at: Option<i64>,
    over: bool,
    /// The consumer's stale count last seen, and when it last grew.
    stale_seen: u64,
    stale_grew_at: Option<i64>,
}

impl StaleFault {
    /// One tick of the fault: strike (the first tick in `slices[1]`), notice the pause, fix,
    /// and say when to resume (`true`: resume now, once). What a person would see is added to
    /// `told`, on the clock from `start_ms`.
    pub fn tick(
        &mut self,
        world: &mut World,
        state: &State,
        paused: bool,
        now: i64,
        start_ms: i64,
        told: &mut Vec<Event>,
    ) -> bool {
        if self.active_from.is_none()
            && *state == State::Slices(1)
            && let Some(generation) = world.pin_producer(PRODUCER)
        {
            self.active_from = Some(now);
            told.push(Event::new(
                now,
                start_ms,
                format!(
                    "one instance of producer {PRODUCER} stops following the routing document: \
                     it keeps routing by generation {generation}, so the slices this step moved \
                     still go to the old broker"
                ),
            ));
        }
        let stale_total = world.stale.counts().stale_total();
        if stale_total != self.stale_seen {
            self.stale_seen = stale_total;
            self.stale_grew_at = Some(now);
        }
        if self.active_from.is_some() && paused && self.breach_seen_at.is_none() {
            self.breach_seen_at = Some(now);
        }
        if let Some(seen) = self.breach_seen_at
            && self.active_to.is_none()
            && now - seen >= FIX_AFTER_MS
        {
            world.unpin_producer();
            self.active_to = Some(now);
            told.push(Event::new(
                now,
                start_ms,
                format!(
                    "the team restarts {PRODUCER}'s stuck instance, {} after the page: it \
                     follows the routing again; resuming once the stale count has been flat \
                     for {}",
                    crate::time::human_ms(now - seen),
                    crate::time::human_ms(QUIET_BEFORE_RESUME_MS)
                ),
            ));
        }
        let resume = self.active_to.is_some_and(|fixed| {
            !self.over
                && now - fixed >= QUIET_BEFORE_RESUME_MS
                && self
                    .stale_grew_at
                    .is_none_or(|at| now - at >= QUIET_BEFORE_RESUME_MS)
        });
        self.over |= resume;
        resume
    }
}

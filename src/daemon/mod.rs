//! `migrate run`: the daemon that drives every active migration in a store.
//!
//! - a loop that ticks every `interval`: for each migration, evaluate the current phase's gates and
//!   guards, act on a breach at once, advance when every exit gate passes ([`tick`]);
//! - a lease in the store so that exactly one daemon per store acts; the others stand by, serve
//!   read-only API calls and take over when the lease expires (the policy of
//!   [`LeaseKeeper`](crate::store::lease_keeper::LeaseKeeper));
//! - a watcher that notices changes made by others (the CLI) within a poll (25 ms) and publishes
//!   their routing to long-polling producers ([`hub`]);
//! - the HTTP API and `/metrics` ([`server`]), webhooks ([`notify`]).
//!
//! [`run`] takes its listener and a shutdown future, so that tests bind `127.0.0.1:0` and stop it
//! when they want.

pub mod auth;
mod clock;
pub mod console;
pub mod followers_view;
pub mod guard;
pub mod http;
pub mod hub;
pub mod lanes;
mod memo;
pub mod metrics;
pub mod notify;
pub mod outbox;
mod outbox_memory;
mod person_pause;
pub mod preflight;
pub mod preflight_reader;
#[cfg(feature = "brokers")]
pub mod probes;
#[cfg(feature = "brokers")]
mod probes_reconcile;
pub mod retention;
mod round;
pub mod round_state;
pub mod server;
mod shared;
mod standing_note;
pub mod tick;
pub mod views;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::plan::Resolve;
use crate::store::Store;
use crate::store::fence::{self, FenceCell};
use crate::store::lease_keeper::Renewal;
pub use clock::DaemonClock;
pub use shared::{Config, DaemonError, LEASE, Shared, WHOLE_WATCH_EVERY, read_whole_fleet};

/// Mutating API calls on a non-loopback address need a token (unless the API is read-only).
///
/// # Errors
/// [`DaemonError::NoToken`].
pub fn check_listener(addr: std::net::SocketAddr, config: &Config) -> Result<(), DaemonError> {
    if !addr.ip().is_loopback() && !config.access.required() && !config.read_only_api {
        return Err(DaemonError::NoToken(addr));
    }
    Ok(())
}

/// Run the daemon until `shutdown` resolves: then stop the round in progress (a migration's
/// tick stops at its next await: what it had not committed is not), release the lease and
/// return.
///
/// # Errors
/// A non-loopback listener without a token (unless the API is read-only), or an HTTP server
/// failure.
pub async fn run<S: Store + Clone + 'static>(
    store: S,
    listener: TcpListener,
    config: Config,
    resolve: Arc<dyn Resolve + Send + Sync>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), DaemonError> {
    let addr = listener.local_addr().map_err(DaemonError::Listener)?;
    check_listener(addr, &config)?;
    // Every write this daemon makes proves the lease it holds (see crate::store::fence).
    let mut config = config;
    if config.instance.is_empty() {
        config.instance = crate::store::lease_keeper::new_instance();
    }
    // Held as `--id#instance`: a second process with this `--id` stands by (issue 54).
    let store = store.fenced(FenceCell::armed(LEASE, &config.lease_holder()));
    let shared = Shared::new(store, config.clone(), resolve)?;
    shared.watch_once().await;

    let (stop_tx, stop_rx) = watch::channel(false);
    let allowed = guard::AllowedHosts::new(
        addr,
        guard::machine_hostname().as_deref(),
        &config.allowed_hosts,
    );
    let app = guard::guarded(server::router(shared.clone()), allowed);
    let server = tokio::spawn(http::serve(listener, app, config.http, stop_rx.clone()));
    let watcher = {
        let shared = shared.clone();
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(shared.config.watch_interval);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped(stop.clone()) => break,
                    _ = every.tick() => {
                        let deadline = shared.config.store_deadline();
                        let _ = tokio::time::timeout(deadline, shared.watch_once()).await;
                        // Transitions committed and not yet announced (issue 54); cut like a
                        // tick, what is not delivered stays in the outbox for the next pass.
                        let _ = tokio::time::timeout(
                            shared.config.tick_deadline(),
                            shared.deliver_outbox(),
                        )
                        .await;
                    }
                }
            }
        })
    };

    let renewer = tokio::spawn(renewer(shared.clone(), stop_rx.clone()));

    let mut ticks = tokio::time::interval(config.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            _ = ticks.tick() => {
                // How long the tick took, for `/metrics`: a duration in this process, not an
                // instant (see `DaemonClock`).
                let started = std::time::Instant::now();
                // Shutdown is honoured at any point of a round (issue 54), not only between.
                tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    () = leader_tick(&shared) => {}
                }
                // As of now: a tick that waited on a store gone away no longer leads.
                shared.metrics.tick(shared.is_leader(), started.elapsed());
            }
        }
    }
    // The ticks still running stop here: none acts after the lease is released.
    shared.rounds.lanes.abort_all();
    let _ = stop_tx.send(true);
    shared.views.stopping.send_replace(true);
    let _ = renewer.await;
    // Before the lease is released: a standby may take over at once.
    #[cfg(feature = "brokers")]
    shared.rounds.probes.stop_all();
    if shared.lease.forget_until()
        && let Err(e) = shared.lease.release().await
    {
        tracing::warn!("cannot release the lease: {e}");
    }
    let _ = watcher.await;
    match server.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(DaemonError::Server(e)),
        Err(_) => Ok(()),
    }
}

/// What the daemon's loop does at each tick: a round when this daemon leads (each of its store
/// calls and the probes' reconciliation under a deadline), stopping the probes when it does
/// not.
async fn leader_tick<S: Store + Clone + 'static>(shared: &Arc<Shared<S>>) {
    if !shared.is_leader() {
        // The lease ran out (or was never ours): no probe is published on behalf of a daemon
        // that does not own the migrations.
        #[cfg(feature = "brokers")]
        shared.rounds.probes.stop_all();
        return;
    }
    let epoch = shared.store.fence().epoch();
    let completed = fence::in_round(
        epoch,
        round::round(shared, epoch, Some(shared.config.interval)),
    )
    .await;
    shared.metrics.fenced(shared.store.fence().refused());
    if completed {
        shared.rounds.lanes.progress.mark();
    }
    let deadline = shared.config.tick_deadline();
    #[cfg(feature = "brokers")]
    let _ = tokio::time::timeout(deadline, shared.rounds.probes.reconcile(shared)).await;
    let _ = tokio::time::timeout(deadline, shared.prune_if_due()).await;
}

/// The give-up rule (issue 54): a leader whose rounds have not completed for longer than the
/// lease TTL and one interval (a store call or a connection that does not answer) gives its
/// lease up, says so, and rests a TTL before it competes again, so that a daemon that can drive
/// the rounds takes over. Whether it rests now (then it does not renew).
async fn rests<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    resting: &mut Option<tokio::time::Instant>,
) -> bool {
    let ttl = shared.config.lease_ttl;
    if let Some(until) = *resting {
        if tokio::time::Instant::now() < until {
            return true;
        }
        *resting = None;
    }
    let holds = shared.lease.holds();
    if !holds
        || shared.leader.load(Ordering::SeqCst)
        || !shared
            .rounds
            .lanes
            .progress
            .stalled(ttl, shared.config.interval)
    {
        return false;
    }
    tracing::error!(
        "giving the lease up: no round completed for {} (more than --lease-ttl {} and one --interval): a store call or a connection does not answer; standing by for {} before competing again",
        crate::time::human(shared.rounds.lanes.progress.since()),
        crate::time::human(ttl),
        crate::time::human(ttl)
    );
    shared.metrics.lease_given_up();
    shared.rounds.lanes.progress.give_up(true);
    shared.lease.drop_hold();
    shared.rounds.lanes.abort_all();
    shared.metrics.lease(0, None);
    shared.say_leading(Some("no round completed within the lease TTL"));
    let keeper = shared.lease_keeper();
    if let Ok(Err(e)) = tokio::time::timeout(keeper.renew_every(), keeper.release()).await {
        tracing::warn!("cannot release the lease (it runs out by itself): {e}");
    }
    *resting = Some(tokio::time::Instant::now() + ttl);
    true
}

/// Resolves once `rx` says the daemon stops.
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// The lease's renewer, until `stop`: renews on the keeper's schedule
/// ([`crate::store::lease_keeper::LeaseKeeper::renewals`]) and out of it when [`ask`] says
/// sooner, rests when [`rests`] says so, and says so when the lease runs out between two
/// renewals.
async fn renewer<S: Store + Clone + 'static>(shared: Arc<Shared<S>>, stop: watch::Receiver<bool>) {
    let mut every = shared.lease_keeper().renewals();
    let mut resting = None;
    // A renewal out of the schedule: just after another holder's lease runs out, or just after
    // this daemon's rest ends.
    let mut early: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = stopped(stop.clone()) => break,
            _ = every.tick() => {
                early = ask(&shared, &mut resting).await;
            }
            () = at(early) => {
                early = ask(&shared, &mut resting).await;
            }
            // The lease runs out between two renewals when the store does not answer.
            () = lease_runs_out(&shared) => shared.say_leading(Some("not renewed in time")),
        }
    }
}

/// One turn of the renewer: rest ([`rests`]) or renew. When to ask again before the next
/// renewal of the schedule, if sooner: just after the rest ends, or just after the lease another
/// holder was found holding runs out and the standby's rule allows taking it
/// ([`crate::lease::Lease::takeable_in`]).
async fn ask<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    resting: &mut Option<tokio::time::Instant>,
) -> Option<tokio::time::Instant> {
    if rests(shared, resting).await {
        return resting.map(|until| until + Duration::from_millis(1));
    }
    renew(shared)
        .await
        .map(|wait| tokio::time::Instant::now() + wait)
}

/// Resolves at `instant`, never when there is none.
async fn at(instant: Option<tokio::time::Instant>) {
    match instant {
        Some(instant) => tokio::time::sleep_until(instant).await,
        None => std::future::pending().await,
    }
}

/// Renew (or take) the lease and note until when it is ours. A store that does not answer
/// within a third of the lease period is a failed renewal (the next one is due then). Answers
/// how soon to ask again when another holder's lease runs out before the next renewal.
async fn renew<S: Store + Clone + 'static>(shared: &Shared<S>) -> Option<Duration> {
    let clock = &shared.config.clock;
    let wall = clock.wall_ms();
    let keeper = shared.lease_keeper();
    let asked = shared.lease.ask(Some(keeper.renew_every())).await;
    let (had, before) = (asked.held_before, asked.epoch_before);
    match asked.renewal {
        Renewal::Held {
            epoch, db_now_ms, ..
        } => {
            clock::note_sample(clock, &shared.metrics, asked.step);
            if !had {
                // The rounds of this lease start now (the give-up rule counts from here).
                shared.rounds.lanes.progress.leads();
            }
            if !had || before != Some(epoch) {
                tracing::info!(holder = %shared.config.holder, instance = %shared.config.instance, epoch, "holding the lease: this controller acts");
            }
            shared.note_skew(wall - db_now_ms);
            shared.metrics.lease(epoch, None);
            shared.say_leading(None);
        }
        Renewal::Taken {
            holder,
            db_now_ms,
            expires_at_ms,
            ..
        } => {
            clock::note_sample(clock, &shared.metrics, asked.step);
            // A standby measures and says its skew too: it would take over with that clock.
            shared.note_skew(wall - db_now_ms);
            shared.metrics.lease(0, None);
            shared.rounds.lanes.progress.give_up(false);
            shared.say_leading(Some(&format!("{holder} holds it")));
            // Another daemon owns the migrations now: its probes, not ours.
            #[cfg(feature = "brokers")]
            shared.rounds.probes.stop_all();
            return shared.lease.ask_again_in(db_now_ms, expires_at_ms);
        }
        // Keep acting only while the lease we hold is still valid (is_leader checks the time).
        Renewal::Failed(e) => {
            tracing::warn!("cannot renew the lease: {e}");
            shared.say_leading(Some(&format!("cannot renew it: {e}")));
        }
        Renewal::Unanswered => {
            tracing::warn!(
                "cannot renew the lease: the store did not answer within {}",
                crate::time::human(keeper.renew_every())
            );
            shared.say_leading(Some("the store did not answer in time"));
        }
    }
    None
}

/// Resolves when the lease this daemon said it holds runs out by its clock (never while it does
/// not lead, or leads by its caller's say-so).
async fn lease_runs_out<S: Store + Clone + 'static>(shared: &Shared<S>) {
    if shared.leader.load(Ordering::SeqCst) || !shared.said.leading.load(Ordering::SeqCst) {
        return std::future::pending().await;
    }
    let wait = shared
        .lease
        .acts_until()
        .saturating_sub(shared.config.clock.lease_ms());
    if let Ok(wait) = u64::try_from(wait) {
        tokio::time::sleep(Duration::from_millis(wait + 1)).await;
    }
}

/// One tick of every migration in the store: a round. What [`run`]'s loop does while this
/// daemon holds the lease (there, waiting one interval at most for the round's ticks: see
/// [`lanes`]); this call waits for every tick of the round, each cut at its own deadline
/// ([`Config::tick_deadline`]). At most [`lanes::MAX_TICKS_IN_FLIGHT`] migrations are ticked at
/// once, each as a task of its own: a migration whose slow source holds its tick delays no
/// other's evaluation nor its breach action.
///
/// The round is evaluated as of one instant (the config's clock read once at its start) and
/// reads its sources through one round's fetcher ([`Fetcher::for_round_within`], the source
/// timeout its budget): each `/metrics` URL is scraped once and each distinct PromQL instant
/// query (same Prometheus, same text, same instant) asked once for every migration that reads
/// it, and every migration records that scrape at the round's instant. That is what each
/// migration would have read by itself at that instant; a failing source is a hold, with that
/// source's reason, for each migration reading it; a source that timed out once is not asked
/// again in the round.
///
/// The round starts from one read of the fleet ([`crate::store::JournalStore::fleet`]): every record and the gate
/// memory of its step, in two statements instead of two per migration. A migration that another
/// process moves during the round is a conflict when its tick commits a transition (the next
/// round reads it afresh), as for two commands racing.
///
/// The round's gate evaluations and samples are written in one transaction at its end
/// ([`RoundBatch`](crate::controller::round::RoundBatch)): a transition made during the round is
/// committed at once, with its gates in its journal entry; if that last commit fails, the next
/// round goes on from the memory of the round before.
///
/// [`Fetcher::for_round_within`]: crate::indicators::fetch::Fetcher::for_round_within
pub async fn tick_all<S: Store + Clone + 'static>(shared: &Arc<Shared<S>>) {
    // Every write of the round proves the epoch it started under.
    let epoch = shared.store.fence().epoch();
    fence::in_round(epoch, round::round(shared, epoch, None)).await;
    shared.metrics.fenced(shared.store.fence().refused());
}

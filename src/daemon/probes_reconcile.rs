//! The lease holder's reconcile after every tick: which probe runs go, resume or stop (what a run
//! does: [`super::probes`]).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};

use super::Shared;
use super::probes::{Leading, ProbeRuns, Run};
use crate::machine::State;
use crate::plan::PhaseKind;
use crate::store::traits::*;

impl ProbeRuns {
    /// Start the runs that should be running (and resume those stopped with the lease or by a
    /// pause before they were over), stop the others. A paused migration's run is stopped but
    /// stays listed with its progress; a run whose migration left `synthetic` (or entered it
    /// again) is dropped. Called by the lease holder after every tick; without the lease (lost
    /// meanwhile) it stops every run and starts none.
    pub async fn reconcile<S: Store + Clone + 'static>(&self, shared: &Arc<Shared<S>>) {
        if !shared.is_leader() {
            self.stop_all();
            return;
        }
        let records = match shared.store.list().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("probes: cannot list migrations: {e}");
                return;
            }
        };
        // Every migration in `synthetic`, paused or not: its run id, and whether it is paused.
        let wanted: HashMap<String, (i64, bool)> = records
            .iter()
            .filter(|r| r.state == State::Synthetic)
            .map(|r| (r.name.clone(), (r.entered_at_ms, r.paused)))
            .collect();
        {
            let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
            runs.retain(|name, run| match wanted.get(name) {
                // Paused: the run stops, but keeps its entry (how far it got, whether it is
                // over); unpausing keeps the run id, so it resumes or stays over.
                Some(&(id, true)) if id == run.id => {
                    if !run.task.is_finished() {
                        tracing::info!(migration = %name, "probes: run stopped: the migration is paused");
                        run.task.abort();
                    }
                    true
                }
                Some(&(id, false)) if id == run.id => true,
                // Left `synthetic`, or entered it again (a new run id): a new run, if any.
                _ => {
                    run.task.abort();
                    false
                }
            });
        }
        for rec in records {
            let Some(&(run, false)) = wanted.get(&rec.name) else {
                continue;
            };
            // Listed (with this run id, after the retain above): going, over, or stopped when the
            // lease lapsed or was lost or the migration was paused. Only the last is started
            // again, from where it stopped.
            let resumed = match self
                .runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&rec.name)
            {
                Some(r) if !r.task.is_finished() || r.progress.over.load(Ordering::SeqCst) => {
                    continue;
                }
                Some(r) => Some(r.progress.clone()),
                None => None,
            };
            let plan = match shared.controller(true).load(&rec.name).await {
                Ok(l) => l.plan,
                Err(e) => {
                    tracing::warn!(migration = %rec.name, "probes: cannot load the plan: {e}");
                    continue;
                }
            };
            let Some(probes) = plan
                .phase(PhaseKind::Synthetic)
                .and_then(|p| p.probes.clone())
            else {
                continue;
            };
            // The lease may have run out while the plan was read.
            if !shared.is_leader() {
                self.stop_all();
                return;
            }
            let clock = shared.config.clock.clone();
            let generation = u64::try_from(rec.generation).unwrap_or(0);
            // Weak: the runs live in `shared`; a run must not keep it alive.
            let weak: Weak<Shared<S>> = Arc::downgrade(shared);
            let leading: Leading = Arc::new(move || weak.upgrade().is_some_and(|s| s.is_leader()));
            let progress = if let Some(progress) = resumed {
                tracing::info!(
                    migration = %rec.name,
                    repeats = progress.repeats.load(Ordering::SeqCst),
                    latency = progress.latency.load(Ordering::SeqCst),
                    "probes: resuming a stopped run"
                );
                progress
            } else {
                tracing::info!(migration = %rec.name, rate = probes.rate, count = probes.count, "probes: starting a run");
                Arc::default()
            };
            let task = self.spawn_run(
                &rec.name,
                plan,
                probes,
                run,
                generation,
                clock,
                progress.clone(),
                leading,
            );
            self.runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(
                    rec.name.clone(),
                    Run {
                        id: run,
                        task,
                        progress,
                    },
                );
        }
    }
}

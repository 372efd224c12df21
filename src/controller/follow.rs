//! Keeping a [`Router`] on a migration's current routing, read from the state store: what the
//! bridge and `migrate dlq replay --migration` route by, the same document `migrate routing`
//! prints.

use std::time::Duration;

use tokio::task::JoinHandle;

use super::plans::PlanCache;
use super::publish;
use crate::plan::Plan;
use crate::router::Router;
use crate::store::traits::*;

/// Read migration `name` from `store` every `every` and offer its routing document to `router`,
/// until the returned task is aborted. Documents are built from the stored plan, compiled again
/// when it changes (a `migrate plan apply` changes the routing of later steps); while the stored
/// plan does not compile here, by `plan` (the plan read at start).
///
/// # Guarantees
/// The router only ever moves to a newer generation ([`Router::offer`]); a store that cannot be
/// read keeps the last document, and each kind of trouble is logged once until it clears.
pub fn follow_store<S: Store + 'static>(
    store: S,
    router: Router,
    plan: Plan,
    name: String,
    every: Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut warned = false;
        let plans = PlanCache::default();
        let mut plan_warned = false;
        loop {
            match store.get(&name).await {
                Ok(record) => {
                    warned = false;
                    let document = match plans.document(
                        &record,
                        &crate::plan::SystemResolve,
                        crate::plan::SecretsMode::Deferred,
                    ) {
                        Ok(document) => {
                            plan_warned = false;
                            document
                        }
                        Err(errors) => {
                            if !plan_warned {
                                plan_warned = true;
                                tracing::warn!(
                                    "the stored plan of {name} does not compile here ({} error(s)); routing by the plan read at start",
                                    errors.len()
                                );
                            }
                            publish::document(&plan, &record)
                        }
                    };
                    if let Err(e) = router.offer(document) {
                        tracing::warn!("routing document refused: {e}");
                    }
                }
                Err(e) if !warned => {
                    tracing::warn!(
                        "cannot read the routing from the store (keeping the last): {e}"
                    );
                    warned = true;
                }
                Err(_) => {}
            }
            tokio::time::sleep(every).await;
        }
    })
}

//! The invariants, counted from the consumer's database and the dead-letter queues
//! ([`World::audit`]).

use std::collections::HashSet;

use sqlx::Row;

use super::{Audit, World, WorldError};

impl World {
    /// The invariants, counted from the consumer's database and the dead-letter queues.
    ///
    /// # Errors
    /// The consumer database failed.
    pub async fn audit(&self) -> Result<Audit, WorldError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS effects, COUNT(DISTINCT key) AS keys, \
             SUM(CASE WHEN status = 'superseded' THEN 1 ELSE 0 END) AS superseded FROM effects",
        )
        .fetch_one(&self.pool)
        .await?;
        let effects: i64 = row.try_get("effects")?;
        let keys: i64 = row.try_get("keys")?;
        let superseded: Option<i64> = row.try_get("superseded")?;
        let violations: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM (SELECT version, MAX(version) OVER (PARTITION BY aggregate \
             ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev \
             FROM effects WHERE status = 'applied') WHERE prev IS NOT NULL AND version <= prev",
        )
        .fetch_one(&self.pool)
        .await?
        .try_get("n")?;
        let applied_keys: HashSet<String> = sqlx::query("SELECT DISTINCT key FROM effects")
            .fetch_all(&self.pool)
            .await?
            .iter()
            .filter_map(|r| r.try_get::<String, _>("key").ok())
            .collect();
        let dead = self.dead_keys(|k| !applied_keys.contains(k));
        let unknown = applied_keys
            .iter()
            .filter(|k| !self.produced_keys.contains(*k))
            .count();
        Ok(Audit {
            produced: self.produced_keys.len() as u64,
            applied: u64::try_from(keys).unwrap_or(0),
            dead_lettered: dead.len() as u64,
            duplicates_applied: u64::try_from(effects - keys).unwrap_or(0),
            order_violations: u64::try_from(violations).unwrap_or(0),
            superseded: u64::try_from(superseded.unwrap_or(0)).unwrap_or(0),
            unknown_effects: unknown as u64,
        })
    }
}

//! One commit at a time per table within a process.
//!
//! A follower's rounds and its background compaction commit to the same
//! tables through one [`crate::Destination`]. Optimistic commits alone let
//! the rounds win every race: a round's commit is small and comes every
//! `commit_interval`, while a compaction's attempt rebuilds a large
//! `replace`, so under a steady load it could lose every attempt. Each
//! commit therefore holds its table's gate from its first gated attempt to
//! its end: a round's commit from its first attempt, a compaction's from
//! its third (the first checks everything committed since its plan,
//! which can take a while, and the second what landed during the first,
//! without holding the rounds up; the later ones check only the snapshots
//! since, a round or two). Commits of other processes still meet
//! as optimistic commits do, through the catalog.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// The gates of the tables a destination commits to, by table.
#[derive(Debug, Default)]
pub(crate) struct CommitGates {
    tables: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
}

impl CommitGates {
    /// Waits until no other commit of the table holds its gate, then holds
    /// it until the guard is dropped.
    pub(crate) async fn enter(&self, table: &str) -> OwnedMutexGuard<()> {
        let gate = {
            let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(tables.entry(table.to_string()).or_default())
        };
        gate.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::CommitGates;

    #[tokio::test]
    async fn a_tables_commits_pass_its_gate_one_at_a_time_and_other_tables_do_not_wait() {
        let gates = CommitGates::default();
        let held = gates.enter("db.a").await;
        // Another table's gate is free.
        drop(gates.enter("db.b").await);
        let waiting = gates.enter("db.a");
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        drop(held);
        let _entered = waiting.await;
    }
}

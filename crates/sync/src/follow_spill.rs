//! A follower's read-ahead while its tables cannot commit: after a round
//! failed on the catalog or the object store, the follower reads the
//! topics of the tables that failed ahead into its local spill
//! ([`topicberg_kafka::spill`]), each partition from where the spill ends
//! (or from the group's committed offset, which follows the table's), up
//! to `sync.spill_mb`; then it stops fetching until a round commits. The
//! rounds after the outage read those ranges from the spill. Offsets move
//! only with a commit, as always: the spill is a cache of Kafka.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use topicberg_core::Job;
use topicberg_kafka::{
    fill_spill, select_topics, GroupClient, GroupMember, KafkaConnection, KafkaError,
    PartitionState, Spill,
};

use crate::follow::StopSignal;
use crate::KAFKA_TIMEOUT;

/// One fill reads for at most this long, so that the follower tries its
/// round again (the catalog may be back) at its usual pace.
const FILL_FOR: Duration = Duration::from_secs(20);

/// Which topics a failed round left waiting on the catalog or the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// The round failed before any table (the catalog could not be
    /// reached to connect): every selected topic.
    Every,
    /// These topics' tables failed on the catalog or the store.
    Topics(BTreeSet<String>),
}

/// The follower's spill and what it said about it.
pub(crate) struct ReadAhead {
    spill: Arc<Spill>,
    /// The spill's being full was logged (once per outage).
    said_full: bool,
}

impl ReadAhead {
    /// The job's spill, `<state_dir>/spill/<consumer group>/` (emptied),
    /// when `sync.spill_mb` is not 0 and the batch reader reads the job's
    /// listener; `None` (said why) otherwise.
    pub(crate) fn open(job: &Job) -> Option<ReadAhead> {
        if job.tuning.spill_bytes == 0 {
            return None;
        }
        let connection = KafkaConnection::from_source(&job.source);
        if !job.source.fetch.reads_batches(connection.security_protocol) {
            tracing::info!(
                "no local spill: it needs topicberg's batch reader (a PLAINTEXT listener, \
                 source.fetch = \"auto\"); during an outage of the catalog or the store the \
                 follower waits and Kafka keeps the messages"
            );
            return None;
        }
        let folder = job.state_dir.join("spill").join(&job.consumer_group);
        match Spill::create(&folder, job.tuning.spill_bytes) {
            Ok(spill) => Some(ReadAhead {
                spill: Arc::new(spill),
                said_full: false,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "no local spill: its folder cannot be made");
                None
            }
        }
    }

    /// The spill, for the rounds to read from.
    pub(crate) fn spill(&self) -> Arc<Spill> {
        Arc::clone(&self.spill)
    }

    /// A round committed: the next outage reads ahead into what is left,
    /// and may say "full" again.
    pub(crate) fn committed(&mut self) {
        self.said_full = false;
        self.spill.reopen();
    }

    /// Reads the `waiting` topics ahead into the spill; one event with what
    /// it holds. A failure (Kafka, the local disk) is logged: the next
    /// round reads Kafka as always.
    pub(crate) async fn fill(
        &mut self,
        job: &Job,
        member: Option<Arc<GroupMember>>,
        waiting: Waiting,
        stop: &Arc<StopSignal>,
    ) {
        if self.spill.full() {
            self.say_full();
            return;
        }
        let (spill, stop_signal) = (Arc::clone(&self.spill), Arc::clone(stop));
        let (source, topics, group) = (
            job.source.clone(),
            job.topics.clone(),
            job.consumer_group.clone(),
        );
        let filled = tokio::task::spawn_blocking(move || {
            let connection = KafkaConnection::from_source(&source);
            let selection = select_topics(&connection, &topics, KAFKA_TIMEOUT)?;
            let mut selected: Vec<_> = selection
                .selected
                .into_iter()
                .filter(|t| match &waiting {
                    Waiting::Every => true,
                    Waiting::Topics(names) => names.contains(&t.name),
                })
                .collect();
            if let Some(member) = &member {
                // Only what the group assigned this member.
                crate::sync::keep_assigned(&mut selected, member.assignment().as_ref());
            }
            let states = match &member {
                Some(member) => member.client().partition_states(&selected, KAFKA_TIMEOUT)?,
                None => GroupClient::open(&connection, &group)?
                    .partition_states(&selected, KAFKA_TIMEOUT)?,
            };
            let started = Instant::now();
            let keep_going = || !stop_signal.requested() && started.elapsed() < FILL_FOR;
            let mut added = 0;
            for (topic, ranges) in ranges_ahead(&spill, &states) {
                added += fill_spill(&connection, &topic, &ranges, &group, &spill, &keep_going)?;
            }
            Ok::<u64, KafkaError>(added)
        })
        .await;
        match filled {
            Ok(Ok(added)) => self.say_filled(added),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "reading ahead into the local spill failed")
            }
            Err(e) => tracing::warn!(error = %e, "reading ahead into the local spill stopped"),
        }
    }

    fn say_filled(&mut self, added: u64) {
        let spilled = self.spill.topics();
        let offsets: u64 = spilled.values().map(|t| t.offsets).sum();
        tracing::info!(
            added_bytes = added,
            buffered_bytes = self.spill.bytes(),
            buffered_offsets = offsets,
            limit_bytes = self.spill.limit(),
            "read ahead into the local spill while the tables cannot commit: {} buffered of {}",
            topicberg_core::human::bytes(self.spill.bytes()),
            topicberg_core::human::bytes(self.spill.limit())
        );
        if self.spill.full() {
            self.say_full();
        }
    }

    fn say_full(&mut self) {
        if !self.said_full {
            self.said_full = true;
            tracing::warn!(
                buffered_bytes = self.spill.bytes(),
                limit_bytes = self.spill.limit(),
                "the local spill is full (sync.spill_mb): fetching paused until the tables \
                 commit again; Kafka keeps the rest"
            );
        }
    }
}

/// Each topic's `(partition, from, end)` ranges to read ahead: from where
/// the spill ends, or else from the group's committed offset (a partition
/// the group never committed is left to the rounds), to the high watermark.
fn ranges_ahead(
    spill: &Spill,
    states: &[PartitionState],
) -> BTreeMap<String, Vec<(i32, i64, i64)>> {
    let mut out: BTreeMap<String, Vec<(i32, i64, i64)>> = BTreeMap::new();
    for state in states {
        let spilled = spill.range(&state.topic, state.partition).map(|r| r.1);
        let from = match (spilled, state.committed) {
            (Some(spilled), Some(committed)) => spilled.max(committed),
            (Some(from), None) | (None, Some(from)) => from,
            (None, None) => continue,
        };
        if from < state.high {
            out.entry(state.topic.clone())
                .or_default()
                .push((state.partition, from, state.high));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(partition: i32, committed: Option<i64>, high: i64) -> PartitionState {
        PartitionState {
            topic: "t".into(),
            partition,
            low: 0,
            high,
            committed,
        }
    }

    #[test]
    fn reading_ahead_starts_where_the_spill_ends_or_at_the_group_offset() {
        let folder = std::env::temp_dir().join(format!("tb-ahead-{}", std::process::id()));
        let spill = Spill::create(&folder, 1 << 20).unwrap();
        let states = [
            state(0, Some(5), 50),
            state(1, None, 50),
            state(2, Some(50), 50),
        ];
        let ranges = ranges_ahead(&spill, &states);
        assert_eq!(ranges["t"], [(0, 5, 50)]);
        let _ = std::fs::remove_dir_all(&folder);
    }
}

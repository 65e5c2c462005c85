//! The client context of a consumer group's clients (`offsets.rs`'s
//! group client, `member.rs`'s member): errors recorded as for every
//! client and, for a member, its assignment, kept by the rebalance
//! callback, which pauses every partition it is assigned (the batch
//! reader reads them, not librdkafka).
//!
//! A revocation waits for the rounds that hold a revoked partition (a
//! [`Ownership::lease`] taken when a round planned it) to commit or drop
//! what they read, up to [`REVOKE_WAIT`]: the member gives a partition
//! back only once nothing of it is left uncommitted, so the worker the
//! group gives it to next starts from offsets no round of this one will
//! commit. A lost assignment (the member was fenced: its session expired)
//! is not waited for: the partitions are someone else's already, and the
//! table's offsets check keeps the two apart.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;

use crate::failure::ErrorRecordingContext;

/// The longest a revocation waits for the rounds holding its partitions.
/// Within librdkafka's `max.poll.interval.ms` (300 s by default), past
/// which a member that does not poll is taken out of the group.
pub(crate) const REVOKE_WAIT: Duration = Duration::from_secs(60);

/// A partition: topic and partition id (`offsets.rs`'s `TopicPartition`).
type Partition = (String, i32);

/// The partitions assigned to the member and those the rounds hold.
#[derive(Debug, Default)]
pub(crate) struct Owned {
    /// `None` before the first assignment.
    pub(crate) assigned: Option<BTreeSet<Partition>>,
    /// Each held partition with the number of leases on it.
    held: BTreeMap<Partition, u32>,
    /// When the group last took the member's partitions (its session
    /// expired), until an assignment gives it some again.
    pub(crate) lost_since: Option<Instant>,
}

/// The member's partitions, and the leases rounds hold on them; see the
/// module doc.
#[derive(Debug, Default)]
pub(crate) struct Ownership {
    owned: Mutex<Owned>,
    released: Condvar,
}

impl Ownership {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Owned> {
        self.owned.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The assignment now (`None` before the first) and a hold on every
    /// partition of it, in one step: a revocation that comes after waits
    /// for the hold to be released.
    pub(crate) fn lease(&self) -> (Option<BTreeSet<Partition>>, Vec<Partition>) {
        let mut owned = self.lock();
        let assigned = owned.assigned.clone();
        let held: Vec<Partition> = assigned.iter().flatten().cloned().collect();
        for p in &held {
            *owned.held.entry(p.clone()).or_default() += 1;
        }
        (assigned, held)
    }

    /// Ends a hold taken by [`Ownership::lease`].
    pub(crate) fn release(&self, held: &[Partition]) {
        let mut owned = self.lock();
        for p in held {
            if let Some(n) = owned.held.get_mut(p) {
                *n -= 1;
                if *n == 0 {
                    owned.held.remove(p);
                }
            }
        }
        drop(owned);
        self.released.notify_all();
    }

    /// Takes `revoked` out of the assignment (rounds planned from now on
    /// leave them out), then, unless `lost`, waits up to `wait` for the
    /// rounds holding any of them; how long it waited and whether some
    /// were still held at the end.
    pub(crate) fn revoke(
        &self,
        revoked: &[Partition],
        lost: bool,
        wait: Duration,
    ) -> (Duration, bool) {
        let started = Instant::now();
        let mut owned = self.lock();
        if let Some(set) = owned.assigned.as_mut() {
            for p in revoked {
                set.remove(p);
            }
        }
        if lost {
            owned.lost_since.get_or_insert_with(Instant::now);
            return (Duration::ZERO, false);
        }
        let (owned, timeout) = self
            .released
            .wait_timeout_while(owned, wait, |o| {
                revoked.iter().any(|p| o.held.contains_key(p))
            })
            .unwrap_or_else(|p| p.into_inner());
        drop(owned);
        (started.elapsed(), timeout.timed_out())
    }
}

/// What the member knows of its place in the group, shared with the
/// rebalance callback.
#[derive(Debug, Default)]
pub(crate) struct Membership {
    pub(crate) ownership: Ownership,
    pub(crate) rebalances: AtomicU64,
    /// Set when the broker refused the `consumer` protocol.
    pub(crate) protocol_refused: AtomicBool,
    /// The last fatal error librdkafka reported, if any.
    pub(crate) fatal: Mutex<Option<String>>,
}

/// The client context of a group's clients: errors recorded as for every
/// client ([`ErrorRecordingContext`]) and, for a member, its assignment.
#[derive(Default)]
pub(crate) struct GroupContext {
    pub(crate) errors: ErrorRecordingContext,
    pub(crate) membership: Option<Arc<Membership>>,
}

impl ClientContext for GroupContext {
    fn error(&self, error: RdKafkaError, reason: &str) {
        if let Some(membership) = &self.membership {
            let code = error.rdkafka_error_code();
            if code == Some(RDKafkaErrorCode::Fatal) || reason.contains("fatal") {
                if protocol_refused(reason) {
                    membership.protocol_refused.store(true, Ordering::SeqCst);
                }
                *membership.fatal.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(reason.to_owned());
            }
        }
        self.errors.error(error, reason);
    }

    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        self.errors.log(level, fac, log_message);
    }
}

impl ConsumerContext for GroupContext {
    /// A revocation: the partitions leave the assignment and the callback
    /// waits for the rounds holding them (the module doc).
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let (Some(membership), Rebalance::Revoke(tpl)) = (&self.membership, rebalance) else {
            return;
        };
        let revoked: Vec<Partition> = partitions(tpl).collect();
        let lost = consumer.assignment_lost();
        let (waited, still_held) = membership.ownership.revoke(&revoked, lost, REVOKE_WAIT);
        if lost {
            tracing::warn!(
                partitions = revoked.len(),
                "the group took this member's partitions (its session expired): \
                 what it read of them and did not commit is dropped by the table's offsets check"
            );
        } else if still_held {
            tracing::warn!(
                partitions = revoked.len(),
                waited_ms = waited.as_millis() as u64,
                "gave partitions back while a round still held them: \
                 the table's offsets check keeps its commit from duplicating the next owner's"
            );
        } else if waited >= Duration::from_millis(1) {
            tracing::info!(
                partitions = revoked.len(),
                waited_ms = waited.as_millis() as u64,
                "partitions given back once the round holding them ended"
            );
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Some(membership) = &self.membership else {
            return;
        };
        membership.rebalances.fetch_add(1, Ordering::SeqCst);
        let mut guard = membership.ownership.lock();
        let owned = &mut *guard;
        let set = owned.assigned.get_or_insert_with(BTreeSet::new);
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            rdkafka::consumer::RebalanceProtocol::Cooperative
        );
        match rebalance {
            Rebalance::Assign(tpl) => {
                // Not read through librdkafka: our batch reader reads them.
                if let Err(e) = consumer.pause(tpl) {
                    tracing::warn!(error = %e, "pausing assigned partitions failed");
                }
                if !cooperative {
                    set.clear();
                }
                set.extend(partitions(tpl));
                if !set.is_empty() {
                    owned.lost_since = None;
                }
            }
            Rebalance::Revoke(tpl) => {
                if cooperative {
                    for p in partitions(tpl) {
                        set.remove(&p);
                    }
                } else {
                    set.clear();
                }
            }
            Rebalance::Error(e) => tracing::warn!(error = %e, "consumer group rebalance failed"),
        }
        tracing::info!(
            partitions = set.len(),
            owned = %owned_list(set),
            rebalance = membership.rebalances.load(Ordering::SeqCst),
            "consumer group assignment changed"
        );
    }
}

/// Whether librdkafka's fatal error says the broker does not offer
/// KIP-848's protocol (`ConsumerGroupHeartbeat fatal error: Broker: API
/// version not supported`, or the unsupported-feature variant).
fn protocol_refused(reason: &str) -> bool {
    let reason = reason.to_ascii_lowercase();
    reason.contains("consumergroupheartbeat")
        && (reason.contains("not supported") || reason.contains("unsupported"))
}

/// The partitions owned, as `topic:0,1,2;other:3` (one log field).
fn owned_list(set: &BTreeSet<(String, i32)>) -> String {
    let mut out = String::new();
    let mut topic: Option<&str> = None;
    for (t, p) in set {
        if topic == Some(t.as_str()) {
            out.push(',');
        } else {
            if topic.is_some() {
                out.push(';');
            }
            out.push_str(t);
            out.push(':');
            topic = Some(t);
        }
        out.push_str(&p.to_string());
    }
    out
}

fn partitions(tpl: &TopicPartitionList) -> impl Iterator<Item = (String, i32)> + '_ {
    tpl.elements()
        .into_iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owned_partitions_are_listed_per_topic_in_one_field() {
        let set: BTreeSet<(String, i32)> = [("b", 3), ("a", 1), ("a", 0), ("b", 11)]
            .into_iter()
            .map(|(t, p)| (t.to_string(), p))
            .collect();
        assert_eq!(owned_list(&set), "a:0,1;b:3,11");
        assert_eq!(owned_list(&BTreeSet::new()), "");
    }

    fn p(n: i32) -> Partition {
        ("t".to_string(), n)
    }

    #[test]
    fn a_revocation_waits_for_the_round_holding_the_partition_and_no_longer() {
        let ownership = Arc::new(Ownership::default());
        ownership.lock().assigned = Some([p(0), p(1)].into_iter().collect());
        let (assigned, held) = ownership.lease();
        assert_eq!(assigned.map(|a| a.len()), Some(2));
        let releaser = {
            let (ownership, held) = (Arc::clone(&ownership), held.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                ownership.release(&held);
            })
        };
        let (waited, still_held) = ownership.revoke(&[p(1)], false, Duration::from_secs(10));
        releaser.join().unwrap();
        assert!(!still_held);
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
        // A round planned after the revocation leases what is left only.
        let (assigned, held) = ownership.lease();
        assert_eq!(assigned, Some([p(0)].into_iter().collect()));
        assert_eq!(held, [p(0)]);
        // Nobody releases this hold: the wait ends at its bound.
        let (waited, still_held) = ownership.revoke(&[p(0)], false, Duration::from_millis(100));
        assert!(still_held && waited >= Duration::from_millis(100));
    }

    #[test]
    fn a_lost_assignment_is_not_waited_for() {
        let ownership = Ownership::default();
        ownership.lock().assigned = Some([p(0)].into_iter().collect());
        let _held = ownership.lease();
        let (waited, still_held) = ownership.revoke(&[p(0)], true, Duration::from_secs(10));
        assert_eq!((waited, still_held), (Duration::ZERO, false));
        assert_eq!(ownership.lock().assigned, Some(BTreeSet::new()));
        // The follower counts from here towards joining again.
        assert!(ownership.lock().lost_since.is_some());
    }

    #[test]
    fn a_broker_without_kip_848_is_told_apart_from_other_fatal_errors() {
        // librdkafka 2.12's text against a classic-only Kafka 4.3 broker.
        assert!(protocol_refused(
            "ConsumerGroupHeartbeat fatal error: Broker: API version not supported"
        ));
        assert!(protocol_refused(
            "ConsumerGroupHeartbeat fatal error: Local: Required feature not supported by broker"
        ));
        assert!(!protocol_refused(
            "ConsumerGroupHeartbeat fatal error: Broker: Group authorization failed"
        ));
    }
}

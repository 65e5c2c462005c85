//! A follower's membership in the job's consumer group.
//!
//! A follower joins the job's consumer group through librdkafka, so Kafka
//! itself says which partitions it owns (the scale-out of several
//! followers rests on this). It speaks KIP-848's `consumer` group protocol
//! (the broker assigns; no group-wide stop on a rebalance) and falls back
//! to the classic protocol with cooperative-sticky assignment when the
//! broker does not offer it (Kafka before 4.0, or a broker configured with
//! `group.coordinator.rebalance.protocols=classic`).
//!
//! A member reads only the partitions the group assigned it: each round
//! takes a [`Lease`] on them, and a revocation waits for the rounds
//! holding a revoked partition to commit or drop what they read of it
//! (`group_context.rs`).
//!
//! The member never reads messages through librdkafka: every partition it
//! is assigned is paused in the same callback that assigns it, and the
//! data keeps coming through topicberg's batch reader. A thread of its own
//! polls the consumer every [`POLL_INTERVAL`] (heartbeats and rebalance
//! callbacks run there). Offsets committed through the member carry its
//! generation or member epoch, so the broker accepts them while it is a
//! member, where it refuses them from outside the group.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::failure::ErrorRecordingContext;
use crate::group_context::{GroupContext, Membership};
use crate::offsets::{GroupClient, TopicPartition};
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// How often the member's thread polls its consumer.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How long a round waits for the broker's answer to the member's offset
/// commit. The tables hold the offsets, so a commit left unanswered loses
/// nothing: the round goes on, and a later one commits them.
const COMMIT_WAIT: Duration = Duration::from_secs(10);

/// The group protocol a member speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupProtocol {
    /// KIP-848: the broker computes the assignment; members heartbeat.
    Consumer,
    /// The classic protocol, with cooperative-sticky assignment.
    Classic,
}

impl GroupProtocol {
    /// The name librdkafka's `group.protocol` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupProtocol::Consumer => "consumer",
            GroupProtocol::Classic => "classic",
        }
    }
}

/// A member of the job's consumer group; see the module doc. Dropped, it
/// leaves the group (in the background).
pub struct GroupMember {
    client: Arc<GroupClient>,
    membership: Arc<Membership>,
    protocol: GroupProtocol,
    subscribed: Mutex<Vec<String>>,
    stop: Arc<AtomicBool>,
    /// A commit's thread is waiting for the broker's answer.
    committing: Arc<AtomicBool>,
    poller: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for GroupMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupMember")
            .field("protocol", &self.protocol)
            .field("assigned", &self.assignment().map(|a| a.len()))
            .finish()
    }
}

impl GroupMember {
    /// Joins `group` subscribed to `topics`, speaking KIP-848's protocol
    /// when the broker offers it (decided within `timeout`), else the
    /// classic one. Returns once the first assignment arrived, or at
    /// `timeout` (the assignment may come later: [`GroupMember::assignment`]
    /// is `None` until then).
    pub fn join(
        connection: &KafkaConnection,
        group: &str,
        topics: &[String],
        timeout: Duration,
    ) -> Result<Self, KafkaError> {
        let member = Self::join_with(connection, group, topics, GroupProtocol::Consumer)?;
        if topics.is_empty() || member.wait_for_assignment(timeout) {
            return Ok(member);
        }
        if member.membership.protocol_refused.load(Ordering::SeqCst) {
            tracing::info!(
                group,
                "the broker does not offer KIP-848's consumer group protocol; joining with the classic one"
            );
            drop(member);
            let member = Self::join_with(connection, group, topics, GroupProtocol::Classic)?;
            member.wait_for_assignment(timeout);
            return member.or_fatal();
        }
        member.or_fatal()
    }

    fn or_fatal(self) -> Result<Self, KafkaError> {
        let fatal = self
            .membership
            .fatal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match fatal {
            Some(reason) => Err(KafkaError::new(
                KafkaErrorKind::Broker,
                format!("joining consumer group {}", self.client.group()),
                reason,
            )),
            None => Ok(self),
        }
    }

    fn join_with(
        connection: &KafkaConnection,
        group: &str,
        topics: &[String],
        protocol: GroupProtocol,
    ) -> Result<Self, KafkaError> {
        let membership = Arc::new(Membership::default());
        let mut config = connection.client_config();
        config
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("group.protocol", protocol.as_str());
        if protocol == GroupProtocol::Classic {
            config.set("partition.assignment.strategy", "cooperative-sticky");
        }
        let context = GroupContext {
            errors: ErrorRecordingContext::default(),
            membership: Some(Arc::clone(&membership)),
        };
        let client = Arc::new(GroupClient::with_context(
            connection, group, config, context,
        )?);
        let stop = Arc::new(AtomicBool::new(false));
        let poller = {
            let (client, stop) = (Arc::clone(&client), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("group-member".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        // Paused partitions bring no messages; anything else
                        // (an error event) is recorded by the context.
                        client.poll(POLL_INTERVAL);
                    }
                })
                .map_err(|e| {
                    KafkaError::new(
                        KafkaErrorKind::Config,
                        "starting the group member's thread",
                        e,
                    )
                })?
        };
        let member = Self {
            client,
            membership,
            protocol,
            subscribed: Mutex::new(Vec::new()),
            stop,
            committing: Arc::new(AtomicBool::new(false)),
            poller: Some(poller),
        };
        member.subscribe(topics)?;
        Ok(member)
    }

    /// Subscribes to `topics` when they differ from the subscription (a
    /// pattern that matched a new topic); the assignment follows.
    pub fn subscribe(&self, topics: &[String]) -> Result<(), KafkaError> {
        let mut subscribed = self.subscribed.lock().unwrap_or_else(|p| p.into_inner());
        let mut wanted = topics.to_vec();
        wanted.sort();
        if *subscribed == wanted {
            return Ok(());
        }
        let names: Vec<&str> = wanted.iter().map(String::as_str).collect();
        self.client.subscribe(&names)?;
        *subscribed = wanted;
        Ok(())
    }

    fn wait_for_assignment(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.assignment().is_some() {
                return true;
            }
            let fatal = self.membership.fatal.lock().map(|f| f.is_some());
            if fatal.unwrap_or(false) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The partitions the group assigned this member; `None` before its
    /// first assignment.
    pub fn assignment(&self) -> Option<BTreeSet<TopicPartition>> {
        self.membership.ownership.lock().assigned.clone()
    }

    /// How long since the group took this member's partitions (its
    /// session expired) without giving it any again; `None` when it has
    /// not lost them, or was assigned some since.
    pub fn lost_for(&self) -> Option<Duration> {
        self.membership
            .ownership
            .lock()
            .lost_since
            .map(|at| at.elapsed())
    }

    /// The partitions assigned now, held until the [`Lease`] is dropped: a
    /// revocation of any of them waits for that (up to a minute), so a
    /// round that planned them commits or drops what it read of them
    /// before the group gives them to another member.
    pub fn lease(&self) -> Lease {
        let (assigned, held) = self.membership.ownership.lease();
        Lease {
            membership: Arc::clone(&self.membership),
            assigned,
            held,
        }
    }

    /// The fatal error librdkafka reported, if any: the member is out of
    /// the group for good and must be replaced by a new one.
    pub fn fatal(&self) -> Option<String> {
        self.membership
            .fatal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The protocol the member speaks.
    pub fn protocol(&self) -> GroupProtocol {
        self.protocol
    }

    /// The group's client: watermarks, committed offsets, and offset
    /// commits that carry the member's epoch.
    pub fn client(&self) -> &GroupClient {
        &self.client
    }

    /// Commits `next_offsets` to the group as this member, waiting up to
    /// [`COMMIT_WAIT`] for the broker's answer. librdkafka's commit waits
    /// for its answer without a bound (one was seen to wait for minutes
    /// after a broker restart, holding the round and with it the follower),
    /// so it runs on a thread of its own; while one is still waiting, the
    /// next commit is not sent and fails at once.
    pub fn commit(&self, next_offsets: &BTreeMap<TopicPartition, i64>) -> Result<(), KafkaError> {
        if next_offsets.is_empty() {
            return Ok(());
        }
        let context = || {
            format!(
                "committing offsets of consumer group {}",
                self.client.group()
            )
        };
        if self.committing.swap(true, Ordering::SeqCst) {
            let why = "the previous commit still waits for the group coordinator's answer; \
                       the tables hold the offsets, and a later round commits them";
            return Err(KafkaError::new(KafkaErrorKind::Broker, context(), why));
        }
        let (answer, answered) = std::sync::mpsc::channel();
        let (client, offsets) = (Arc::clone(&self.client), next_offsets.clone());
        let committing = Arc::clone(&self.committing);
        let spawned = std::thread::Builder::new()
            .name("group-commit".into())
            .spawn(move || {
                let result = client.commit(&offsets);
                committing.store(false, Ordering::SeqCst);
                let _ = answer.send(result);
            });
        if let Err(e) = spawned {
            self.committing.store(false, Ordering::SeqCst);
            return Err(KafkaError::new(KafkaErrorKind::Broker, context(), e));
        }
        answered.recv_timeout(COMMIT_WAIT).unwrap_or_else(|_| {
            let why = format!(
                "no answer from the group coordinator within {} s; the tables hold the offsets, \
                 and a later round commits them",
                COMMIT_WAIT.as_secs()
            );
            Err(KafkaError::new(KafkaErrorKind::Broker, context(), why))
        })
    }
}

/// A round's hold on the partitions assigned when it planned; see
/// [`GroupMember::lease`].
pub struct Lease {
    membership: Arc<Membership>,
    assigned: Option<BTreeSet<TopicPartition>>,
    held: Vec<TopicPartition>,
}

impl Lease {
    /// The partitions assigned when the lease was taken; `None` before the
    /// member's first assignment.
    pub fn assigned(&self) -> Option<&BTreeSet<TopicPartition>> {
        self.assigned.as_ref()
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("held", &self.held.len())
            .finish()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.membership.ownership.release(&self.held);
    }
}

impl GroupMember {
    /// Leaves the group now (a clean stop), so the partitions it held are
    /// assigned again at once rather than when the broker's session
    /// timeout expires. Blocks until librdkafka closed the consumer.
    pub fn leave(mut self) {
        self.stop_polling();
        let closed = Arc::new(GroupClient::closed(&self.client));
        if let Ok(client) = Arc::try_unwrap(std::mem::replace(&mut self.client, closed)) {
            client.close_now();
        }
    }

    fn stop_polling(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(poller) = self.poller.take() {
            let _ = poller.join();
        }
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        self.stop_polling();
        // The client (and the group membership) closes when its last
        // reference goes: this one, now the poller has ended, or a
        // commit's thread still waiting for its answer, when it ends.
    }
}

//! Where each partition stands: its watermarks and the job's committed
//! offset in the consumer group; and committing the group's offsets after
//! the Iceberg snapshot has landed.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::group_context::GroupContext;
use crate::topics::SelectedTopic;
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// A topic partition.
pub type TopicPartition = (String, i32);

/// One partition's position at the start of a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The topic.
    pub topic: String,
    /// The partition id.
    pub partition: i32,
    /// The earliest retained offset (low watermark).
    pub low: i64,
    /// The high watermark: the offset the next produced message will get.
    pub high: i64,
    /// The group's committed next offset, if the group has one.
    pub committed: Option<i64>,
}

/// The consumer group's client: the group's committed offsets, the
/// partitions' watermarks, and the group's offset commit. It never joins
/// the group. Opening it starts its connection and the group coordinator's
/// lookup in librdkafka's threads, so a caller opens it before other work
/// (the topic listing, an Iceberg commit) and uses it after; that lookup
/// alone takes about 50 ms. Dropped, it closes in the background. What
/// librdkafka reports on its own (a refused TLS handshake, a lost
/// connection) is kept, not logged: opened before the topic listing, the
/// client would otherwise print the listing's failure a second time, as a
/// transport failure; its requests' results carry what went wrong.
pub struct GroupClient {
    consumer: Option<BaseConsumer<GroupContext>>,
    connection: KafkaConnection,
    group: String,
}

impl GroupClient {
    /// A client of `group` on `connection`, connecting from now on.
    pub fn open(connection: &KafkaConnection, group: &str) -> Result<Self, KafkaError> {
        let mut config = connection.client_config();
        config
            .set("group.id", group)
            .set("enable.auto.commit", "false");
        Self::with_context(connection, group, config, GroupContext::default())
    }

    /// A client made from `config` (which names `group`) with `context`.
    pub(crate) fn with_context(
        connection: &KafkaConnection,
        group: &str,
        config: rdkafka::ClientConfig,
        context: GroupContext,
    ) -> Result<Self, KafkaError> {
        let consumer = config.create_with_context(context).map_err(|e| {
            KafkaError::new(
                KafkaErrorKind::Config,
                "creating a consumer-group client",
                e,
            )
        })?;
        Ok(Self {
            consumer: Some(consumer),
            connection: connection.clone(),
            group: group.to_string(),
        })
    }

    /// A client of the same group with no consumer (closed).
    pub(crate) fn closed(other: &GroupClient) -> Self {
        Self {
            consumer: None,
            connection: other.connection.clone(),
            group: other.group.clone(),
        }
    }

    /// Closes the consumer on this thread (a member leaves its group).
    pub(crate) fn close_now(mut self) {
        drop(self.consumer.take());
    }

    /// The group's name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// Serves the client's events (a member's heartbeats and rebalances)
    /// for up to `timeout`.
    pub(crate) fn poll(&self, timeout: Duration) {
        if let Some(Err(e)) = self.consumer().poll(timeout) {
            tracing::debug!(error = %e, group = %self.group, "consumer group event");
        }
    }

    /// Subscribes the client to `topics` (a member's).
    pub(crate) fn subscribe(&self, topics: &[&str]) -> Result<(), KafkaError> {
        self.consumer().subscribe(topics).map_err(|e| {
            KafkaError::new(
                KafkaErrorKind::Broker,
                format!("subscribing consumer group {} to its topics", self.group),
                e,
            )
        })
    }

    fn consumer(&self) -> &BaseConsumer<GroupContext> {
        self.consumer
            .as_ref()
            .expect("the consumer is only taken by drop")
    }

    /// Watermarks and the group's committed offsets of every partition.
    pub fn partition_states(
        &self,
        topics: &[SelectedTopic],
        timeout: Duration,
    ) -> Result<Vec<PartitionState>, KafkaError> {
        let (consumer, group) = (self.consumer(), &self.group);
        let mut tpl = TopicPartitionList::new();
        for topic in topics {
            for &p in &topic.partitions {
                tpl.add_partition(&topic.name, p);
            }
        }
        let committed = with_coordinator_retries(|| committed_offsets(consumer, &tpl, timeout))
            .map_err(|e| {
                let context = format!("reading committed offsets of consumer group {group}");
                group_refused(&self.connection, group, &context, &e)
                    .unwrap_or_else(|| KafkaError::new(KafkaErrorKind::Broker, context, e))
            })?;
        let mut states = Vec::new();
        for topic in topics {
            for &partition in &topic.partitions {
                let (low, high) = consumer
                    .fetch_watermarks(&topic.name, partition, timeout)
                    .map_err(|e| {
                        KafkaError::new(
                            KafkaErrorKind::Broker,
                            format!("reading watermarks of {}[{partition}]", topic.name),
                            e,
                        )
                    })?;
                let committed = committed
                    .find_partition(&topic.name, partition)
                    .and_then(|e| match e.offset() {
                        Offset::Offset(o) if o >= 0 => Some(o),
                        _ => None,
                    });
                states.push(PartitionState {
                    topic: topic.name.clone(),
                    partition,
                    low,
                    high,
                    committed,
                });
            }
        }
        Ok(states)
    }

    /// Commits `next_offsets` (the offset of the next message to read, per
    /// partition) to the consumer group, synchronously.
    pub fn commit(&self, next_offsets: &BTreeMap<TopicPartition, i64>) -> Result<(), KafkaError> {
        if next_offsets.is_empty() {
            return Ok(());
        }
        let group = &self.group;
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), offset) in next_offsets {
            tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset))
                .map_err(|e| {
                    KafkaError::new(KafkaErrorKind::Config, "building the offset list", e)
                })?;
        }
        let committed = with_coordinator_retries(|| self.consumer().commit(&tpl, CommitMode::Sync));
        committed.map_err(|e| {
            if group_has_members(&e) {
                KafkaError::new(
                    KafkaErrorKind::GroupInUse,
                    format!("committing offsets of consumer group {group}"),
                    format!(
                        "{e}: another consumer is a member of the group (a scheduled sync never joins it), and the \
                         broker refuses offsets committed from outside while it is; the tables hold the \
                         offsets and the first sync after that member leaves commits them. Give this job a \
                         consumer_group no other application uses"
                    ),
                )
            } else {
                let context = format!("committing offsets of consumer group {group}");
                group_refused(&self.connection, group, &context, &e)
                    .unwrap_or_else(|| KafkaError::new(KafkaErrorKind::Broker, context, e))
            }
        })
    }
}

impl Drop for GroupClient {
    fn drop(&mut self) {
        if let Some(consumer) = self.consumer.take() {
            crate::connection::close_in_background(consumer);
        }
    }
}

/// Reads watermarks and the group's committed offsets for every partition
/// ([`GroupClient::partition_states`] of a client opened for it).
pub fn read_partition_states(
    connection: &KafkaConnection,
    group: &str,
    topics: &[SelectedTopic],
    timeout: Duration,
) -> Result<Vec<PartitionState>, KafkaError> {
    GroupClient::open(connection, group)?.partition_states(topics, timeout)
}

/// The group's committed offsets of `tpl`, asked in short attempts until
/// `timeout`; between attempts the consumer's queue is read, where
/// librdkafka reports a coordinator lookup the ACLs refused
/// (`GROUP_AUTHORIZATION_FAILED`, returned at once: the request itself would
/// only time out).
fn committed_offsets(
    consumer: &BaseConsumer<GroupContext>,
    tpl: &TopicPartitionList,
    timeout: Duration,
) -> Result<TopicPartitionList, rdkafka::error::KafkaError> {
    use rdkafka::types::RDKafkaErrorCode;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let attempt = left.min(Duration::from_millis(500));
        match consumer.committed_offsets(tpl.clone(), attempt) {
            Ok(committed) => return Ok(committed),
            Err(e) => {
                while let Some(event) = consumer.poll(Duration::ZERO) {
                    if let Err(background) = event {
                        let code = background.rdkafka_error_code();
                        if code == Some(RDKafkaErrorCode::GroupAuthorizationFailed) {
                            return Err(background);
                        }
                    }
                }
                let timed_out = e.rdkafka_error_code() == Some(RDKafkaErrorCode::OperationTimedOut);
                if !timed_out || std::time::Instant::now() >= deadline {
                    return Err(e);
                }
            }
        }
    }
}

/// An [`KafkaErrorKind::Authorization`] error when the ACLs refuse the
/// group (`GROUP_AUTHORIZATION_FAILED`), with the fix.
fn group_refused(
    connection: &KafkaConnection,
    group: &str,
    context: &str,
    err: &rdkafka::error::KafkaError,
) -> Option<KafkaError> {
    use rdkafka::types::RDKafkaErrorCode;
    if err.rdkafka_error_code() != Some(RDKafkaErrorCode::GroupAuthorizationFailed) {
        return None;
    }
    Some(KafkaError::new(
        KafkaErrorKind::Authorization,
        context,
        format!(
            "not authorized: the cluster's ACLs do not let {} use consumer group {group} \
             (GROUP_AUTHORIZATION_FAILED); ask the cluster's admin to allow READ and DESCRIBE \
             on group {group} for this principal, or set consumer_group to a group it may use",
            crate::topics::principal(connection)
        ),
    ))
}

/// Whether an offset commit was refused because the group has members
/// (a commit from outside a non-empty classic group gets `UNKNOWN_MEMBER_ID`;
/// the others are the same refusal during or after a rebalance).
fn group_has_members(err: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as C;
    matches!(
        err.rdkafka_error_code(),
        Some(
            C::UnknownMemberId
                | C::IllegalGeneration
                | C::RebalanceInProgress
                | C::FencedInstanceId
                | C::StaleMemberEpoch
        )
    )
}

/// Attempts [`with_coordinator_retries`] makes.
const COORDINATOR_ATTEMPTS: u32 = 8;

/// Whether a group-coordinator error is transient: the coordinator is
/// moving, loading the group, or was briefly unreachable. Retrying the same
/// request helps; anything else is returned at once.
fn coordinator_error_is_transient(err: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as C;
    matches!(
        err.rdkafka_error_code(),
        Some(
            C::NotCoordinator
                | C::CoordinatorLoadInProgress
                | C::CoordinatorNotAvailable
                | C::RequestTimedOut
                | C::NetworkException
                | C::OperationTimedOut
                | C::BrokerTransportFailure
        )
    )
}

/// Runs a consumer-group request, retrying transient coordinator errors
/// with a bounded exponential backoff (100 ms doubling to 3.2 s, at most
/// [`COORDINATOR_ATTEMPTS`] attempts, about 10 s in all).
fn with_coordinator_retries<T>(
    mut request: impl FnMut() -> Result<T, rdkafka::error::KafkaError>,
) -> Result<T, rdkafka::error::KafkaError> {
    let mut delay = std::time::Duration::from_millis(100);
    let mut attempt = 1;
    loop {
        match request() {
            Err(e) if attempt < COORDINATOR_ATTEMPTS && coordinator_error_is_transient(&e) => {
                tracing::warn!(error = %e, attempt, "consumer-group request failed; retrying");
                std::thread::sleep(delay);
                delay = (delay * 2).min(std::time::Duration::from_millis(3200));
                attempt += 1;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::error::KafkaError as RdKafkaError;
    use rdkafka::types::RDKafkaErrorCode;

    #[test]
    fn transient_coordinator_errors_are_retried_then_succeed() {
        let mut calls = 0;
        let result = with_coordinator_retries(|| {
            calls += 1;
            if calls < 3 {
                Err(RdKafkaError::ConsumerCommit(
                    RDKafkaErrorCode::NotCoordinator,
                ))
            } else {
                Ok(calls)
            }
        });
        assert_eq!(result.unwrap(), 3);
    }

    #[test]
    fn a_group_with_members_is_told_apart_from_other_commit_errors() {
        let refused = RdKafkaError::ConsumerCommit(RDKafkaErrorCode::UnknownMemberId);
        assert!(group_has_members(&refused));
        let other = RdKafkaError::ConsumerCommit(RDKafkaErrorCode::GroupAuthorizationFailed);
        assert!(!group_has_members(&other));
    }

    #[test]
    fn other_errors_are_not_retried() {
        let mut calls = 0;
        let result: Result<(), _> = with_coordinator_retries(|| {
            calls += 1;
            Err(RdKafkaError::ConsumerCommit(
                RDKafkaErrorCode::GroupAuthorizationFailed,
            ))
        });
        assert!(result.is_err());
        assert_eq!(calls, 1);
    }
}

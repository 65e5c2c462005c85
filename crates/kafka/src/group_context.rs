//! The client context of a consumer group's clients (`offsets.rs`'s
//! group client, `member.rs`'s member): errors recorded as for every
//! client and, for a member, its assignment, kept by the rebalance
//! callback, which pauses every partition it is assigned (the batch
//! reader reads them, not librdkafka).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;

use crate::failure::ErrorRecordingContext;

/// What the member knows of its place in the group, shared with the
/// rebalance callback.
#[derive(Debug, Default)]
pub(crate) struct Membership {
    pub(crate) assigned: Mutex<Option<BTreeSet<(String, i32)>>>,
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
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Some(membership) = &self.membership else {
            return;
        };
        membership.rebalances.fetch_add(1, Ordering::SeqCst);
        let mut assigned = membership
            .assigned
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let set = assigned.get_or_insert_with(BTreeSet::new);
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

fn partitions(tpl: &TopicPartitionList) -> impl Iterator<Item = (String, i32)> + '_ {
    tpl.elements()
        .into_iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
}

#[cfg(test)]
mod tests {
    use super::*;

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

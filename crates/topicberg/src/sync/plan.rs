//! Planning a sync: which partitions to read, from where to where, decided
//! from the table (the truth) and the consumer group (a copy).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use topicberg_kafka::{PartitionRange, PartitionState};

/// The snapshot summary property holding the job's next offset for every
/// partition it ever wrote: `{"<topic>": {"<partition>": <next offset>}}`.
pub const OFFSETS_PROPERTY: &str = "topicberg.offsets";

/// Next offsets per partition of one topic, as kept in a table's snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TableOffsets(pub BTreeMap<String, BTreeMap<i32, i64>>);

impl TableOffsets {
    /// Parses the summary property; an absent property means no offsets.
    pub fn from_summary(summary: Option<&BTreeMap<String, String>>) -> Result<Self, String> {
        match summary.and_then(|s| s.get(OFFSETS_PROPERTY)) {
            None => Ok(Self::default()),
            Some(text) => serde_json::from_str(text).map_err(|e| {
                format!("the table's {OFFSETS_PROPERTY} summary property is not valid: {e}")
            }),
        }
    }

    /// The next offset recorded for a partition.
    pub fn get(&self, topic: &str, partition: i32) -> Option<i64> {
        self.0.get(topic).and_then(|p| p.get(&partition)).copied()
    }

    /// Records a partition's next offset.
    pub fn set(&mut self, topic: &str, partition: i32, next: i64) {
        self.0
            .entry(topic.to_string())
            .or_default()
            .insert(partition, next);
    }

    /// The JSON text for the summary property.
    pub fn to_summary_value(&self) -> String {
        serde_json::to_string(self).expect("offsets serialise")
    }
}

/// One partition's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionPlan {
    /// What to read.
    pub range: PartitionRange,
    /// The group's committed offset differs from where we start (a crash
    /// after the Iceberg commit, or a new group): commit it even if nothing
    /// new is read.
    pub repair_group: bool,
    /// Messages that expired (retention) between the last sync and now:
    /// `start` was raised to the low watermark by this many.
    pub expired: i64,
}

/// Why a partition cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{topic}[{partition}]: {reason}")]
pub struct PlanError {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// What is wrong and how to fix it.
    pub reason: String,
}

/// Decides where each partition starts, reconciling the table's offsets
/// (the truth: they were committed in the same snapshot as the data) with
/// the consumer group's:
/// - table and group agree, or the group is behind (a crash between the
///   Iceberg commit and the group commit): start from the table's and
///   repair the group;
/// - the group is ahead of the table (something else moved it): refuse,
///   since reading from the group would skip messages the table never got;
/// - neither has an offset: start at the earliest retained offset.
pub fn plan_partitions(
    group: &str,
    table: &str,
    states: &[PartitionState],
    table_offsets: &TableOffsets,
) -> Result<Vec<PartitionPlan>, PlanError> {
    states
        .iter()
        .map(|s| {
            let recorded = table_offsets.get(&s.topic, s.partition);
            let start = match (recorded, s.committed) {
                (Some(t), Some(g)) if g > t => {
                    return Err(PlanError {
                        topic: s.topic.clone(),
                        partition: s.partition,
                        reason: format!(
                            "consumer group {group} is at offset {g} but table {table} holds messages only up to offset {t}; \
                             something else moved the group, and starting from it would skip {} messages. \
                             Reset the group to the table's offset (kafka-consumer-groups.sh --group {group} --reset-offsets \
                             --topic {}:{} --to-offset {t} --execute) or use a new consumer_group",
                            g - t,
                            s.topic,
                            s.partition
                        ),
                    })
                }
                (None, Some(g)) if g > s.low => {
                    return Err(PlanError {
                        topic: s.topic.clone(),
                        partition: s.partition,
                        reason: format!(
                            "consumer group {group} has committed offset {g} but table {table} has no record of this \
                             partition (a new or recreated table?); starting from the group would skip {} messages \
                             the table never got. Delete the group's offsets (kafka-consumer-groups.sh --group {group} \
                             --delete-offsets --topic {}) or use a new consumer_group",
                            g - s.low,
                            s.topic
                        ),
                    })
                }
                (Some(t), _) if t > s.high => {
                    return Err(PlanError {
                        topic: s.topic.clone(),
                        partition: s.partition,
                        reason: format!(
                            "table {table} holds messages up to offset {t} but the partition ends at offset {}; \
                             the topic was deleted and recreated (or truncated). Sync it into a new table \
                             (set `table` on its [[streams]] entry) or drop the table",
                            s.high
                        ),
                    })
                }
                (Some(t), _) => t,
                (None, _) => s.low,
            };
            let expired = (s.low - start).max(0);
            let start = start.max(s.low);
            let end = s.high.max(start);
            Ok(PartitionPlan {
                range: PartitionRange {
                    topic: s.topic.clone(),
                    partition: s.partition,
                    start,
                    end,
                },
                repair_group: s.committed != Some(start),
                expired,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(committed: Option<i64>, low: i64, high: i64) -> PartitionState {
        PartitionState {
            topic: "orders".into(),
            partition: 0,
            low,
            high,
            committed,
        }
    }

    fn offsets(next: Option<i64>) -> TableOffsets {
        let mut t = TableOffsets::default();
        if let Some(n) = next {
            t.set("orders", 0, n);
        }
        t
    }

    #[test]
    fn new_group_and_table_start_at_the_earliest_retained_offset() {
        let plan = plan_partitions("g", "t", &[state(None, 5, 48)], &offsets(None)).unwrap();
        assert_eq!((plan[0].range.start, plan[0].range.end), (5, 48));
        assert!(plan[0].repair_group);
    }

    #[test]
    fn crash_after_iceberg_commit_resumes_from_the_table_and_repairs_the_group() {
        let plan =
            plan_partitions("g", "t", &[state(Some(40), 0, 60)], &offsets(Some(48))).unwrap();
        assert_eq!(plan[0].range.start, 48);
        assert!(plan[0].repair_group);
    }

    #[test]
    fn group_ahead_of_table_is_refused_with_the_fix() {
        let err =
            plan_partitions("g", "t", &[state(Some(50), 0, 60)], &offsets(Some(48))).unwrap_err();
        assert!(
            err.to_string().contains("something else moved the group"),
            "{err}"
        );
        assert!(err.to_string().contains("--to-offset 48"), "{err}");
        let err = plan_partitions("g", "t", &[state(Some(50), 0, 60)], &offsets(None)).unwrap_err();
        assert!(
            err.to_string().contains("no record of this partition"),
            "{err}"
        );
    }

    #[test]
    fn table_beyond_the_partition_end_means_a_recreated_topic() {
        let err = plan_partitions("g", "t", &[state(None, 0, 40)], &offsets(Some(48))).unwrap_err();
        assert!(err.to_string().contains("deleted and recreated"), "{err}");
    }

    #[test]
    fn agreeing_offsets_need_no_repair() {
        let plan =
            plan_partitions("g", "t", &[state(Some(48), 0, 48)], &offsets(Some(48))).unwrap();
        assert_eq!((plan[0].range.start, plan[0].range.end), (48, 48));
        assert!(!plan[0].repair_group);
    }

    #[test]
    fn expired_messages_are_counted_not_hidden() {
        let plan =
            plan_partitions("g", "t", &[state(Some(10), 30, 60)], &offsets(Some(10))).unwrap();
        assert_eq!(plan[0].range.start, 30);
        assert_eq!(plan[0].expired, 20);
    }

    #[test]
    fn offsets_round_trip_through_the_summary() {
        let mut t = TableOffsets::default();
        t.set("orders", 0, 48);
        t.set("orders", 3, 7);
        let summary = BTreeMap::from([(OFFSETS_PROPERTY.to_string(), t.to_summary_value())]);
        assert_eq!(TableOffsets::from_summary(Some(&summary)).unwrap(), t);
        assert_eq!(t.to_summary_value(), r#"{"orders":{"0":48,"3":7}}"#);
    }
}

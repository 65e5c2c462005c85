//! Planning a sync: which partitions to read, from where to where, decided
//! from the table (the truth) and the consumer group (a copy).

use topicberg_kafka::{PartitionRange, PartitionState};

pub use topicberg_iceberg::offsets::{TableOffsets, OFFSETS_PROPERTY};

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
    /// `start` was raised to the low watermark by this many. Non-zero only
    /// when the stream sets `allow_data_loss`; otherwise planning fails.
    pub expired: i64,
}

impl PartitionPlan {
    /// The retention gap this plan skips over, if any: offsets
    /// `start - expired .. start` were deleted before the job read them.
    pub fn retention_gap(&self) -> Option<RetentionGap> {
        (self.expired > 0).then(|| RetentionGap {
            topic: self.range.topic.clone(),
            partition: self.range.partition,
            from: self.range.start - self.expired,
            to: self.range.start,
        })
    }
}

/// Messages that retention deleted before the job read them: the table's
/// recorded next offset `from` is below the partition's log start offset
/// `to`, so offsets `from..to` are gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionGap {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The first lost offset (the table's recorded next offset).
    pub from: i64,
    /// The log start offset: the first offset still retained (the exclusive
    /// end of the loss).
    pub to: i64,
}

impl RetentionGap {
    /// How many messages were lost.
    pub fn lost(&self) -> i64 {
        self.to - self.from
    }

    /// What happened, without the topic and partition: the text shared by
    /// the error and the warning.
    pub fn description(&self) -> String {
        format!(
            "offsets {}..{} ({} messages) were deleted by the topic's retention before this job read them; they are lost",
            self.from,
            self.to,
            self.lost()
        )
    }

    /// The warning logged when the stream allows data loss.
    pub fn warning(&self) -> String {
        format!(
            "{}[{}]: {}. allow_data_loss = true on this stream: going on from offset {}",
            self.topic,
            self.partition,
            self.description(),
            self.to
        )
    }

    fn into_error(self) -> PlanError {
        PlanError {
            reason: format!(
                "{}. Set allow_data_loss = true on the [[streams]] entry for this topic to accept the loss and go on",
                self.description()
            ),
            topic: self.topic,
            partition: self.partition,
        }
    }
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
/// - neither has an offset: start at the earliest retained offset (so a
///   partition added to the topic since the last sync is read from its
///   beginning);
/// - the table's offset is below the log start offset (retention deleted
///   messages the job never read): refuse with the lost range, unless
///   `allow_data_loss`, which starts at the log start offset and counts the
///   loss in [`PartitionPlan::expired`].
pub fn plan_partitions(
    group: &str,
    table: &str,
    states: &[PartitionState],
    table_offsets: &TableOffsets,
    allow_data_loss: bool,
) -> Result<Vec<PartitionPlan>, PlanError> {
    states
        .iter()
        .map(|s| {
            let recorded = table_offsets.get(&s.topic, s.partition);
            plan_partition(group, table, s, recorded, allow_data_loss)
        })
        .collect()
}

/// Where a routed topic's read starts (`table` a template, see
/// `route.rs`): from the consumer group's offsets, which move only once
/// every table the messages named committed them (the tables' own offsets
/// then skip what each already holds); without them from the earliest
/// retained offset. Retention past the group's offset fails as for a
/// table's, and so does a group ahead of the partition's end.
pub fn plan_route_partitions(
    group: &str,
    route: &str,
    states: &[PartitionState],
    allow_data_loss: bool,
) -> Result<Vec<PartitionPlan>, PlanError> {
    states
        .iter()
        .map(|s| plan_partition(group, route, s, s.committed, allow_data_loss))
        .collect()
}

/// A routed table's plans: the route's (`anchor`), each partition from
/// where the table's offsets say it holds every message it was named by
/// when that is later (the table committed a round the group did not
/// move past: another of the route's tables failed). A table ahead of the
/// partition's end fails as a table's does.
pub fn plan_routed_table(
    table: &str,
    anchor: &[PartitionPlan],
    states: &[PartitionState],
    offsets: &TableOffsets,
) -> Result<Vec<PartitionPlan>, PlanError> {
    anchor
        .iter()
        .map(|p| {
            let (topic, partition) = (&p.range.topic, p.range.partition);
            let recorded = offsets.get(topic, partition);
            let high = states
                .iter()
                .find(|s| s.partition == partition)
                .map_or(p.range.end, |s| s.high);
            if let Some(t) = recorded.filter(|t| *t > high) {
                return Err(PlanError {
                    topic: topic.clone(),
                    partition,
                    reason: format!(
                        "table {table} holds messages up to offset {t} but the partition ends at \
                         offset {high}; the topic was deleted and recreated (or truncated): drop \
                         the routed tables or route into new ones"
                    ),
                });
            }
            let start = recorded.map_or(p.range.start, |t| t.max(p.range.start));
            let mut plan = p.clone();
            plan.range.start = start.min(p.range.end);
            plan.repair_group = false;
            plan.expired = 0;
            Ok(plan)
        })
        .collect()
}

/// How many messages a follower's round reads of each table at most:
/// `sync.commit_records`, and `sync.commit_mb` divided by the bytes per
/// message of the table's last committed round.
#[derive(Debug, Clone, Default)]
pub struct RecordCaps {
    /// `sync.commit_records`.
    pub records: u64,
    /// `sync.commit_mb`, in bytes.
    pub bytes: u64,
    /// Key and value bytes per message of each table's last committed round
    /// (`namespace.table`); a table not in it is capped by `records` only.
    pub bytes_per_record: std::collections::BTreeMap<String, u64>,
}

impl RecordCaps {
    /// The cap of `table`'s round (at least one message).
    pub fn for_table(&self, table: &str) -> u64 {
        let by_bytes = match self.bytes_per_record.get(table) {
            Some(&per) if per > 0 => self.bytes / per,
            _ => u64::MAX,
        };
        self.records.min(by_bytes).max(1)
    }
}

/// Caps a table's plans at `cap` messages in all (a follower's
/// `commit_records`): each partition with messages waiting gets an even
/// share, and a partition that needs less leaves the rest to the others.
/// True when some partition's range was cut (more is waiting).
pub fn cap_plans(plans: &mut [PartitionPlan], cap: u64) -> bool {
    let mut waiting: Vec<usize> = (0..plans.len())
        .filter(|&i| plans[i].range.end > plans[i].range.start)
        .collect();
    // The smallest backlogs first, so what they leave goes to the others.
    waiting.sort_by_key(|&i| plans[i].range.end - plans[i].range.start);
    let mut left = cap;
    let mut cut = false;
    for (n, &i) in waiting.iter().enumerate() {
        let share = left.div_ceil((waiting.len() - n) as u64).max(1);
        let range = &mut plans[i].range;
        let len = (range.end - range.start) as u64;
        if len > share {
            range.end = range.start + share as i64;
            cut = true;
        }
        left = left.saturating_sub(len.min(share));
    }
    cut
}

/// One partition's plan (see [`plan_partitions`]), from the offset the
/// table records for it.
fn plan_partition(
    group: &str,
    table: &str,
    s: &PartitionState,
    recorded: Option<i64>,
    allow_data_loss: bool,
) -> Result<PartitionPlan, PlanError> {
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
                     the table never got. If the table is new or was recreated empty, delete the group's \
                     offsets (kafka-consumer-groups.sh --group {group} --delete-offsets --topic {}) or use a \
                     new consumer_group. If the table already holds this partition's messages, record where \
                     they end instead (deleting the offsets would write them again): ALTER TABLE {table} SET \
                     TBLPROPERTIES ('topicberg.offsets.{}' = '{{\"{}\": <next offset>}}')",
                    g - s.low,
                    s.topic,
                    s.topic,
                    s.partition
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
        (Some(t), _) if t < s.low && !allow_data_loss => {
            return Err(RetentionGap {
                topic: s.topic.clone(),
                partition: s.partition,
                from: t,
                to: s.low,
            }
            .into_error())
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
    fn a_route_starts_at_the_group_and_each_table_past_what_it_holds() {
        // The group at 40 (the route's start), the partition at 10..100.
        let states = [state(Some(40), 10, 100)];
        let anchor = plan_route_partitions("g", "ns.{t}", &states, false).unwrap();
        assert_eq!((anchor[0].range.start, anchor[0].range.end), (40, 100));
        // Without group offsets: from the earliest retained offset.
        let fresh = plan_route_partitions("g", "ns.{t}", &[state(None, 10, 100)], false).unwrap();
        assert_eq!(fresh[0].range.start, 10);
        // Retention past the group's offset fails as a table's does.
        assert!(plan_route_partitions("g", "ns.{t}", &[state(Some(5), 10, 100)], false).is_err());
        let range = |recorded| {
            let plans = plan_routed_table("ns.t", &anchor, &states, &offsets(recorded)).unwrap();
            (plans[0].range.start, plans[0].range.end)
        };
        // A new table, or one behind the group (it got no message since):
        // from the group. One ahead (it committed a round the group did
        // not move past): from its own offsets; past the end: nothing.
        assert_eq!(range(None), (40, 100));
        assert_eq!(range(Some(20)), (40, 100));
        assert_eq!(range(Some(70)), (70, 100));
        assert_eq!(range(Some(100)), (100, 100));
        // Ahead of the partition's end: the topic was recreated.
        assert!(plan_routed_table("ns.t", &anchor, &states, &offsets(Some(101))).is_err());
    }

    #[test]
    fn new_group_and_table_start_at_the_earliest_retained_offset() {
        let plan = plan_partitions("g", "t", &[state(None, 5, 48)], &offsets(None), false).unwrap();
        assert_eq!((plan[0].range.start, plan[0].range.end), (5, 48));
        assert!(plan[0].repair_group);
    }

    #[test]
    fn crash_after_iceberg_commit_resumes_from_the_table_and_repairs_the_group() {
        let plan = plan_partitions(
            "g",
            "t",
            &[state(Some(40), 0, 60)],
            &offsets(Some(48)),
            false,
        )
        .unwrap();
        assert_eq!(plan[0].range.start, 48);
        assert!(plan[0].repair_group);
    }

    #[test]
    fn group_ahead_of_table_is_refused_with_the_fix() {
        let err = plan_partitions(
            "g",
            "t",
            &[state(Some(50), 0, 60)],
            &offsets(Some(48)),
            false,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("something else moved the group"),
            "{err}"
        );
        assert!(err.to_string().contains("--to-offset 48"), "{err}");
        let err = plan_partitions("g", "t", &[state(Some(50), 0, 60)], &offsets(None), false)
            .unwrap_err();
        assert!(
            err.to_string().contains("no record of this partition"),
            "{err}"
        );
    }

    #[test]
    fn table_beyond_the_partition_end_means_a_recreated_topic() {
        let err = plan_partitions("g", "t", &[state(None, 0, 40)], &offsets(Some(48)), false)
            .unwrap_err();
        assert!(err.to_string().contains("deleted and recreated"), "{err}");
    }

    #[test]
    fn agreeing_offsets_need_no_repair() {
        let plan = plan_partitions(
            "g",
            "t",
            &[state(Some(48), 0, 48)],
            &offsets(Some(48)),
            false,
        )
        .unwrap();
        assert_eq!((plan[0].range.start, plan[0].range.end), (48, 48));
        assert!(!plan[0].repair_group);
    }

    #[test]
    fn retention_gap_fails_with_the_partition_and_the_lost_range() {
        let err = plan_partitions(
            "g",
            "t",
            &[state(Some(10), 30, 60)],
            &offsets(Some(10)),
            false,
        )
        .unwrap_err();
        assert_eq!((err.topic.as_str(), err.partition), ("orders", 0));
        assert_eq!(
            err.to_string(),
            "orders[0]: offsets 10..30 (20 messages) were deleted by the topic's retention before \
             this job read them; they are lost. Set allow_data_loss = true on the [[streams]] entry \
             for this topic to accept the loss and go on"
        );
        // The group's offset does not matter: the table is the truth.
        let err = plan_partitions("g", "t", &[state(None, 30, 60)], &offsets(Some(10)), false)
            .unwrap_err();
        assert!(err.to_string().contains("offsets 10..30"), "{err}");
    }

    #[test]
    fn retention_gap_with_allow_data_loss_starts_at_the_log_start_and_counts_the_loss() {
        let plan = plan_partitions(
            "g",
            "t",
            &[state(Some(10), 30, 60)],
            &offsets(Some(10)),
            true,
        )
        .unwrap();
        assert_eq!((plan[0].range.start, plan[0].range.end), (30, 60));
        assert_eq!(plan[0].expired, 20);
        assert!(plan[0].repair_group);
        let gap = plan[0].retention_gap().expect("a gap");
        assert_eq!((gap.from, gap.to, gap.lost()), (10, 30, 20));
        assert_eq!(
            gap.warning(),
            "orders[0]: offsets 10..30 (20 messages) were deleted by the topic's retention before \
             this job read them; they are lost. allow_data_loss = true on this stream: going on from \
             offset 30"
        );
    }

    #[test]
    fn no_gap_when_the_table_is_at_or_past_the_log_start() {
        for allow in [false, true] {
            let plan = plan_partitions(
                "g",
                "t",
                &[state(Some(30), 30, 60)],
                &offsets(Some(30)),
                allow,
            )
            .unwrap();
            assert_eq!(plan[0].range.start, 30);
            assert_eq!(plan[0].expired, 0);
            assert_eq!(plan[0].retention_gap(), None);
        }
    }

    #[test]
    fn a_partition_the_table_never_saw_starts_at_its_earliest_offset() {
        // A partition added since the last sync: the table records partition
        // 0 only; partition 1 is read from its low watermark, not skipped.
        let states = [
            state(Some(48), 0, 60),
            PartitionState {
                partition: 1,
                ..state(None, 0, 7)
            },
        ];
        let plan = plan_partitions("g", "t", &states, &offsets(Some(48)), false).unwrap();
        assert_eq!((plan[0].range.start, plan[0].range.end), (48, 60));
        assert_eq!((plan[1].range.start, plan[1].range.end), (0, 7));
        assert_eq!(plan[1].expired, 0);
        assert!(plan[1].repair_group);
    }

    fn planned(lens: &[i64]) -> Vec<PartitionPlan> {
        lens.iter()
            .enumerate()
            .map(|(p, &len)| PartitionPlan {
                range: PartitionRange {
                    topic: "t".into(),
                    partition: p as i32,
                    start: 100,
                    end: 100 + len,
                },
                repair_group: false,
                expired: 0,
            })
            .collect()
    }

    fn lens(plans: &[PartitionPlan]) -> Vec<i64> {
        plans.iter().map(|p| p.range.end - p.range.start).collect()
    }

    #[test]
    fn a_capped_round_shares_its_records_over_the_partitions_waiting() {
        // A small backlog is read whole; the others share what it left.
        let mut plans = planned(&[10, 1000, 0, 1000]);
        assert!(cap_plans(&mut plans, 300));
        assert_eq!(lens(&plans), [10, 145, 0, 145]);
        // Under the cap: nothing cut.
        let mut plans = planned(&[10, 20]);
        assert!(!cap_plans(&mut plans, 300));
        assert_eq!(lens(&plans), [10, 20]);
        // A cap below the partition count still reads a message from each.
        let mut plans = planned(&[5, 5, 5]);
        assert!(cap_plans(&mut plans, 1));
        assert_eq!(lens(&plans), [1, 1, 1]);
    }

    #[test]
    fn record_caps_take_the_smaller_of_records_and_bytes_over_bytes_per_message() {
        let caps = RecordCaps {
            records: 1_000_000,
            bytes: 256_000_000,
            bytes_per_record: [
                ("ns.small".to_owned(), 100),
                ("ns.large".to_owned(), 100_000),
            ]
            .into_iter()
            .collect(),
        };
        assert_eq!(caps.for_table("ns.small"), 1_000_000);
        assert_eq!(caps.for_table("ns.large"), 2_560);
        // Not read yet: only the record cap.
        assert_eq!(caps.for_table("ns.new"), 1_000_000);
        let huge = RecordCaps {
            bytes: 1,
            ..caps.clone()
        };
        assert_eq!(
            huge.for_table("ns.large"),
            1,
            "at least one message a round"
        );
    }
}

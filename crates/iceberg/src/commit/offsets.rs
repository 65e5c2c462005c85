//! The table's record of the Kafka offsets its rows came from, kept where
//! every engine's maintenance leaves it, and the check that makes a commit
//! land only on the offsets its sync started from.
//!
//! - Table properties `topicberg.offsets.<topic>` = `{"<partition>": <next
//!   offset>}`, one property per topic, so two jobs (or two topics) writing
//!   one table never overwrite each other's record. Set in the same REST
//!   commit as the snapshot (one request, guarded by the same
//!   requirements), they survive compaction, snapshot expiry, orphan-file
//!   removal, `ALTER TABLE`, branches and tags: every engine carries table
//!   properties forward.
//! - The snapshot summary `topicberg.offsets` = `{"<topic>": {...}}` of the
//!   topics the snapshot moved: which snapshot carried which offsets. A
//!   table written before the properties existed is read from its newest
//!   snapshot on `main` that has it.
//!
//! [`OffsetsAdvance`] is what a commit does to one topic's record: the
//! partitions it moves, from the offsets its plan read to the new ones. The
//! commit loop checks it against every table it builds on
//! (`OffsetsAdvance::on`); when another writer moved any of those
//! partitions (another sync of the same job running at once), the commit
//! does not land: an error of kind [`IcebergErrorKind::Superseded`].

use std::collections::BTreeMap;

use iceberg::spec::TableMetadata;
use serde::{Deserialize, Serialize};

use crate::error::{IcebergError, IcebergErrorKind};
use crate::table_metadata::main_history;

/// The snapshot summary property: `{"<topic>": {"<partition>": <next>}}`.
pub const OFFSETS_PROPERTY: &str = "topicberg.offsets";

/// The table property prefix: `topicberg.offsets.<topic>` holds
/// `{"<partition>": <next>}` for that topic.
pub const OFFSETS_TABLE_PROPERTY_PREFIX: &str = "topicberg.offsets.";

/// Why a table's record of offsets cannot be read (the same table fails
/// again: never retryable).
#[derive(Debug, thiserror::Error)]
pub enum OffsetsError {
    /// A snapshot's [`OFFSETS_PROPERTY`] summary entry is not the JSON it
    /// must be.
    #[error(
        "the table's {} summary property is not valid: {source}",
        OFFSETS_PROPERTY
    )]
    Summary {
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
    /// A `topicberg.offsets.<topic>` table property is not the JSON it
    /// must be.
    #[error(
        "the table property {key} is not valid ({source}); it must be \
         {{\"<partition>\": <next offset>}}"
    )]
    Property {
        /// The property.
        key: String,
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
}

/// Next offsets per partition, per topic, as a table records them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TableOffsets(pub BTreeMap<String, BTreeMap<i32, i64>>);

impl TableOffsets {
    /// The offsets of the newest snapshot that records them, from the
    /// values of its [`OFFSETS_PROPERTY`] summary entry along a history,
    /// newest first (`None` for a snapshot without one). Another writer's
    /// snapshot on top (a compaction, a Spark job) carries no offsets of
    /// ours and must not hide them.
    pub fn from_history<'a>(
        recorded: impl IntoIterator<Item = Option<&'a String>>,
    ) -> Result<Self, OffsetsError> {
        match recorded.into_iter().flatten().next() {
            Some(text) => {
                serde_json::from_str(text).map_err(|source| OffsetsError::Summary { source })
            }
            None => Ok(Self::default()),
        }
    }

    /// The table's record: each topic's table property, and for a topic
    /// without one (a table written before the properties existed) what
    /// the newest snapshot on `main` recording offsets says.
    pub fn of_metadata(metadata: &TableMetadata) -> Result<Self, OffsetsError> {
        let mut out = Self::from_history(
            main_history(metadata).map(|s| s.summary().additional_properties.get(OFFSETS_PROPERTY)),
        )?;
        for (key, value) in metadata.properties() {
            let Some(topic) = key.strip_prefix(OFFSETS_TABLE_PROPERTY_PREFIX) else {
                continue;
            };
            let partitions: BTreeMap<i32, i64> =
                serde_json::from_str(value).map_err(|source| OffsetsError::Property {
                    key: key.clone(),
                    source,
                })?;
            out.0.insert(topic.to_string(), partitions);
        }
        Ok(out)
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

/// What one commit does to one topic's record: each partition it wrote,
/// from the offset its plan read (`None`: the table had no record of it)
/// to the next offset after the messages it committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetsAdvance {
    /// The topic.
    pub topic: String,
    /// Partition -> (recorded when planned, next after this commit).
    pub partitions: BTreeMap<i32, (Option<i64>, i64)>,
}

/// What an [`OffsetsAdvance`] adds to a commit built on one table state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OffsetsUpdate {
    /// The table property (key, value).
    pub(crate) property: (String, String),
    /// The summary property value.
    pub(crate) summary: String,
}

impl OffsetsAdvance {
    /// Checks that `metadata` (the table a commit is about to build on)
    /// still records, for every partition of the advance, the offset the
    /// plan read; then gives the topic's new record: the recorded one
    /// (other partitions kept as they are) with this commit's partitions
    /// moved. A moved partition is [`IcebergErrorKind::Superseded`]: another
    /// writer committed that range first, and committing it again would
    /// duplicate it.
    pub(crate) fn on(&self, metadata: &TableMetadata) -> Result<OffsetsUpdate, IcebergError> {
        let step = format!(
            "checking the offsets of topic {} recorded in {}",
            self.topic,
            metadata.location()
        );
        let recorded = TableOffsets::of_metadata(metadata).map_err(|e| {
            IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()).with_source(e)
        })?;
        let moved: Vec<String> = self
            .partitions
            .iter()
            .filter_map(|(partition, (planned, next))| {
                let now = recorded.get(&self.topic, *partition);
                (now != *planned).then(|| {
                    let from = planned.map_or("the start".to_string(), |o| o.to_string());
                    let to = now.map_or("nothing".to_string(), |o| o.to_string());
                    format!(
                        "partition {partition}: offsets {from}..{to} (this sync read up to {next})"
                    )
                })
            })
            .collect();
        if !moved.is_empty() {
            return Err(IcebergError::new(
                IcebergErrorKind::Superseded,
                step,
                format!(
                    "another sync of this job committed first ({}); those messages are in the table \
                     already, so this sync's snapshot was not committed (it would duplicate them). \
                     The next sync goes on from the new offsets",
                    moved.join(", ")
                ),
            ));
        }
        let mut partitions = recorded.0.get(&self.topic).cloned().unwrap_or_default();
        for (partition, (_, next)) in &self.partitions {
            partitions.insert(*partition, *next);
        }
        let property = (
            format!("{OFFSETS_TABLE_PROPERTY_PREFIX}{}", self.topic),
            serde_json::to_string(&partitions).expect("offsets serialise"),
        );
        let summary = TableOffsets(BTreeMap::from([(self.topic.clone(), partitions)]));
        Ok(OffsetsUpdate {
            property,
            summary: summary.to_summary_value(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_survive_another_writers_snapshot_on_top() {
        let mut t = TableOffsets::default();
        t.set("orders", 0, 48);
        let ours = t.to_summary_value();
        let compaction = None;
        let newest_first = [compaction, Some(&ours)];
        assert_eq!(TableOffsets::from_history(newest_first).unwrap(), t);
        assert_eq!(
            TableOffsets::from_history([compaction]).unwrap(),
            TableOffsets::default()
        );
    }

    #[test]
    fn offsets_round_trip_through_the_summary() {
        let mut t = TableOffsets::default();
        t.set("orders", 0, 48);
        t.set("orders", 3, 7);
        let text = t.to_summary_value();
        assert_eq!(TableOffsets::from_history([Some(&text)]).unwrap(), t);
        assert_eq!(text, r#"{"orders":{"0":48,"3":7}}"#);
    }

    fn advance(partitions: &[(i32, Option<i64>, i64)]) -> OffsetsAdvance {
        OffsetsAdvance {
            topic: "orders.v1".into(),
            partitions: partitions.iter().map(|(p, a, b)| (*p, (*a, *b))).collect(),
        }
    }

    /// Two syncs planned from the same offsets: the first lands, the second
    /// (built on the table the first left) must not, on the embedded
    /// catalog's real commit path; the record lives in a table property
    /// per topic that keeps other partitions and topics.
    #[tokio::test]
    async fn a_commit_lands_only_on_the_offsets_its_plan_read() {
        use crate::write::schema::{Column, ColumnType};
        use crate::Destination;
        let dir = std::env::temp_dir().join(format!("tb-offsets-{}", uuid::Uuid::new_v4()));
        let destination = Destination::open_embedded(&dir, "default").unwrap();
        let ns = vec!["tb".to_string()];
        let columns = [Column::optional("id", 1, ColumnType::Long)];
        let mut first = destination
            .ensure_table(&ns, "t", &columns, iceberg::spec::FormatVersion::V2)
            .await
            .unwrap();
        let mut second = first.clone();
        // Another topic's record in the same table, set by another job.
        let other = advance(&[(0, None, 7)]);
        let other = OffsetsAdvance {
            topic: "customers".into(),
            ..other
        };
        destination
            .commit_append_moving(&mut first, Vec::new(), other)
            .await
            .unwrap();

        let done = destination
            .commit_append_moving(
                &mut first,
                Vec::new(),
                advance(&[(0, None, 100), (1, None, 40)]),
            )
            .await
            .unwrap();
        assert_eq!(
            done.summary[OFFSETS_PROPERTY],
            r#"{"orders.v1":{"0":100,"1":40}}"#
        );
        let err = destination
            .commit_append_moving(&mut second, Vec::new(), advance(&[(0, None, 250)]))
            .await
            .unwrap_err();
        assert_eq!(err.kind, IcebergErrorKind::Superseded, "{err}");
        assert!(
            err.detail.contains(
                "another sync of this job committed first (partition 0: offsets the start..100"
            ),
            "{err}"
        );
        // The table is as the first commit left it; the next plan reads on.
        destination.refresh(&mut second).await.unwrap();
        let recorded = TableOffsets::of_metadata(second.metadata()).unwrap();
        assert_eq!(recorded.get("orders.v1", 0), Some(100));
        assert_eq!(recorded.get("customers", 0), Some(7));
        assert_eq!(
            second.metadata().properties()["topicberg.offsets.orders.v1"],
            r#"{"0":100,"1":40}"#
        );
        // Moving partition 1 only keeps partition 0's entry.
        destination
            .commit_append_moving(&mut second, Vec::new(), advance(&[(1, Some(40), 55)]))
            .await
            .unwrap();
        let recorded = TableOffsets::of_metadata(second.metadata()).unwrap();
        assert_eq!(
            (recorded.get("orders.v1", 0), recorded.get("orders.v1", 1)),
            (Some(100), Some(55))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! One table's state through a sync's stages, and why a stage failed it.

use std::sync::Arc;
use std::time::Instant;

use topicberg_core::{RegistryValues, TableSettings};
use topicberg_iceberg::{IcebergError, IcebergErrorKind, OffsetsAdvance, TableHandle};
use topicberg_kafka::{DrainedPartition, PartitionState};

use super::failure::{CommitError, TableFailure};
use super::pipeline::{TableInput, TableOutput};
use super::plan::{PartitionPlan, TableOffsets};
use super::report::{TableReport, TableStatus};
use crate::error::SyncErrorKind;

/// The stage of a sync a table failed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Loading the table and planning its partitions.
    Plan,
    /// Creating a new table from a sample of its messages.
    Create,
    /// Reading the table's columns for the decoders.
    Columns,
    /// Draining, decoding and writing files.
    Drain,
    /// Committing the dead letters and the table's snapshot.
    Commit,
}

impl Stage {
    /// The stage's name in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Create => "create",
            Self::Columns => "columns",
            Self::Drain => "drain",
            Self::Commit => "commit",
        }
    }
}

/// Why a table failed: the stage and what went wrong (the text names the
/// topic, partition, offset or file where one is known).
#[derive(Debug, thiserror::Error)]
#[error("{cause}")]
pub struct TableError {
    /// Where it failed.
    pub stage: Stage,
    /// What went wrong and how to fix it.
    pub cause: TableFailure,
}

/// One table as the sync goes through it.
pub(super) struct TableState {
    pub(super) settings: TableSettings,
    /// `namespace.table`.
    pub(super) table: String,
    pub(super) handle: Option<TableHandle>,
    /// The offsets the table recorded when planned (then as committed).
    pub(super) offsets: TableOffsets,
    /// A writer's round starts past its file sets still waiting for the
    /// committer (`handoff.rs`); `None`: from `offsets`.
    pub(super) from: Option<TableOffsets>,
    /// This worker's part in committing the table this round.
    pub(super) role: super::handoff::Role,
    pub(super) plans: Vec<PartitionPlan>,
    /// The partitions' watermarks and group offsets at the start.
    pub(super) committed: Vec<PartitionState>,
    /// What the drain reads (set by the columns stage).
    pub(super) input: Option<TableInput>,
    /// What the drain wrote (set by the drain stage).
    pub(super) output: Option<TableOutput>,
    pub(super) report: TableReport,
    pub(super) started: Instant,
    /// Registry-framed values (avro, protobuf or auto), decided at the
    /// start of the sync; `None`: JSON.
    pub(super) registry: Option<Arc<RegistryValues>>,
    /// The route this table is one of (its stream's `table` a template).
    pub(super) route: Option<super::route_group::RoutedTable>,
}

impl TableState {
    pub(super) fn new(
        settings: TableSettings,
        table: String,
        committed: Vec<PartitionState>,
    ) -> Self {
        Self {
            report: TableReport::new(&settings.topic, &table),
            settings,
            table,
            handle: None,
            offsets: TableOffsets::default(),
            from: None,
            role: super::handoff::Role::Alone,
            plans: Vec::new(),
            committed,
            input: None,
            output: None,
            started: Instant::now(),
            registry: None,
            route: None,
        }
    }

    pub(super) fn topic(&self) -> &str {
        &self.settings.topic
    }

    pub(super) fn fail(&mut self, stage: Stage, cause: impl Into<TableFailure>) {
        let error = TableError {
            stage,
            cause: cause.into(),
        };
        self.report.waits_on_destination =
            error.cause.kind() == SyncErrorKind::Iceberg && error.cause.retryable();
        tracing::error!(table = %self.table, stage = stage.as_str(), error = %error, "table failed");
        self.report.status = TableStatus::Failed;
        self.report.error = Some(error.to_string());
    }

    pub(super) fn failed(&self) -> bool {
        self.report.status == TableStatus::Failed
    }

    /// Another sync committed this table's offsets first: nothing of this
    /// sync lands in the table (see [`TableStatus::Superseded`]).
    pub(super) fn supersede(&mut self, why: impl Into<String>) {
        let why = why.into();
        tracing::warn!(table = %self.table, topic = %self.settings.topic, "{why}");
        self.report.status = TableStatus::Superseded;
        self.report.note = Some(why);
    }

    /// What committing `drained` does to the table's offsets: each
    /// partition from the offset the plan read to where the drain ended.
    pub(super) fn advance(&self, drained: &[DrainedPartition]) -> OffsetsAdvance {
        OffsetsAdvance {
            topic: self.settings.topic.clone(),
            partitions: drained
                .iter()
                .map(|d| {
                    let from = self.from.as_ref().unwrap_or(&self.offsets);
                    let planned = from.get(&d.topic, d.partition);
                    (d.partition, (planned, d.next_offset))
                })
                .collect(),
        }
    }

    /// Records a committed advance as the table's offsets.
    pub(super) fn record_committed(&mut self, advance: &OffsetsAdvance) {
        for (partition, (_, next)) in &advance.partitions {
            self.offsets.set(&advance.topic, *partition, *next);
        }
    }

    /// The partitions' ranges with something to read.
    pub(super) fn ranges_to_read(&self) -> Vec<topicberg_kafka::PartitionRange> {
        self.plans
            .iter()
            .map(|p| p.range.clone())
            .filter(|r| r.start < r.end)
            .collect()
    }
}

/// Why a table's commit did not land.
#[derive(Debug)]
pub(crate) enum CommitRefused {
    /// Another sync committed the offsets first (its detail says which).
    Superseded(IcebergError),
    /// Anything else.
    Failed(CommitError),
}

impl CommitRefused {
    /// A refused snapshot commit.
    pub(crate) fn from_iceberg(e: IcebergError) -> Self {
        match e.kind {
            IcebergErrorKind::Superseded => Self::Superseded(e),
            _ => Self::Failed(CommitError::Snapshot(e)),
        }
    }
}

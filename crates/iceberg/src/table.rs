//! A loaded table ([`TableHandle`]): its identity, metadata, schemas and
//! snapshots, and the schema change it carries to its next commit.

use std::collections::BTreeMap;

use arrow_schema::SchemaRef as ArrowSchemaRef;
use iceberg::spec::{SchemaRef, TableMetadata};

use crate::catalog::rest::{LoadedTable, Namespace};
use crate::commit::schema_evolution::{PendingSchema, SchemaChange};
use crate::commit::summary::COMMIT_ID_PROPERTY;
use crate::error::IcebergError;
use crate::table_metadata::main_history;
use crate::write::schema::{arrow_schema, Column};

/// A loaded table: its identity, metadata and schemas. Refreshed by each
/// commit made through it.
#[derive(Debug, Clone)]
pub struct TableHandle {
    pub(crate) namespace: Namespace,
    pub(crate) name: String,
    pub(crate) table: LoadedTable,
    arrow_schema: ArrowSchemaRef,
    /// Columns added or widened locally, committed with the next snapshot
    /// (see [`TableHandle::with_columns`]).
    pub(crate) pending_schema: Option<Box<PendingSchema>>,
}

impl TableHandle {
    pub(crate) fn new(
        namespace: Namespace,
        name: String,
        table: LoadedTable,
    ) -> Result<Self, IcebergError> {
        let arrow_schema = arrow_schema(table.metadata.current_schema())?;
        Ok(Self {
            namespace,
            name,
            table,
            arrow_schema,
            pending_schema: None,
        })
    }

    /// The namespace.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The table name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `namespace.name`, as logs and errors name the table.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.namespace.join("."), self.name)
    }

    /// The table's current Iceberg schema (field ids as the catalog assigned
    /// them).
    pub fn schema(&self) -> &SchemaRef {
        self.table.metadata.current_schema()
    }

    /// The Arrow schema batches must be built in (field ids in
    /// `PARQUET:field_id` metadata).
    pub fn arrow_schema(&self) -> &ArrowSchemaRef {
        &self.arrow_schema
    }

    /// The table metadata as last loaded or committed.
    pub fn metadata(&self) -> &TableMetadata {
        &self.table.metadata
    }

    /// Where the catalog keeps the current metadata file.
    pub fn metadata_location(&self) -> Option<&str> {
        self.table.metadata_location.as_deref()
    }

    /// The summaries of the `main` branch's snapshots, newest first (from the
    /// loaded metadata: [`crate::Destination::refresh`] first for the latest).
    pub fn snapshot_summaries(&self) -> Vec<SnapshotInfo> {
        main_history(&self.table.metadata)
            .map(|snapshot| SnapshotInfo::of(snapshot))
            .collect()
    }

    /// The summary of the current snapshot of `main` (`None` for an empty
    /// table), e.g. to read `topicberg.offsets` back.
    pub fn current_summary(&self) -> Option<BTreeMap<String, String>> {
        let current = self.table.metadata.current_snapshot()?;
        Some(
            current
                .summary()
                .additional_properties
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    pub(crate) fn find_commit(&self, commit_id: &str) -> Option<SnapshotInfo> {
        self.snapshot_summaries()
            .into_iter()
            .find(|s| s.summary.get(COMMIT_ID_PROPERTY).map(String::as_str) == Some(commit_id))
    }
}

/// One snapshot of a table's `main` branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The snapshot id.
    pub snapshot_id: i64,
    /// The parent's id (`None` for the first snapshot).
    pub parent_snapshot_id: Option<i64>,
    /// The sequence number.
    pub sequence_number: i64,
    /// When it was committed (ms since the epoch).
    pub timestamp_ms: i64,
    /// `append`, `overwrite`, `delete` or `replace`.
    pub operation: String,
    /// The summary properties besides `operation`.
    pub summary: BTreeMap<String, String>,
}

impl SnapshotInfo {
    /// What `snapshot` says of itself.
    pub(crate) fn of(snapshot: &iceberg::spec::Snapshot) -> Self {
        Self {
            snapshot_id: snapshot.snapshot_id(),
            parent_snapshot_id: snapshot.parent_snapshot_id(),
            sequence_number: snapshot.sequence_number(),
            timestamp_ms: snapshot.timestamp_ms(),
            operation: snapshot.summary().operation.as_str().to_string(),
            summary: snapshot
                .summary()
                .additional_properties
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// Schema changes that ride along with the next commit (see
/// [`crate::commit::schema_evolution`]).
impl TableHandle {
    /// This table with `columns` as its schema, for writing data files now
    /// and committing the change with the next snapshot through this handle.
    /// `columns` lists every column with its field id; new ones get ids
    /// above the table's last column id. Without changes the handle comes
    /// back as it is.
    pub fn with_columns(&self, columns: &[Column]) -> Result<TableHandle, IcebergError> {
        let base = match &self.pending_schema {
            Some(p) => &p.base,
            None => &self.table,
        };
        match PendingSchema::plan(base, columns)? {
            None => TableHandle::new(self.namespace.clone(), self.name.clone(), base.clone()),
            Some(pending) => self.with_pending_schema(pending),
        }
    }

    /// The table as loaded in `pending.base`, with the pending schema
    /// applied locally.
    fn with_pending_schema(&self, pending: PendingSchema) -> Result<TableHandle, IcebergError> {
        let table = pending.apply()?;
        let mut handle = TableHandle::new(self.namespace.clone(), self.name.clone(), table)?;
        handle.pending_schema = Some(Box::new(pending));
        Ok(handle)
    }

    /// The schema changes this handle will commit with its next snapshot.
    pub fn pending_schema_changes(&self) -> &[SchemaChange] {
        self.pending_schema
            .as_ref()
            .map_or(&[], |p| p.changes.as_slice())
    }

    /// After a reload (this handle): `pending` applied again when the
    /// table's schema is still the one it was planned on; dropped when
    /// another writer made the same change (see `PendingSchema::rebase`);
    /// else a conflict (nothing committed, the data files use field ids
    /// the table may have given to other columns).
    pub(crate) fn reapply_pending_schema(
        self,
        pending: Option<Box<PendingSchema>>,
    ) -> Result<TableHandle, IcebergError> {
        let Some(pending) = pending else {
            return Ok(self);
        };
        match pending.rebase(&self.table, &self.name)? {
            Some(pending) => self.with_pending_schema(pending),
            None => Ok(self),
        }
    }
}

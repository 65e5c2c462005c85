//! `GET /api/jobs/{id}/tables/{table}`: one of the job's tables as its
//! catalog has it: schema, snapshots of `main`, row and file counts.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use topicberg_iceberg::{table_metadata, CatalogErrorKind, IcebergErrorKind, TableHandle};

use topicberg_sync::sync::dlq_rows::{newest_dead_letters, DeadLetterRow};

use crate::error::{ApiError, ApiResult};
use crate::job_file::JobFileError;
use crate::state::AppState;

/// A table page.
#[derive(Debug, Serialize)]
pub struct TableView {
    /// `<namespace>.<table>`.
    pub table: String,
    /// Where its files are.
    pub location: String,
    /// Its format version (2 or 3).
    pub format_version: u8,
    /// The current schema's columns.
    pub columns: Vec<ColumnView>,
    /// How many schemas the table has had.
    pub schema_versions: usize,
    /// Each schema, oldest first, with what it changed from the one before
    /// (top-level columns).
    pub schema_history: Vec<SchemaVersionView>,
    /// Rows in the current snapshot's data files, deleted ones included
    /// (its summary's `total-records`; `null` when the summary does not say,
    /// as for the counts below).
    pub rows_written: Option<i64>,
    /// Rows deleted by position deletes and deletion vectors
    /// (`total-position-deletes`). Live rows are `rows_written` less these
    /// only while no delete file outlived the data file it names (another
    /// engine's compaction may leave some until they are cleaned), so the
    /// page shows both, not a difference that could be wrong.
    pub rows_deleted: Option<i64>,
    /// Equality delete records (`total-equality-deletes`): each deletes
    /// every earlier row of its key, however many.
    pub equality_deletes: Option<i64>,
    /// Data files and delete files of the current snapshot.
    pub data_files: Option<i64>,
    /// See `data_files`.
    pub delete_files: Option<i64>,
    /// The partition spec as `partition_by` writes it (empty: unpartitioned).
    pub partition_by: Vec<String>,
    /// The sort order as `sort_by` writes it (empty: unsorted).
    pub sort_by: Vec<String>,
    /// The snapshots of `main`, newest first.
    pub snapshots: Vec<SnapshotView>,
    /// The newest messages of the stream's dead-letter table
    /// (`<table>__dlq`, [`DEAD_LETTERS_SHOWN`] at most); `null` when it has
    /// none (or this is one).
    pub dead_letters: Option<DeadLetters>,
}

/// Dead letters shown on a table page, at most.
pub const DEAD_LETTERS_SHOWN: usize = 20;

/// A stream's dead-letter table, newest messages first.
#[derive(Debug, Serialize)]
pub struct DeadLetters {
    /// `<namespace>.<table>__dlq`.
    pub table: String,
    /// The newest messages.
    pub rows: Vec<DeadLetterRow>,
    /// Why they could not be read (the page shows the rest).
    pub error: Option<String>,
}

/// One schema of the table and what it changed.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct SchemaVersionView {
    /// The schema id.
    pub schema_id: i32,
    /// Its top-level columns.
    pub columns: usize,
    /// Columns it added (all of them for the first schema).
    pub added: Vec<String>,
    /// Columns whose type it changed (`name: old -> new`).
    pub changed: Vec<String>,
    /// Columns it dropped.
    pub dropped: Vec<String>,
}

/// A top-level column: field id, name, type.
type ColumnSig = (i32, String, String);

/// The table's schemas, oldest first, each compared with the one before
/// by field id.
fn schema_history(handle: &TableHandle) -> Vec<SchemaVersionView> {
    let mut schemas: Vec<_> = handle.metadata().schemas_iter().collect();
    schemas.sort_by_key(|s| s.schema_id());
    let mut out = Vec::new();
    let mut before: Vec<ColumnSig> = Vec::new();
    for schema in schemas {
        let now: Vec<ColumnSig> = schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| (f.id, f.name.clone(), f.field_type.to_string()))
            .collect();
        out.push(schema_change(schema.schema_id(), &before, &now));
        before = now;
    }
    out
}

/// What schema `schema_id` (columns `now`) changed from `before`.
fn schema_change(schema_id: i32, before: &[ColumnSig], now: &[ColumnSig]) -> SchemaVersionView {
    let find = |list: &[ColumnSig], id: i32| list.iter().find(|c| c.0 == id).cloned();
    SchemaVersionView {
        schema_id,
        columns: now.len(),
        added: now
            .iter()
            .filter(|c| find(before, c.0).is_none())
            .map(|c| c.1.clone())
            .collect(),
        changed: now
            .iter()
            .filter_map(|c| {
                let old = find(before, c.0)?;
                (old.2 != c.2).then(|| format!("{}: {} -> {}", c.1, old.2, c.2))
            })
            .collect(),
        dropped: before
            .iter()
            .filter(|c| find(now, c.0).is_none())
            .map(|c| c.1.clone())
            .collect(),
    }
}

/// A column of the current schema.
#[derive(Debug, Serialize)]
pub struct ColumnView {
    /// Its field id.
    pub id: i32,
    /// Its name.
    pub name: String,
    /// Its Iceberg type.
    pub r#type: String,
    /// Whether it is required.
    pub required: bool,
}

/// One snapshot; ids as strings (64-bit integers).
#[derive(Debug, Serialize)]
pub struct SnapshotView {
    /// The snapshot id.
    pub snapshot_id: String,
    /// Its parent's id.
    pub parent_snapshot_id: Option<String>,
    /// When it was committed (ms since the epoch).
    pub timestamp_ms: i64,
    /// `append`, `overwrite`, `delete` or `replace`.
    pub operation: String,
    /// Rows it added (`added-records`).
    pub added_records: Option<i64>,
    /// Delete records it added (position, equality, DV cardinality).
    pub added_deletes: Option<i64>,
}

fn number(summary: &std::collections::BTreeMap<String, String>, key: &str) -> Option<i64> {
    summary.get(key).and_then(|v| v.parse().ok())
}

/// The table `table` of job `id` (a name in the job's namespace).
pub(super) async fn table(
    State(state): State<AppState>,
    Path((id, table)): Path<(i64, String)>,
) -> ApiResult<Json<TableView>> {
    state.store.job(id)?;
    let job = match state.runner.load_job(id) {
        Ok(loaded) => loaded.job,
        Err(e @ JobFileError::Unresolved(_)) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                e.to_string(),
            ))
        }
        Err(e) => return Err(ApiError::internal(e)),
    };
    let destination = topicberg_sync::destination::connect_destination(&job)
        .await
        .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, e.to_string()))?;
    let namespace = job.namespace_path();
    let handle = destination
        .load_table(&namespace, &table)
        .await
        .map_err(|e| match e.kind {
            IcebergErrorKind::Catalog(CatalogErrorKind::NotFound) => ApiError::new(
                StatusCode::NOT_FOUND,
                format!("table {}.{table} does not exist (yet)", job.namespace),
            ),
            _ => ApiError::new(StatusCode::BAD_GATEWAY, e.to_string()),
        })?;
    let metadata = handle.metadata();
    let columns = metadata
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| ColumnView {
            id: f.id,
            name: f.name.clone(),
            r#type: f.field_type.to_string(),
            required: f.required,
        })
        .collect();
    let snapshots: Vec<SnapshotView> = handle
        .snapshot_summaries()
        .into_iter()
        .map(|s| SnapshotView {
            snapshot_id: s.snapshot_id.to_string(),
            parent_snapshot_id: s.parent_snapshot_id.map(|p| p.to_string()),
            timestamp_ms: s.timestamp_ms,
            operation: s.operation.clone(),
            added_records: number(&s.summary, "added-records"),
            added_deletes: [
                "added-position-deletes",
                "added-equality-deletes",
                "added-dvs",
            ]
            .iter()
            .filter_map(|k| number(&s.summary, k))
            .reduce(|a, b| a + b),
        })
        .collect();
    let current = handle.current_summary().unwrap_or_default();
    let dead_letters = if table.ends_with(topicberg_sync::sync::dlq::DLQ_SUFFIX) {
        None
    } else {
        match newest_dead_letters(&destination, &namespace, &table, DEAD_LETTERS_SHOWN).await {
            Ok(rows) => rows.map(|rows| DeadLetters {
                table: format!("{}.{table}__dlq", job.namespace),
                rows,
                error: None,
            }),
            Err(e) => Some(DeadLetters {
                table: format!("{}.{table}__dlq", job.namespace),
                rows: Vec::new(),
                error: Some(e.to_string()),
            }),
        }
    };
    Ok(Json(TableView {
        table: format!("{}.{table}", job.namespace),
        location: metadata.location().to_string(),
        format_version: metadata.format_version() as u8,
        columns,
        schema_versions: metadata.schemas_iter().count(),
        schema_history: schema_history(&handle),
        rows_written: number(&current, "total-records"),
        rows_deleted: number(&current, "total-position-deletes"),
        equality_deletes: number(&current, "total-equality-deletes"),
        data_files: number(&current, "total-data-files"),
        delete_files: number(&current, "total-delete-files"),
        partition_by: table_metadata::partition_by(metadata),
        sort_by: table_metadata::sort_by(metadata),
        snapshots,
        dead_letters,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(id: i32, name: &str, ty: &str) -> ColumnSig {
        (id, name.to_string(), ty.to_string())
    }

    #[test]
    fn schema_change_names_added_widened_and_dropped_columns_by_field_id() {
        let before = [
            col(1, "id", "int"),
            col(2, "name", "string"),
            col(3, "old", "string"),
        ];
        let now = [
            col(1, "id", "long"),
            col(2, "name", "string"),
            col(4, "coupon", "string"),
        ];
        let change = schema_change(1, &before, &now);
        assert_eq!(change.columns, 3);
        assert_eq!(change.added, ["coupon"]);
        assert_eq!(change.changed, ["id: int -> long"]);
        assert_eq!(change.dropped, ["old"]);
        let first = schema_change(0, &[], &before);
        assert_eq!(first.added, ["id", "name", "old"]);
    }
}

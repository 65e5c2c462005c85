//! `GET /api/jobs/{id}/tables/{table}`: one of the job's tables as its
//! catalog has it: schema, snapshots of `main`, row and file counts.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use topicberg_iceberg::{CatalogErrorKind, IcebergErrorKind};

use topicberg_sync::sync::dlq_rows::{newest_dead_letters, DeadLetterRow};

use crate::error::{ApiError, ApiResult};
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
    /// Rows, data files and delete files of the current snapshot (its
    /// summary's totals; `null` when the summary does not say).
    pub rows: Option<i64>,
    /// See `rows`.
    pub data_files: Option<i64>,
    /// See `rows`.
    pub delete_files: Option<i64>,
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
    let config = state.runner.job_config(id).map_err(ApiError::internal)?;
    let job = crate::runner::resolve_job(&config)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e))?;
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
        rows: number(&current, "total-records"),
        data_files: number(&current, "total-data-files"),
        delete_files: number(&current, "total-delete-files"),
        snapshots,
        dead_letters,
    }))
}

//! The API's JSON answers, one struct per shape (errors: `crate::error`).
//!
//! Fields are declared in alphabetical order: serde writes a struct's
//! fields in declaration order, and a JSON object of serde_json (without
//! `preserve_order`) in key order, so the answers read the same as a
//! `serde_json::Value` of them would (`answers/tests.rs` holds every
//! shape to a `json!` body with the same keys, byte for byte).

#[cfg(test)]
mod tests;

use serde::{Serialize, Serializer};
use serde_json::Value;
use topicberg_core::config::{ResolvedUpsert, StreamSettings};
use topicberg_sync::check::CheckStep;
use topicberg_sync::discover::DiscoveredTopic;

use crate::pieces::{self, Piece, PieceKind};
use crate::store::{JobRow, PieceRow, RunRow};

/// `{"ok": true}`: done, nothing else to say (logout).
#[derive(Serialize)]
pub struct Done {
    /// Always true.
    pub ok: bool,
}

/// The answer of `POST /api/setup`.
#[derive(Serialize)]
pub struct SetupDone {
    /// Always true.
    pub ok: bool,
    /// The admin user's name.
    pub username: &'static str,
}

/// A session's CSRF token and user (`POST /api/login`, `GET /api/session`).
#[derive(Serialize)]
pub struct SessionInfo {
    /// The token every non-GET request sends as `X-CSRF-Token`.
    pub csrf: String,
    /// The user.
    pub username: String,
}

/// A source or destination: its redacted table (secrets as
/// `{"set": true}`) with `id` and `name` among its fields.
pub struct PieceView<'a> {
    /// Source or destination.
    pub kind: PieceKind,
    /// The stored piece.
    pub row: &'a PieceRow,
}

impl Serialize for PieceView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = pieces::redact(self.kind, &self.row.config);
        out.insert("id".into(), self.row.id.into());
        out.insert("name".into(), self.row.name.clone().into());
        out.serialize(serializer)
    }
}

/// A connection test: the `check` steps tried and whether all passed.
#[derive(Serialize)]
pub struct ConnectionTest {
    /// Whether there were steps and every one passed.
    pub ok: bool,
    /// The steps in order.
    pub steps: Vec<TestStep>,
}

/// One step of a [`ConnectionTest`].
#[derive(Serialize)]
pub struct TestStep {
    /// What happened (or the error with its fix).
    pub message: String,
    /// Whether it passed.
    pub ok: bool,
    /// What was tried.
    pub step: &'static str,
    /// What may be wrong without failing the step; left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl ConnectionTest {
    /// The answer for `steps`.
    pub fn new(steps: &[CheckStep]) -> Self {
        let steps: Vec<TestStep> = steps
            .iter()
            .map(|s| TestStep {
                message: match &s.outcome {
                    Ok(text) => text.clone(),
                    Err(e) => e.to_string(),
                },
                ok: s.outcome.is_ok(),
                step: s.step,
                warnings: s.warnings.clone(),
            })
            .collect();
        ConnectionTest {
            ok: !steps.is_empty() && steps.iter().all(|s| s.ok),
            steps,
        }
    }
}

/// A job as the API shows it (`GET /api/jobs`, `/api/jobs/{id}`, ...).
#[derive(Serialize)]
pub struct JobView {
    /// The run in progress (a sync or a maintenance run), if any: its
    /// page shows its live figures.
    pub current_run: Option<i64>,
    /// Its destination.
    pub destination_id: i64,
    /// A continuous job's follower, while it runs: its run and figures.
    pub follower: Option<crate::runner::FollowerState>,
    /// Its id.
    pub id: i64,
    /// The latest maintenance run, if any.
    pub last_maintain: Option<RunView<RunTable>>,
    /// The latest sync (or a continuous job's follower run), if any.
    pub last_run: Option<RunView<RunTable>>,
    /// The `[maintain]` table.
    pub maintain: Piece,
    /// When `maintain` runs (empty: by hand only).
    pub maintain_schedule: String,
    /// `scheduled` or `continuous`.
    pub mode: &'static str,
    /// Its name.
    pub name: String,
    /// The namespace override, if any.
    pub namespace: Option<String>,
    /// The next scheduled run (RFC 3339, UTC); none when manual or paused.
    pub next_run: Option<String>,
    /// Whether the schedule is paused.
    pub paused: bool,
    /// Whether a run of it is in progress.
    pub running: bool,
    /// The schedule text (empty: manual only).
    pub schedule: String,
    /// Its source.
    pub source_id: i64,
    /// The `[[streams]]` entries.
    pub streams: Vec<Piece>,
    /// The `[sync]` table.
    pub sync: Piece,
    /// `target_engines`.
    pub target_engines: Vec<String>,
    /// The warnings of the job's page (only `GET /api/jobs/{id}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
}

impl JobView {
    /// The view of `job`, without warnings.
    pub fn new(
        job: &JobRow,
        running: bool,
        next_run: Option<String>,
        last: Option<&RunRow>,
    ) -> Self {
        JobView {
            current_run: None,
            destination_id: job.destination_id,
            id: job.id,
            last_run: last.map(RunView::summary),
            last_maintain: None,
            maintain: job.maintain.clone(),
            maintain_schedule: job.maintain_schedule.clone(),
            name: job.name.clone(),
            namespace: job.namespace.clone(),
            next_run,
            paused: job.paused,
            running,
            schedule: job.schedule.clone(),
            source_id: job.source_id,
            streams: job.streams.clone(),
            sync: job.sync.clone(),
            target_engines: job.target_engines.clone(),
            warnings: None,
            mode: job.mode.as_str(),
            follower: None,
        }
    }
}

/// A run: its summary with `T` per table (a [`RunTable`] in lists, the
/// report's whole table entry on the run's page, which adds the report).
#[derive(Serialize)]
pub struct RunView<T> {
    /// Bytes written, all tables.
    pub bytes: u64,
    /// How long it took, when it ended.
    pub duration_ms: Option<i64>,
    /// The error of a failed run.
    pub error: Option<String>,
    /// End (RFC 3339, UTC).
    pub finished: Option<String>,
    /// End (ms since the epoch).
    pub finished_ms: Option<i64>,
    /// Its id.
    pub id: i64,
    /// The job.
    pub job_id: i64,
    /// `sync` or `maintain`.
    pub kind: String,
    /// The job's consumer lag right after the run (messages, all
    /// partitions); `null` when not measured.
    pub lag: Option<i64>,
    /// What a run has to say besides its records, all tables.
    pub notes: RunNotes,
    /// Records written, all tables.
    pub records: u64,
    /// The whole report (null when the sync did not get that far); only
    /// on the run's page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Value>,
    /// Start (RFC 3339, UTC).
    pub started: Option<String>,
    /// Start (ms since the epoch).
    pub started_ms: i64,
    /// `running`, `succeeded`, `failed` or `cancelled`.
    pub status: String,
    /// Per table.
    pub tables: Vec<T>,
    /// `manual`, `schedule` or `missed`.
    pub trigger: String,
}

/// What a run has to say besides its records (a run that succeeded with
/// some of these is marked in the UI): sums over its tables' reports.
#[derive(Serialize)]
pub struct RunNotes {
    /// Messages written to dead-letter tables (`on_invalid = "dlq"`).
    pub dead_letter_records: u64,
    /// Messages retention deleted before they were read (`allow_data_loss`).
    pub expired_messages: i64,
    /// Schema changes committed (new columns, widened types).
    pub schema_changes: usize,
    /// Invalid messages skipped (`on_invalid = "skip"`).
    pub skipped_records: u64,
}

/// A table of a run's report, in short.
#[derive(Serialize)]
pub struct RunTable {
    /// Bytes written.
    pub bytes: Value,
    /// Records written.
    pub records: Value,
    /// The table's outcome.
    pub status: Value,
    /// The table.
    pub table: Value,
    /// The topic.
    pub topic: Value,
}

/// The table entries of a run's report.
fn report_tables(run: &RunRow) -> &[Value] {
    run.report
        .as_ref()
        .and_then(|r| r["tables"].as_array())
        .map(Vec::as_slice)
        .unwrap_or_default()
}

impl<T> RunView<T> {
    fn with_tables(run: &RunRow, tables: Vec<T>, report: Option<Value>) -> Self {
        let entries = report_tables(run);
        let sum = |key: &str| entries.iter().filter_map(|t| t[key].as_u64()).sum::<u64>();
        RunView {
            bytes: sum("bytes"),
            duration_ms: run.finished_ms.map(|f| f - run.started_ms),
            kind: run.kind.clone(),
            lag: run.lag,
            error: run.error.clone(),
            finished: run.finished_ms.and_then(iso),
            finished_ms: run.finished_ms,
            id: run.id,
            job_id: run.job_id,
            notes: RunNotes {
                dead_letter_records: sum("dead_letter_records"),
                expired_messages: entries
                    .iter()
                    .filter_map(|t| t["expired_messages"].as_i64())
                    .sum(),
                schema_changes: entries
                    .iter()
                    .filter_map(|t| t["schema_changes"].as_array())
                    .map(Vec::len)
                    .sum(),
                skipped_records: sum("skipped_records"),
            },
            // A follower's report counts its records itself (no tables).
            records: match run.report.as_ref().map(|r| &r["records"]) {
                Some(Value::Number(n)) if run.kind == "follow" => n.as_u64().unwrap_or(0),
                _ => sum("records"),
            },
            report,
            started: iso(run.started_ms),
            started_ms: run.started_ms,
            status: run.status.clone(),
            tables,
            trigger: run.trigger.clone(),
        }
    }
}

impl RunView<RunTable> {
    /// A run in a list.
    pub fn summary(run: &RunRow) -> Self {
        let tables = report_tables(run)
            .iter()
            .map(|t| RunTable {
                bytes: t["bytes"].clone(),
                records: t["records"].clone(),
                status: t["status"].clone(),
                table: t["table"].clone(),
                topic: t["topic"].clone(),
            })
            .collect();
        Self::with_tables(run, tables, None)
    }
}

impl RunView<Value> {
    /// A run's page: every table's whole entry (failed tables first) and
    /// the whole report.
    pub fn detail(run: &RunRow) -> Self {
        let mut tables = report_tables(run).to_vec();
        tables.sort_by_key(|t| t["status"] != "failed");
        let mut report = run.report.clone().unwrap_or(Value::Null);
        ids_as_strings(&mut report);
        tables.iter_mut().for_each(ids_as_strings);
        Self::with_tables(run, tables, Some(report))
    }
}

/// Snapshot ids (`snapshot_id`, `snapshotId`) as decimal strings: they use
/// all 64 bits, and JavaScript's numbers keep only 53 (9078093739648399528
/// would show as 9078093739648399000).
pub fn ids_as_strings(value: &mut Value) {
    match value {
        Value::Object(o) => {
            for (key, v) in o.iter_mut() {
                if matches!(key.as_str(), "snapshot_id" | "snapshotId") && v.is_number() {
                    *v = Value::String(v.to_string());
                } else {
                    ids_as_strings(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(ids_as_strings),
        _ => {}
    }
}

/// An ISO-8601 UTC time for ms since the epoch.
pub(crate) fn iso(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

/// `GET /api/jobs/{id}/streams`.
#[derive(Serialize)]
pub struct Streams {
    /// The job.
    pub job_id: i64,
    /// The namespace its tables are in.
    pub namespace: String,
    /// `target_engines`.
    pub target_engines: Vec<String>,
    /// The job's topic pattern, if any.
    pub topic_pattern: Option<String>,
    /// Every topic the source offers.
    pub topics: Vec<TopicView>,
}

/// A topic on the streams page.
#[derive(Serialize)]
pub struct TopicView {
    /// The inferred columns.
    pub columns: Vec<ColumnView>,
    /// Whether a `[[streams]]` entry names it.
    pub configured: bool,
    /// Upsert: the dedup key columns.
    pub dedup_keys: Vec<String>,
    /// The first message of the sample that cannot become a row, and why.
    pub invalid_example: Option<String>,
    /// Messages of the sample that cannot become rows (left out of it).
    pub invalid_messages: usize,
    /// `append` or `upsert`.
    pub mode: &'static str,
    /// What happens to an invalid message.
    pub on_invalid: &'static str,
    /// Its partitions.
    pub partitions: usize,
    /// How many messages the columns were inferred from.
    pub sampled_messages: usize,
    /// Its table.
    pub table: String,
    /// The topic.
    pub topic: String,
    /// The delete format an upsert table gets, when one fits.
    pub upsert_delete_format: Option<DeleteFormatView>,
    /// Why none fits.
    pub upsert_delete_format_error: Option<String>,
    /// How its values are read: `json`, `avro`, `protobuf` or `auto`.
    pub value_format: String,
    /// Why that format (set in the job, or the registry's subject).
    pub value_format_reason: String,
}

impl TopicView {
    /// The view of `topic` with its stream settings and delete format (or
    /// why no delete format fits its target engines).
    pub fn new<E: std::fmt::Display>(
        topic: &DiscoveredTopic,
        stream: StreamSettings,
        upsert: Result<ResolvedUpsert, E>,
    ) -> Self {
        let (format, error) = match upsert {
            Ok(plan) => (Some(DeleteFormatView::new(plan)), None),
            Err(e) => (None, Some(e.to_string())),
        };
        TopicView {
            columns: topic
                .columns
                .iter()
                .map(|(name, ty)| ColumnView {
                    name: name.clone(),
                    ty: ty.clone(),
                })
                .collect(),
            configured: stream.configured,
            dedup_keys: stream.dedup_keys,
            invalid_example: topic.invalid_example.clone(),
            invalid_messages: topic.invalid_messages,
            mode: stream.mode.as_str(),
            on_invalid: stream.on_invalid.as_str(),
            partitions: topic.partitions,
            sampled_messages: topic.sampled_messages,
            table: topic.table.clone(),
            topic: topic.topic.clone(),
            upsert_delete_format: format,
            upsert_delete_format_error: error,
            value_format: topic.value_format.clone(),
            value_format_reason: topic.value_format_reason.clone(),
        }
    }
}

/// An inferred column.
#[derive(Serialize)]
pub struct ColumnView {
    /// Its name.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: String,
}

/// The delete format resolved from the target engines.
#[derive(Serialize)]
pub struct DeleteFormatView {
    /// Its name in a job file (`position`, `dv`, `equality`).
    pub delete_format: &'static str,
    /// The table's format version it needs.
    pub format_version: u8,
    /// Its name for people.
    pub label: &'static str,
    /// Why it was chosen.
    pub reason: String,
}

impl DeleteFormatView {
    fn new(plan: ResolvedUpsert) -> Self {
        DeleteFormatView {
            delete_format: plan.delete_format.as_str(),
            format_version: plan.format_version.number(),
            label: plan.delete_format.label(),
            reason: plan.reason,
        }
    }
}

/// `POST /api/jobs/{id}/sync`: the run started.
#[derive(Serialize)]
pub struct SyncStarted {
    /// Its id.
    pub run_id: i64,
}

/// `POST /api/jobs/{id}/cancel`.
#[derive(Serialize)]
pub struct Cancelled {
    /// Whether a run was cancelled.
    pub cancelled: bool,
}

/// `GET /api/jobs/{id}/overview`.
#[derive(Serialize)]
pub struct JobOverview {
    /// The consumer lag per topic after the job's latest run in this
    /// process (sorted by topic); `null` before one reached Kafka.
    pub lag: Option<Vec<TopicLag>>,
    /// The latest successful run.
    pub last_success: Option<RunView<RunTable>>,
}

/// One topic's consumer lag.
#[derive(Serialize)]
pub struct TopicLag {
    /// Messages not yet in the table, all partitions.
    pub lag: i64,
    /// Per partition.
    pub partitions: Vec<PartitionLagView>,
    /// The topic.
    pub topic: String,
}

/// One partition's consumer lag.
#[derive(Serialize)]
pub struct PartitionLagView {
    /// Messages not yet in the table.
    pub lag: i64,
    /// The partition.
    pub partition: i32,
}

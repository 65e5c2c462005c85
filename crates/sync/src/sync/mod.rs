//! One bounded sync: plan every selected partition from the table's offsets,
//! drain up to the high watermarks seen at the start, write data files,
//! commit one snapshot per table (with the offsets in its summary), and only
//! then commit the consumer-group offsets.

mod chunk;
mod dlq;
mod evolve;
mod invalid;
pub mod lock;
mod pipeline;
pub mod plan;
pub mod report;
pub mod split;
pub mod upsert;
mod upsert_commit;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use topicberg_core::{JobConfig, TableColumns};
use topicberg_iceberg::{IcebergErrorKind, IcebergTarget, TableHandle};
use topicberg_kafka::{
    commit_group_offsets, read_partition_states, select_topics, DrainSettings, KafkaConnection,
    PartitionRange, PartitionState,
};

use crate::columns::{iceberg_columns, table_columns};
use crate::target::{connect_target, namespace_of, SetupError};
use pipeline::{drain_and_write, Progress, TableInput, UpsertInput, PROGRESS_INTERVAL};
use plan::{plan_partitions, PartitionPlan, TableOffsets};
use report::{CommitReport, SyncReport, TableReport, TableStatus};
use topicberg_core::config::ResolvedUpsert;
use topicberg_iceberg::OffsetsAdvance;
use tracing::Instrument;

/// Messages read per partition to infer a new table's columns.
pub const SAMPLE_PER_PARTITION: i64 = 10_000;
/// Deadline for metadata requests to Kafka.
pub const KAFKA_TIMEOUT: Duration = Duration::from_secs(30);

struct TableState {
    topic: String,
    /// Upsert mode: the resolved delete format and the dedup key columns.
    upsert: Option<(ResolvedUpsert, Vec<String>)>,
    table: String,
    handle: Option<TableHandle>,
    offsets: TableOffsets,
    plans: Vec<PartitionPlan>,
    committed: Vec<PartitionState>,
    report: TableReport,
    started: Instant,
}

impl TableState {
    fn fail(&mut self, error: impl Into<String>) {
        self.report.status = TableStatus::Failed;
        self.report.error = Some(error.into());
    }

    fn failed(&self) -> bool {
        self.report.status == TableStatus::Failed
    }

    /// Another sync committed this table's offsets first: nothing of this
    /// sync lands in the table (see [`TableStatus::Superseded`]).
    fn supersede(&mut self, why: impl Into<String>) {
        let why = why.into();
        tracing::warn!(table = %self.table, topic = %self.topic, "{why}");
        self.report.status = TableStatus::Superseded;
        self.report.note = Some(why);
    }

    /// What committing `drained` does to the table's offsets: each
    /// partition from the offset the plan read to where the drain ended.
    fn advance(&self, drained: &[topicberg_kafka::DrainedPartition]) -> OffsetsAdvance {
        OffsetsAdvance {
            topic: self.topic.clone(),
            partitions: drained
                .iter()
                .map(|d| {
                    let planned = self.offsets.get(&d.topic, d.partition);
                    (d.partition, (planned, d.next_offset))
                })
                .collect(),
        }
    }

    /// Records a committed advance as the table's offsets.
    fn committed(&mut self, advance: &OffsetsAdvance) {
        for (partition, (_, next)) in &advance.partitions {
            self.offsets.set(&advance.topic, *partition, *next);
        }
    }
}

/// Why a table's commit did not land.
pub(crate) enum CommitRefused {
    /// Another sync committed the offsets first (the message says which).
    Superseded(String),
    /// Anything else.
    Failed(String),
}

impl CommitRefused {
    fn from_iceberg(context: &str, e: &topicberg_iceberg::IcebergError) -> Self {
        match e.kind {
            IcebergErrorKind::Superseded => Self::Superseded(e.detail.clone()),
            _ => Self::Failed(format!("{context}: {e}")),
        }
    }
}

/// How a sync runs, beyond its job file.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// Set it to `true` to cancel the sync. Before the commit phase the
    /// sync stops draining, commits nothing, deletes the files it wrote and
    /// returns a report with `cancelled: true`; once the first commit
    /// started, the commits finish (nothing is ever half-committed) and the
    /// flag is ignored. The drain threads check it before every poll of
    /// their consumer (at least every 200 ms, messages or not).
    pub cancel: Option<Arc<AtomicBool>>,
}

impl SyncOptions {
    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// Runs one sync of the job. Errors that stop the whole sync (Kafka or the
/// catalog unreachable) are `Err`; a table that fails is reported in the
/// `SyncReport` while the others go on.
pub async fn run_sync(config: &JobConfig) -> Result<SyncReport, SetupError> {
    run_sync_with(config, SyncOptions::default()).await
}

/// [`run_sync`] with options: cancellation (see [`SyncOptions::cancel`]).
pub async fn run_sync_with(
    config: &JobConfig,
    options: SyncOptions,
) -> Result<SyncReport, SetupError> {
    let started = Instant::now();
    let olake_timestamp_micros = now_micros();
    let group = config.consumer_group();
    let connection = KafkaConnection::from_source(&config.source);
    let _lock = lock::JobLock::acquire(&config.sync.state_dir, &group)?;
    let selection = select_topics(&connection, &crate::topic_pattern(config)?, KAFKA_TIMEOUT)?;
    crate::log_skipped(config, &selection.skipped);
    crate::check_table_collisions(config, selection.selected.iter().map(|t| t.name.as_str()))?;
    let states = read_partition_states(&connection, &group, &selection.selected, KAFKA_TIMEOUT)?;
    let target = connect_target(config).await?;
    let namespace = namespace_of(config);
    let format_version = crate::target::format_version(config);
    let drain_settings = DrainSettings {
        group: group.clone(),
        stall_timeout: Duration::from_secs(120),
    };

    // Plan each table.
    let mut tables: Vec<TableState> = Vec::new();
    for topic in &selection.selected {
        let settings = config.stream_for(&topic.name);
        let topic_states: Vec<PartitionState> = states
            .iter()
            .filter(|s| s.topic == topic.name)
            .cloned()
            .collect();
        let mut state = TableState {
            topic: topic.name.clone(),
            upsert: None,
            table: format!("{}.{}", namespace.join("."), settings.table),
            handle: None,
            offsets: TableOffsets::default(),
            plans: Vec::new(),
            committed: topic_states.clone(),
            report: TableReport {
                topic: topic.name.clone(),
                table: format!("{}.{}", namespace.join("."), settings.table),
                status: TableStatus::Unchanged,
                records: 0,
                bytes: 0,
                data_files: 0,
                data_file_bytes: 0,
                snapshot_id: None,
                expired_messages: 0,
                skipped_records: 0,
                dead_letter_records: 0,
                dead_letter_table: None,
                schema_changes: Vec::new(),
                orphan_files: Vec::new(),
                duration_ms: 0,
                commit: None,
                note: None,
                error: None,
            },
            started: Instant::now(),
        };
        match config.upsert_plan(&topic.name) {
            Ok(Some(plan)) => {
                tracing::info!(
                    topic = %topic.name, delete_format = plan.delete_format.as_str(),
                    format_version = plan.format_version, reason = %plan.reason, "upsert stream"
                );
                state.upsert = Some((plan, settings.dedup_keys.clone()));
            }
            Ok(None) => {}
            Err(e) => {
                state.fail(e);
                tables.push(state);
                continue;
            }
        }
        match target.load_table(&namespace, &settings.table).await {
            Ok(handle) => {
                match TableOffsets::of_metadata(handle.metadata()) {
                    Ok(o) => state.offsets = o,
                    Err(e) => state.fail(e),
                }
                state.handle = Some(handle);
            }
            Err(e)
                if e.kind
                    == IcebergErrorKind::Catalog(topicberg_iceberg::CatalogErrorKind::NotFound) => {
            }
            Err(e) => state.fail(e.to_string()),
        }
        if !state.failed() {
            match plan_partitions(
                &group,
                &state.table,
                &topic_states,
                &state.offsets,
                settings.allow_data_loss,
            ) {
                Ok(plans) => {
                    state.report.expired_messages = plans.iter().map(|p| p.expired).sum();
                    for gap in plans.iter().filter_map(PartitionPlan::retention_gap) {
                        tracing::warn!(
                            topic = %gap.topic, partition = gap.partition, lost_from = gap.from,
                            lost_to = gap.to, lost = gap.lost(), "{}", gap.warning()
                        );
                    }
                    state.plans = plans;
                }
                Err(e) => state.fail(e.to_string()),
            }
        }
        tables.push(state);
    }

    if options.cancelled() {
        return Ok(cancelled_report(config, group, started, tables));
    }

    // Create the tables that do not exist yet, from a sample of what is to be read.
    for state in tables
        .iter_mut()
        .filter(|s| !s.failed() && s.handle.is_none())
    {
        let ranges: Vec<PartitionRange> = state
            .plans
            .iter()
            .map(|p| p.range.clone())
            .filter(|r| r.start < r.end)
            .collect();
        if ranges.is_empty() {
            continue;
        }
        let settings = config.stream_for(&state.topic);
        // Upsert streams get the version their delete format needs.
        let format_version = match config.table_format_version(&state.topic) {
            topicberg_core::config::FormatVersion::V3 => topicberg_iceberg::FormatVersion::V3,
            _ => format_version,
        };
        match create_table(
            &connection,
            &drain_settings,
            &target,
            &namespace,
            &settings.table,
            &ranges,
            format_version,
            settings.columns.as_ref(),
            settings.on_invalid != topicberg_core::config::OnInvalid::Fail,
            config.sync.max_columns,
        )
        .await
        {
            Ok(handle) => state.handle = Some(handle),
            Err(e) => state.fail(e),
        }
    }

    // Drain and write.
    let mut inputs = Vec::new();
    let mut input_of: Vec<Option<usize>> = Vec::new();
    for state in &mut tables {
        let ranges: Vec<PartitionRange> = state
            .plans
            .iter()
            .map(|p| p.range.clone())
            .filter(|r| r.start < r.end)
            .collect();
        let ready = !state.failed() && !ranges.is_empty();
        let Some(handle) = state.handle.as_ref().filter(|_| ready) else {
            input_of.push(None);
            continue;
        };
        let settings = config.stream_for(&state.topic);
        match table_columns(handle) {
            Ok(columns) => {
                input_of.push(Some(inputs.len()));
                inputs.push(TableInput {
                    topic: state.topic.clone(),
                    on_invalid: settings.on_invalid,
                    payload_fields: settings
                        .columns
                        .as_ref()
                        .map(|c| Arc::new(c.iter().cloned().collect())),
                    upsert: state.upsert.as_ref().map(|(_, keys)| UpsertInput {
                        key_columns: keys.clone(),
                        kafka_key_only: keys.len() == 1 && keys[0] == "_kafka_key",
                        spill_dir: config.sync.state_dir.join("spill"),
                    }),
                    columns,
                    handle: handle.clone(),
                    ranges,
                    max_columns: config.sync.max_columns,
                });
            }
            Err(e) => {
                state.fail(e);
                input_of.push(None);
            }
        }
    }
    if options.cancelled() {
        return Ok(cancelled_report(config, group, started, tables));
    }
    let cancel = options.cancel.clone().unwrap_or_default();
    let progress = Arc::new(Progress::default());
    let ticker = spawn_progress_line(Arc::clone(&progress));
    let outputs = drain_and_write(
        &connection,
        &drain_settings,
        &target,
        &inputs,
        config.source.max_threads.max(1),
        config.sync.batch_rows,
        olake_timestamp_micros,
        progress,
        cancel,
    )
    .await;
    ticker.abort();

    // The last point a cancel is honoured: past it the commits run to their end.
    if options.cancelled() {
        tracing::info!("sync cancelled before its commit phase; deleting the files it wrote");
        for (state, input) in tables.iter_mut().zip(&input_of) {
            if let Some(output) = input.map(|i| &outputs[i]) {
                state.report.orphan_files = remove_uncommitted(&target, &output.data_files).await;
            }
        }
        return Ok(cancelled_report(config, group, started, tables));
    }

    // Commit one snapshot per table, then the group's offsets.
    fault_point("before_iceberg_commit");
    pause_point("before_iceberg_commit").await;
    let mut first_commit_done = false;
    let mut group_offsets = BTreeMap::new();
    let mut outputs: Vec<Option<pipeline::TableOutput>> = outputs.into_iter().map(Some).collect();
    for (state, input) in tables.iter_mut().zip(&input_of) {
        let output = input.and_then(|i| outputs[i].take());
        if let Some(mut output) = output {
            state.report.schema_changes = std::mem::take(&mut output.schema_changes);
            log_renamed(&state.topic, &output.renamed);
            state.report.skipped_records = output.skipped;
            if let Some(e) = output.error.take() {
                state.fail(e);
                state.report.orphan_files = remove_uncommitted(&target, &output.data_files).await;
            } else {
                let handle = &mut inputs[input.expect("input")].handle;
                *handle = output.handle.clone();
                commit_table(
                    &target,
                    config,
                    state,
                    output,
                    handle,
                    olake_timestamp_micros,
                )
                .await;
                if state.report.status == TableStatus::Committed && !first_commit_done {
                    first_commit_done = true;
                    fault_point("after_first_table_commit");
                }
            }
        }
        if !state.failed() && state.report.status != TableStatus::Superseded {
            for plan in &state.plans {
                let key = (plan.range.topic.clone(), plan.range.partition);
                let next = state
                    .offsets
                    .get(&plan.range.topic, plan.range.partition)
                    .unwrap_or(plan.range.start);
                let committed = state
                    .committed
                    .iter()
                    .find(|s| s.partition == plan.range.partition)
                    .and_then(|s| s.committed);
                if committed != Some(next) {
                    group_offsets.insert(key, next);
                }
            }
        }
        state.report.duration_ms = state.started.elapsed().as_millis() as u64;
    }
    fault_point("before_group_commit");
    let group_offsets_committed = match commit_group_offsets(&connection, &group, &group_offsets) {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(error = %e, "committing consumer-group offsets failed; the next sync repairs them from the tables");
            false
        }
    };
    let mut reports: Vec<TableReport> = tables.into_iter().map(|s| s.report).collect();
    reports.sort_by(|a, b| a.table.cmp(&b.table));
    Ok(SyncReport {
        job: config.name.clone(),
        consumer_group: group,
        duration_ms: started.elapsed().as_millis() as u64,
        group_offsets_committed,
        cancelled: false,
        tables: reports,
    })
}

/// The report of a sync cancelled before its commit phase: every table not
/// failed is `cancelled`; nothing was committed, the group did not move.
fn cancelled_report(
    config: &JobConfig,
    group: String,
    started: Instant,
    tables: Vec<TableState>,
) -> SyncReport {
    let mut reports: Vec<TableReport> = tables
        .into_iter()
        .map(|s| {
            let mut report = s.report;
            if report.status != TableStatus::Failed {
                report.status = TableStatus::Cancelled;
            }
            report.duration_ms = s.started.elapsed().as_millis() as u64;
            report
        })
        .collect();
    reports.sort_by(|a, b| a.table.cmp(&b.table));
    tracing::info!(tables = reports.len(), "sync cancelled: nothing committed");
    SyncReport {
        job: config.name.clone(),
        consumer_group: group,
        duration_ms: started.elapsed().as_millis() as u64,
        group_offsets_committed: false,
        cancelled: true,
        tables: reports,
    }
}

async fn commit_table(
    target: &IcebergTarget,
    config: &JobConfig,
    state: &mut TableState,
    mut output: pipeline::TableOutput,
    handle: &mut TableHandle,
    olake_timestamp_micros: i64,
) {
    let invalid = output.skipped + output.dead.len() as u64;
    let records: u64 = output
        .drained
        .iter()
        .map(|d| d.records)
        .sum::<u64>()
        .saturating_sub(invalid);
    state.report.records = records;
    state.report.bytes = output.drained.iter().map(|d| d.bytes).sum();
    let advance = state.advance(&output.drained);
    if !output.dead.is_empty() {
        // The dead letters first: a crash before the table's commit leaves
        // them ahead, and the rerun skips what they already hold.
        let done = dlq::commit_dead_letters(
            target,
            handle.namespace(),
            handle.name(),
            &output.dead,
            &advance,
            olake_timestamp_micros,
        )
        .await;
        match done {
            Ok(done) => {
                state.report.dead_letter_records = output.dead.len() as u64;
                state.report.dead_letter_table = Some(done.table);
                fault_point("after_dead_letter_commit");
            }
            Err(e) => {
                state.fail(e);
                state.report.orphan_files = remove_uncommitted(target, &output.data_files).await;
                return;
            }
        }
    }
    if let Some(buffer) = output.upsert.take() {
        if buffer.messages() == 0 {
            if invalid > 0 {
                // Only invalid messages: a snapshot that just moves the offsets.
                commit_files(target, state, handle, Vec::new(), advance, records).await;
            }
            return;
        }
        let (plan, _) = state.upsert.as_ref().expect("upsert table");
        let delete_format = plan.delete_format;
        let state_dir = &config.sync.state_dir;
        let done = upsert_commit::commit_upsert(
            target,
            handle,
            buffer,
            delete_format,
            state_dir,
            advance.clone(),
        )
        .await;
        match done {
            Ok(done) => {
                let snapshot_id = done.snapshot.snapshot_id;
                let commit = CommitReport::from_summary(snapshot_id, &done.snapshot.summary);
                state.report.status = TableStatus::Committed;
                state.report.snapshot_id = Some(snapshot_id);
                state.report.data_files = commit.added_data_files as usize;
                state.report.commit = Some(commit);
                state.committed(&advance);
                tracing::info!(
                    table = %state.table, snapshot_id, records, rows = done.rows,
                    deletes = done.deletes, attempts = done.snapshot.attempts, "committed upsert snapshot"
                );
            }
            Err(CommitRefused::Superseded(why)) => state.supersede(why),
            Err(CommitRefused::Failed(e)) => state.fail(e),
        }
        return;
    }
    if (records == 0 || output.data_files.is_empty()) && invalid == 0 {
        // Nothing to add (e.g. only transaction markers were left); the
        // table keeps its offsets and the group is repaired to them.
        return;
    }
    commit_files(target, state, handle, output.data_files, advance, records).await;
}

/// Commits an append of `data_files` (possibly none: only the offsets move)
/// and records the outcome in the table's report.
async fn commit_files(
    target: &IcebergTarget,
    state: &mut TableState,
    handle: &mut TableHandle,
    data_files: Vec<iceberg::spec::DataFile>,
    advance: OffsetsAdvance,
    records: u64,
) {
    state.report.data_files = data_files.len();
    state.report.data_file_bytes = data_files.iter().map(|f| f.file_size_in_bytes()).sum();
    let written = data_files.clone();
    match target
        .commit_append_moving(handle, data_files, advance.clone())
        .await
    {
        Ok(snapshot) => {
            state.report.status = TableStatus::Committed;
            state.report.snapshot_id = Some(snapshot.snapshot_id);
            state.report.commit = Some(CommitReport::from_summary(
                snapshot.snapshot_id,
                &snapshot.summary,
            ));
            state.committed(&advance);
            tracing::info!(
                table = %state.table, snapshot_id = snapshot.snapshot_id, records,
                data_files = state.report.data_files, attempts = snapshot.attempts, "committed snapshot"
            );
        }
        Err(e) => {
            match CommitRefused::from_iceberg("committing the snapshot", &e) {
                CommitRefused::Superseded(why) => {
                    state.report.data_files = 0;
                    state.report.data_file_bytes = 0;
                    state.supersede(why);
                }
                CommitRefused::Failed(why) => state.fail(why),
            }
            state.report.orphan_files = if commit_surely_failed(&e) {
                remove_uncommitted(target, &written).await
            } else {
                // The commit may still land: the files may become live.
                written.iter().map(|f| f.file_path().to_string()).collect()
            };
        }
    }
}

/// Whether a failed commit certainly did not land: refused (409, other
/// 4xx) or never sent. After a 5xx or a lost connection, even one a reload
/// did not find, the catalog may still apply it, so its files are kept.
pub(crate) fn commit_surely_failed(e: &topicberg_iceberg::IcebergError) -> bool {
    use topicberg_iceberg::CatalogErrorKind as C;
    !matches!(
        e.kind,
        IcebergErrorKind::CommitStateUnknown
            | IcebergErrorKind::Catalog(C::Server | C::Unreachable)
    )
}

/// Deletes files a failed table wrote and no snapshot references; returns
/// those that could not be deleted (listed in the report for cleanup).
async fn remove_uncommitted(
    target: &IcebergTarget,
    files: &[iceberg::spec::DataFile],
) -> Vec<String> {
    if files.is_empty() {
        return Vec::new();
    }
    let left = target.delete_uncommitted(files).await;
    for (path, error) in &left {
        tracing::warn!(path = %path, error = %error, "could not delete an uncommitted file; delete it by hand");
    }
    tracing::info!(
        files = files.len(),
        left = left.len(),
        "deleted the files of a failed table"
    );
    left.into_iter().map(|(path, _)| path).collect()
}

#[allow(clippy::too_many_arguments)]
async fn create_table(
    connection: &KafkaConnection,
    settings: &DrainSettings,
    target: &IcebergTarget,
    namespace: &Vec<String>,
    table: &str,
    ranges: &[PartitionRange],
    format_version: topicberg_iceberg::FormatVersion,
    keep_columns: Option<&Vec<String>>,
    skip_invalid: bool,
    max_columns: usize,
) -> Result<TableHandle, String> {
    let sample: Vec<PartitionRange> = ranges
        .iter()
        .map(|r| PartitionRange {
            end: r.end.min(r.start + SAMPLE_PER_PARTITION),
            ..r.clone()
        })
        .collect();
    // The stream's `columns`: only these fields become columns.
    let keep = keep_columns.map(|k| Arc::new(k.iter().cloned().collect()));
    let inference = crate::discover::infer_columns(
        connection,
        settings,
        &sample,
        skip_invalid,
        keep,
        max_columns,
    )?;
    let payload = inference.columns();
    let columns = TableColumns::for_new_table(&payload)
        .map_err(|e| format!("building the table's columns: {e}"))?;
    target
        .ensure_table(namespace, table, &iceberg_columns(&columns), format_version)
        .await
        .map_err(|e| format!("creating the table: {e}"))
}

/// One warning per table and sync when payload fields are stored under
/// other names than their own (README, "Column names").
fn log_renamed(topic: &str, renamed: &[(String, String)]) {
    if renamed.is_empty() {
        return;
    }
    let fields = renamed
        .iter()
        .map(|(field, column)| format!("{field} -> {column}"))
        .collect::<Vec<_>>()
        .join(", ");
    tracing::warn!(
        topic,
        renamed = %fields,
        count = renamed.len(),
        "payload fields stored under renamed columns: their own name is a metadata column's, or differs only in case from an earlier column's"
    );
}

fn spawn_progress_line(progress: Arc<Progress>) -> tokio::task::JoinHandle<()> {
    let span = tracing::Span::current();
    tokio::spawn(
        async move {
            let started = Instant::now();
            let mut interval = tokio::time::interval(PROGRESS_INTERVAL);
            interval.tick().await;
            loop {
                interval.tick().await;
                let records = progress.records.load(Ordering::Relaxed);
                let bytes = progress.bytes.load(Ordering::Relaxed);
                let secs = started.elapsed().as_secs_f64().max(0.001);
                tracing::info!(
                    records,
                    bytes,
                    rate = (records as f64 / secs) as u64,
                    "sync in progress"
                );
            }
        }
        .instrument(span),
    )
}

/// Microseconds since the epoch, now.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Crash-test hook: `TOPICBERG_FAULT=<point>` makes the process kill itself
/// with SIGKILL when it reaches `<point>`, so tests can prove that a crash
/// anywhere loses and duplicates nothing. Points: `after_records:<n>` (in
/// the middle of fetching), `before_iceberg_commit` (data files written),
/// `after_dead_letter_commit` (a dead-letter table committed, its stream's
/// table not yet),
/// `after_first_table_commit`, `before_group_commit` (every snapshot
/// committed). Inert when the variable is unset.
pub(crate) fn fault_point(point: &str) {
    if std::env::var("TOPICBERG_FAULT").is_ok_and(|f| f == point) {
        kill_self();
    }
}

/// Overlap-test hook: `TOPICBERG_PAUSE=<point>:<file>` makes the sync, at
/// `<point>`, create `<file>.ready` and wait until `<file>` exists (at most
/// 5 minutes), so a test can run another sync of the job in between.
/// Points: `before_iceberg_commit`. Inert when the variable is unset.
pub(crate) async fn pause_point(point: &str) {
    let Ok(value) = std::env::var("TOPICBERG_PAUSE") else {
        return;
    };
    let Some(file) = value
        .strip_prefix(point)
        .and_then(|rest| rest.strip_prefix(':'))
    else {
        return;
    };
    let release = std::path::PathBuf::from(file);
    let ready = release.with_extension("ready");
    if let Err(e) = std::fs::write(&ready, b"") {
        eprintln!("TOPICBERG_PAUSE: cannot write {}: {e}", ready.display());
        return;
    }
    eprintln!(
        "TOPICBERG_PAUSE: paused at {point} until {} exists",
        release.display()
    );
    let deadline = Instant::now() + Duration::from_secs(300);
    while !release.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `after_records:<n>` threshold, if set.
pub(crate) fn fault_after_records() -> Option<u64> {
    std::env::var("TOPICBERG_FAULT")
        .ok()?
        .strip_prefix("after_records:")?
        .parse()
        .ok()
}

pub(crate) fn kill_self() {
    eprintln!("TOPICBERG_FAULT: killing this process with SIGKILL");
    // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

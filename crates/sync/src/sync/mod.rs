//! One bounded sync of a job, as stages over its tables (`stages.rs`):
//!
//! 1. plan: load each selected topic's table, read the offsets it records,
//!    plan its partitions against the consumer group's (`plan.rs`);
//! 2. create: new tables get columns inferred from a sample;
//! 3. columns: what the drain needs per table;
//! 4. drain: every partition read in parallel up to the high watermark seen
//!    at the start, decoded and written (`pipeline.rs`, `chunk.rs`);
//! 5. commit: per table, the dead letters, then one snapshot that moves the
//!    table's offsets, landing only on the offsets its plan read
//!    (`commit.rs`, `upsert_commit.rs`, `dlq.rs`);
//! 6. the consumer-group offsets, only then.
//!
//! A table failed by a stage ([`table::TableError`]) is skipped by the
//! later ones; the others go on. One sync of a job at a time per machine
//! (`lock.rs`).

pub(crate) mod change_columns;
mod chunk;
mod chunk_route;
mod commit;
mod context;
pub mod dlq;
pub mod dlq_rows;
mod evolve;
pub mod failure;
mod files_commit;
mod handoff;
mod invalid;
mod kept_index;
pub mod lock;
mod pipeline;
pub mod plan;
pub mod progress;
pub mod report;
mod route;
mod route_group;
mod schema_columns;
mod shared;
mod spilled;
pub mod split;
mod stages;
pub mod table;
pub mod upsert;
mod upsert_commit;
mod upsert_round;

pub use handoff::HandedSets;
pub use kept_index::KeptIndexes;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use topicberg_core::{human, Job};
use topicberg_iceberg::Destination;
use topicberg_kafka::{
    select_topics, DrainSettings, FetchBuffers, GroupClient, GroupMember, KafkaConnection,
    PartitionState, RegistryClient, Spill, TopicSelection,
};
use tracing::Instrument;

use crate::destination::{connect_destination, SetupError};
use crate::hooks;
use context::SyncContext;
use pipeline::PROGRESS_INTERVAL;
use progress::{SyncPhase, SyncProgress};
use report::{SyncReport, TableReport, TableStatus};
use table::TableState;

use crate::KAFKA_TIMEOUT;

/// How a sync runs, beyond its job.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// Set it to `true` to cancel the sync. Before the commit phase the
    /// sync stops draining, commits nothing, deletes the files it wrote and
    /// returns a report with `cancelled: true`; once the first commit
    /// started, the commits finish (nothing is ever half-committed) and the
    /// flag is ignored. The drain threads check it before every poll of
    /// their consumer (at least every 200 ms, messages or not).
    pub cancel: Option<Arc<AtomicBool>>,
    /// Where the sync counts what it read, per table and partition, for a
    /// live view ([`SyncProgress::snapshot`]); `None`: counted for the
    /// progress log line only.
    pub progress: Option<Arc<SyncProgress>>,
    /// What a follower's earlier rounds logged (topics left out by
    /// `topic_pattern`, the reader, each table's formats): only what
    /// changed is logged again. `None`: everything is.
    pub logged_once: Option<Arc<crate::LoggedOnce>>,
    /// The catalog, store and registry clients to use; `None`: the sync
    /// connects its own. A follower connects them once and hands them to
    /// every round (connecting builds a TLS context and exchanges a token:
    /// most of an idle round's cost when done every round).
    pub clients: Option<JobClients>,
    /// The follower's membership in the job's consumer group: the sync
    /// reads the group's offsets and commits them through it (the broker
    /// takes them from a member only). `None`: a sync from outside the
    /// group.
    pub member: Option<Arc<GroupMember>>,
    /// A follower's `commit_records` and `commit_mb`: each table's round
    /// reads at most this many messages. `None`: a scheduled sync reads
    /// them all.
    pub record_caps: Option<plan::RecordCaps>,
    /// A follower's upsert key indexes, kept open between its rounds.
    /// `None`: each is opened for the commit and closed after it.
    pub kept_indexes: Option<Arc<KeptIndexes>>,
    /// The job's lock on this machine, when the caller holds it (a
    /// follower, from its first round to its stop); `None`: the sync takes
    /// it for its own run.
    pub job_lock: Option<Arc<lock::JobLock>>,
    /// A follower's local spill: what it read ahead during an outage of
    /// the catalog or the store, read before Kafka ([`topicberg_kafka::spill`]).
    pub spill: Option<Arc<Spill>>,
    /// A follower's Kafka response buffers, kept between its rounds;
    /// `None`: the sync's drains share new ones.
    pub fetch_buffers: Option<Arc<FetchBuffers>>,
    /// A member's file sets handed to tables' committers and not yet seen
    /// committed, kept between its rounds. With a `member`, each append
    /// table is then committed by the worker owning its topic's partition
    /// 0 (`handoff.rs`); `None`: every member commits its own partitions.
    pub handed: Option<Arc<HandedSets>>,
    /// Overrides the job's `missing_topics` (a follower past its first
    /// round waits for a topic that went missing); `None`: the job's.
    pub missing_topics: Option<topicberg_core::config::MissingTopics>,
}

/// The clients a sync connects before its first table: the catalog and
/// the store its tables live in, and the schema registry.
#[derive(Clone)]
pub struct JobClients {
    /// The catalog and its store.
    pub destination: Arc<Destination>,
    /// The job's schema registry, when it names one (its schemas cached).
    pub registry: Option<Arc<RegistryClient>>,
}

impl std::fmt::Debug for JobClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobClients")
            .field("destination", &self.destination)
            .field("registry", &self.registry.is_some())
            .finish()
    }
}

impl JobClients {
    /// Connects the job's catalog (REST: token exchange, `GET /v1/config`)
    /// and its registry client. Call from inside a tokio runtime.
    pub async fn connect(job: &Job) -> Result<Self, SetupError> {
        let destination = Arc::new(connect_destination(job).await?);
        let registry = crate::registry::connect_registry(job)?;
        Ok(Self {
            destination,
            registry,
        })
    }
}

impl SyncOptions {
    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// Runs one sync of the job. Errors that stop the whole sync (Kafka or the
/// catalog unreachable, the job already running here, topics sharing a
/// table) are `Err`; a table that fails is reported in the `SyncReport`
/// while the others go on.
pub async fn run_sync(job: &Job) -> Result<SyncReport, SetupError> {
    run_sync_with(job, SyncOptions::default()).await
}

/// [`run_sync`] with options: cancellation (see [`SyncOptions::cancel`]).
pub async fn run_sync_with(job: &Job, options: SyncOptions) -> Result<SyncReport, SetupError> {
    let started = Instant::now();
    let progress = options.progress.clone().unwrap_or_default();
    let report = sync_stages(job, &options, Arc::clone(&progress), started).await;
    progress.set_phase(SyncPhase::Finished);
    report
}

async fn sync_stages(
    job: &Job,
    options: &SyncOptions,
    progress: Arc<SyncProgress>,
    started: Instant,
) -> Result<SyncReport, SetupError> {
    let _lock = match &options.job_lock {
        Some(held) => Arc::clone(held),
        None => Arc::new(lock::JobLock::acquire(&job.state_dir, &job.consumer_group)?),
    };
    let (ctx, selection, states) = connect(job, options, progress, started).await?;
    let mut tables = stages::plan_tables(&ctx, &selection.selected, &states).await;
    if options.cancelled() {
        return Ok(cancelled_report(&ctx, started, tables));
    }
    stages::create_tables(&ctx, &mut tables).await;
    stages::prepare_inputs(job, &ctx.destination, &mut tables);
    if options.cancelled() {
        return Ok(cancelled_report(&ctx, started, tables));
    }
    let cancel = options.cancel.clone().unwrap_or_default();
    hooks::pause_point("before_drain").await;
    stages::drain_tables(&ctx, &mut tables, cancel).await;
    // The last point a cancel is honoured: past it the commits run to their end.
    if options.cancelled() {
        tracing::info!("sync cancelled before its commit phase; deleting the files it wrote");
        stages::discard_outputs(&ctx, &mut tables).await;
        return Ok(cancelled_report(&ctx, started, tables));
    }
    Ok(commit_stages(&ctx, tables, started).await)
}

/// Before any table: the cluster's topics and their partitions' states,
/// and the catalog, asked at once (each is round trips of waiting); a
/// Kafka failure is reported first, as if it came first. Then the
/// selection's table names are checked and the registry connected.
async fn connect<'a>(
    job: &'a Job,
    options: &SyncOptions,
    progress: Arc<SyncProgress>,
    started: Instant,
) -> Result<(SyncContext<'a>, TopicSelection, Vec<PartitionState>), SetupError> {
    let connection = KafkaConnection::from_source(&job.source);
    let group = &job.consumer_group;
    let kafka = {
        let (connection, topics, group) = (connection.clone(), job.topics.clone(), group.clone());
        let member = options.member.clone();
        tokio::task::spawn_blocking(move || -> Result<_, topicberg_kafka::KafkaError> {
            // Opened first: its coordinator lookup runs during the listing.
            let opened = match &member {
                Some(_) => None,
                None => Some(GroupClient::open(&connection, &group)?),
            };
            let mut selection = select_topics(&connection, &topics, KAFKA_TIMEOUT)?;
            let elapsed_ms = started.elapsed().as_millis() as u64;
            tracing::debug!(elapsed_ms, "topics selected");
            let partition_counts = selection
                .selected
                .iter()
                .map(|t| (t.name.clone(), t.partitions.len()))
                .collect();
            let lease = match &member {
                Some(member) => Some(own_partitions(member, &mut selection)?),
                None => None,
            };
            let group_client = match (&member, &opened) {
                (Some(member), _) => member.client(),
                (None, Some(opened)) => opened,
                (None, None) => unreachable!("a client is opened when there is no member"),
            };
            let states = group_client.partition_states(&selection.selected, KAFKA_TIMEOUT)?;
            tracing::debug!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "partition states read"
            );
            Ok((selection, states, lease, partition_counts))
        })
    };
    let clients = match &options.clients {
        Some(clients) => Ok(clients.clone()),
        None => JobClients::connect(job).await,
    };
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "catalog connected"
    );
    let (selection, mut states, lease, partition_counts) =
        kafka.await.map_err(SetupError::Task)??;
    if let Some(spill) = &options.spill {
        spilled::extend_retention(spill, &mut states);
    }
    let logged = options.logged_once.as_deref();
    crate::log_skipped(job, &selection.skipped, logged);
    crate::check_table_collisions(job, selection.selected.iter().map(|t| t.name.as_str()))?;
    let clients = clients?;
    let policy = options.missing_topics; // after the catalog's answer, said first
    let warnings = crate::missing_topics::check_missing_topics(job, policy, &selection, logged)?;
    tracing::debug!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "topics, partitions and the catalog read"
    );
    let reader = if job.source.fetch.reads_batches(connection.security_protocol) {
        "topicberg's batch reader"
    } else {
        "librdkafka"
    };
    if crate::say(options.logged_once.as_deref(), || {
        format!("reader {reader}")
    }) {
        tracing::info!("messages are read by {reader}");
    }
    let ctx = SyncContext {
        job,
        destination: clients.destination,
        drain: DrainSettings {
            group: group.clone(),
            stall_timeout: Duration::from_secs(120),
            fetch: job.source.fetch,
            spill: options.spill.clone(),
            buffers: options.fetch_buffers.clone().unwrap_or_default(),
        },
        connection,
        olake_timestamp_micros: now_micros(),
        registry: clients.registry,
        member: options.member.clone(),
        lease,
        partition_counts,
        handed: options.handed.clone(),
        logged_once: options.logged_once.clone(),
        record_caps: options.record_caps.clone(),
        kept_indexes: options.kept_indexes.clone(),
        progress,
        warnings,
    };
    Ok((ctx, selection, states))
}

/// A member subscribes to the selected topics (again when a pattern
/// matched a new one) and reads only the partitions the group assigned it
/// (none before its first assignment): the selection keeps those, and the
/// lease holds them until the sync's commit phase ended, so a revocation
/// waits for it. After a crash the restarted member reads nothing until
/// the broker expires its dead predecessor's session (the group's session
/// timeout: 45 s by default); the table's offsets keep two readers of a
/// partition apart whatever the assignment.
fn own_partitions(
    member: &GroupMember,
    selection: &mut TopicSelection,
) -> Result<topicberg_kafka::Lease, topicberg_kafka::KafkaError> {
    let names: Vec<String> = selection.selected.iter().map(|t| t.name.clone()).collect();
    if !names.is_empty() {
        member.subscribe(&names)?;
    }
    let lease = member.lease();
    keep_assigned(&mut selection.selected, lease.assigned());
    Ok(lease)
}

/// Each topic's partitions cut to those of `assigned` (all, when `None`
/// stands for "not assigned yet": none).
pub(crate) fn keep_assigned(
    selected: &mut [topicberg_kafka::SelectedTopic],
    assigned: Option<&std::collections::BTreeSet<topicberg_kafka::TopicPartition>>,
) {
    for topic in selected {
        topic
            .partitions
            .retain(|&p| assigned.is_some_and(|a| a.contains(&(topic.name.clone(), p))));
    }
}

/// The commit phase: every table's snapshot, then the group's offsets;
/// the sync's report.
async fn commit_stages(
    ctx: &SyncContext<'_>,
    mut tables: Vec<TableState>,
    started: Instant,
) -> SyncReport {
    let (job, group) = (ctx.job, &ctx.job.consumer_group);
    ctx.progress.set_phase(SyncPhase::Committing);
    hooks::fault_point("before_iceberg_commit");
    hooks::pause_point("before_iceberg_commit").await;
    // With tables to commit, the group's client is opened now: its
    // coordinator lookup runs during the Iceberg commits.
    let group_client = (ctx.member.is_none() && tables.iter().any(|t| t.output.is_some()))
        .then(|| GroupClient::open(&ctx.connection, group));
    stages::commit_tables(ctx, &mut tables).await;
    if let Some(spill) = &ctx.drain.spill {
        spilled::release(spill, &tables);
    }
    let group_commit = stages::commit_group(ctx, &tables, group_client);
    let mut reports: Vec<TableReport> = tables.into_iter().map(|s| s.report).collect();
    reports.sort_by(|a, b| a.table.cmp(&b.table));
    SyncReport {
        job: job.name.clone(),
        consumer_group: group.clone(),
        duration_ms: started.elapsed().as_millis() as u64,
        group_offsets_committed: group_commit == stages::GroupCommit::Committed,
        group_offsets_left_to_members: group_commit == stages::GroupCommit::LeftToMembers,
        cancelled: false,
        tables: reports,
        warnings: ctx.warnings.clone(),
    }
}

/// The report of a sync cancelled before its commit phase: every table not
/// failed is `cancelled`; nothing was committed, the group did not move.
fn cancelled_report(
    ctx: &SyncContext<'_>,
    started: Instant,
    tables: Vec<TableState>,
) -> SyncReport {
    let job = ctx.job;
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
        job: job.name.clone(),
        consumer_group: job.consumer_group.clone(),
        duration_ms: started.elapsed().as_millis() as u64,
        group_offsets_committed: false,
        group_offsets_left_to_members: false,
        cancelled: true,
        tables: reports,
        warnings: ctx.warnings.clone(),
    }
}

/// Whether a failed commit certainly did not land: refused (409, other
/// 4xx, superseded) or never sent. After a 5xx or a lost connection, even
/// one a reload did not find, the catalog may still apply it, so its files
/// are kept.
pub(crate) fn commit_surely_failed(e: &topicberg_iceberg::IcebergError) -> bool {
    use topicberg_iceberg::{CatalogErrorKind as C, IcebergErrorKind};
    !matches!(
        e.kind,
        IcebergErrorKind::CommitStateUnknown
            | IcebergErrorKind::Catalog(C::Server | C::Unreachable)
    )
}

pub(super) fn spawn_progress_line(progress: Arc<SyncProgress>) -> tokio::task::JoinHandle<()> {
    let span = tracing::Span::current();
    tokio::spawn(
        async move {
            let started = Instant::now();
            let mut interval = tokio::time::interval(PROGRESS_INTERVAL);
            interval.tick().await;
            loop {
                interval.tick().await;
                let now = progress.snapshot();
                let secs = started.elapsed().as_secs_f64().max(0.001);
                let rate = (now.records as f64 / secs) as u64;
                tracing::info!(
                    records = now.records,
                    read = now.read,
                    planned = now.planned,
                    bytes = now.bytes,
                    rate,
                    "sync in progress: {} of {} offsets read, {} records ({}) at {} msg/s",
                    human::count(now.read),
                    human::count(now.planned),
                    human::count(now.records),
                    human::bytes(now.bytes),
                    human::count(rate)
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

//! Following topics (`topicberg sync --follow`): a sync that does not end.
//!
//! A follower runs rounds, one every `sync.commit_interval` (sooner when a
//! round took longer): each round is a bounded sync ([`run_sync_with`]),
//! which reads every selected topic from the offsets its table records up
//! to the high watermark seen at the round's start, commits one snapshot
//! per table with the offsets inside, then the consumer group's offsets.
//! So every guarantee of a sync holds for each round unchanged: offsets
//! travel with the data, a round superseded by another sync of the job
//! (a second follower, a scheduled sync) commits nothing, and after a
//! crash the next round goes on from the table's offsets.
//!
//! The catalog, store and registry clients are connected once, at the
//! first round that reaches them, and kept (a REST catalog's token is
//! exchanged anew before it expires; vended credentials renew with each
//! table load).
//!
//! A round that fails on something a later round may not meet (Kafka, the
//! catalog or the store unreachable, another sync of the job running on
//! this machine) is logged and retried after a bounded backoff; the
//! follower stops only on what retrying cannot fix (the job's tables
//! collide, the lock file cannot be written).
//!
//! Stopping ([`StopSignal::request`], on SIGTERM / SIGINT): the round in
//! progress finishes and commits; a round still reading after
//! `sync.stop_timeout` is cancelled before its commit phase (nothing of it
//! is committed, its files are deleted; the next start reads it again).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use topicberg_core::Job;

use crate::destination::SetupError;
use crate::error::SyncErrorKind;
use crate::follow_maintain::{self, MaintenanceTotals};
use crate::follow_report::now_ms;
pub use crate::follow_report::{FollowReport, FollowTable};
use crate::follow_spill::{ReadAhead, Waiting};
use crate::sync::lock::JobLock;
use crate::sync::plan::RecordCaps;
use crate::sync::report::{SyncReport, TableStatus};
use crate::sync::{run_sync_with, HandedSets, JobClients, KeptIndexes, SyncOptions};
use crate::{LoggedOnce, KAFKA_TIMEOUT};
use topicberg_kafka::{select_topics, FetchBuffers, GroupMember, KafkaConnection};

/// How long joining the group waits for the first assignment (or the
/// broker's refusal of KIP-848's protocol, which comes with the first
/// heartbeat). The follower does not need the assignment to read: after
/// a crash its dead predecessor holds the partitions until the broker's
/// session timeout (45 s by default).
const JOIN_TIMEOUT: Duration = Duration::from_secs(3);

/// Rounds in a row that failed on Kafka before the next joins the group
/// with a new consumer.
const REJOIN_AFTER: u32 = 3;

/// How long a member may stay without partitions after the group took
/// them (its session expired) before the follower joins again with a new
/// consumer: after a broker restart a classic-protocol member that lost
/// its session was seen to get no assignment for minutes, while a new
/// consumer got one at once. A member that simply has none (more workers
/// than partitions) never lost any and is left alone.
const REJOIN_AFTER_LOST: Duration = Duration::from_secs(20);

/// Rounds in a row that failed on Kafka, counted towards a rejoin.
#[derive(Debug, Default)]
struct KafkaFailures(u32);

impl KafkaFailures {
    /// Counts a round (`on_kafka`: it failed on Kafka); whether the next
    /// joins the group again: after [`REJOIN_AFTER`] in a row, counted
    /// from zero again. Any other outcome ends the run of failures.
    fn after_round(&mut self, on_kafka: bool) -> bool {
        self.0 = if on_kafka { self.0 + 1 } else { 0 };
        let rejoin = self.0 >= REJOIN_AFTER;
        if rejoin {
            self.0 = 0;
        }
        rejoin
    }
}

/// The longest wait before retrying a round that failed.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

pub use crate::stop::StopSignal;

/// Called after each round with the round's report (serve records its
/// metrics from it).
pub type RoundHook = Arc<dyn Fn(&SyncReport) + Send + Sync>;

/// How a follower runs, beyond its job and its stop signal.
#[derive(Clone, Default)]
pub struct FollowOptions {
    /// Where the follower publishes its figures after every round, for a
    /// live view ([`FollowLive::snapshot`]).
    pub live: Option<Arc<FollowLive>>,
    /// Called after every round that returned a report.
    pub on_round: Option<RoundHook>,
}

/// A follower's figures as they change (its [`FollowReport`] so far).
#[derive(Debug, Default)]
pub struct FollowLive(std::sync::Mutex<FollowReport>);

impl FollowLive {
    /// The figures after the last round.
    pub fn snapshot(&self) -> FollowReport {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn publish(&self, report: &FollowReport) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = report.clone();
    }
}

/// Follows the job's topics until `stop` is requested; see the module doc.
/// `Err` only for what retrying cannot fix.
pub async fn run_follow(job: &Job, stop: Arc<StopSignal>) -> Result<FollowReport, SetupError> {
    run_follow_with(job, stop, FollowOptions::default()).await
}

/// [`run_follow`] with options: a live view, a hook per round.
pub async fn run_follow_with(
    job: &Job,
    stop: Arc<StopSignal>,
    options: FollowOptions,
) -> Result<FollowReport, SetupError> {
    let interval = job.tuning.commit_interval;
    let mut follower = Follower::new(job, options);
    tracing::info!(
        commit_interval_ms = interval.as_millis() as u64,
        stop_timeout_ms = job.tuning.stop_timeout.as_millis() as u64,
        "following the job's topics"
    );
    let mut backoff = interval;
    while !stop.requested() {
        let started = Instant::now();
        let succeeded = follower.round(&stop, started).await?;
        follower.read_ahead(&stop).await;
        follower.call_hook();
        backoff = if succeeded {
            interval
        } else {
            next_backoff(backoff, interval)
        };
        if !succeeded {
            // One event per failed round, with what failed.
            tracing::warn!(
                error = follower.report.last_error.as_deref().unwrap_or(""),
                retry_in_ms = backoff.as_millis() as u64,
                "follow round failed; retrying"
            );
        }
        follower.start_maintenance(&stop);
        follower.publish();
        // More is waiting than a round reads: the next round now.
        let next = if follower.more_waiting && succeeded {
            Instant::now()
        } else {
            started + backoff
        };
        tokio::select! {
            () = tokio::time::sleep_until(next.into()) => {}
            () = stop.wait() => {}
        }
    }
    Ok(follower.stop().await)
}

/// What a follower keeps from round to round.
struct Follower<'a> {
    job: &'a Job,
    options: FollowOptions,
    report: FollowReport,
    /// Each left-out topic, the reader and each table's formats are
    /// logged once (again when they change), not every round.
    logged: Arc<LoggedOnce>,
    /// Connected at the first round that reaches them, then kept.
    clients: Option<JobClients>,
    member: Option<Arc<GroupMember>>,
    /// The background maintenance, once the catalog is connected (`None`
    /// inside when the job turns it off).
    maintenance: Option<Option<follow_maintain::Maintenance>>,
    totals: Arc<MaintenanceTotals>,
    /// The topics whose partition 0 this follower owns: the tables its
    /// maintenance passes keep.
    leading: follow_maintain::Leading,
    /// The last round read only `commit_records` of a table's messages.
    more_waiting: bool,
    /// Key and value bytes per message of each table's last committed
    /// round (for `commit_mb`).
    bytes_per_record: std::collections::BTreeMap<String, u64>,
    /// The upsert tables' key indexes, open from round to round.
    key_indexes: Arc<KeptIndexes>,
    /// Kafka response buffers, kept from round to round.
    fetch_buffers: Arc<FetchBuffers>,
    /// File sets handed to tables' committers, not yet seen committed.
    handed: Arc<HandedSets>,
    /// The job's lock on this machine, from the first round to the stop.
    lock: Option<Arc<JobLock>>,
    /// The local spill, when the job has one: opened (its folder emptied)
    /// once the job's lock is held, never under another follower's feet.
    ahead: Option<ReadAhead>,
    /// What the last round left waiting on the catalog or the store.
    waiting: Option<Waiting>,
    /// The last round's report, for the hook (after the read-ahead).
    last_round: Option<SyncReport>,
    /// Rounds in a row that failed on Kafka.
    kafka_failures: KafkaFailures,
}

impl<'a> Follower<'a> {
    fn new(job: &'a Job, options: FollowOptions) -> Self {
        let follower = Follower {
            job,
            options,
            report: FollowReport {
                job: job.name.clone(),
                started_ms: now_ms(),
                commit_interval_ms: job.tuning.commit_interval.as_millis() as u64,
                ..FollowReport::default()
            },
            logged: Arc::new(LoggedOnce::default()),
            clients: None,
            member: None,
            maintenance: None,
            totals: Arc::new(MaintenanceTotals::default()),
            leading: Arc::default(),
            more_waiting: false,
            bytes_per_record: std::collections::BTreeMap::new(),
            key_indexes: Arc::new(KeptIndexes::default()),
            fetch_buffers: Arc::default(),
            handed: Arc::default(),
            lock: None,
            ahead: None,
            waiting: None,
            last_round: None,
            kafka_failures: KafkaFailures::default(),
        };
        follower.publish_now();
        follower
    }

    /// One round; whether it succeeded. `Err` only for what retrying
    /// cannot fix.
    async fn round(&mut self, stop: &StopSignal, started: Instant) -> Result<bool, SetupError> {
        let mut protocol = None;
        self.more_waiting = false;
        let caps = self.record_caps();
        let indexes = Arc::clone(&self.key_indexes);
        let lock = self.hold_lock();
        let spill = self.ahead.as_ref().map(ReadAhead::spill);
        let kept = (&mut self.clients, &mut self.member, &mut protocol);
        let ran = match lock {
            Ok(lock) => {
                let given = RoundInputs {
                    logged: Arc::clone(&self.logged),
                    caps,
                    indexes,
                    lock,
                    spill,
                    buffers: Arc::clone(&self.fetch_buffers),
                    handed: Arc::clone(&self.handed),
                    missing_topics: (self.report.rounds > 0)
                        .then_some(topicberg_core::config::MissingTopics::Wait),
                };
                round(self.job, stop, given, kept).await
            }
            Err(e) => Err(e),
        };
        if let Some(protocol) = protocol {
            self.report.group_protocol = protocol;
        }
        self.note_leading();
        self.count_kafka_failures(&ran);
        match ran {
            Ok(round) => {
                self.report.count(&round);
                log_round(&self.report, &round, started);
                self.waiting = waiting_on_destination(&round);
                self.more_waiting = round.tables.iter().any(|t| t.more_waiting);
                for t in &round.tables {
                    if t.status == TableStatus::Committed && t.records > 0 {
                        let per = t.bytes.div_ceil(t.records);
                        self.bytes_per_record.insert(t.table.clone(), per);
                    }
                }
                self.last_round = Some(round);
                Ok(self.report.last_error.is_none())
            }
            Err(e) if e.retryable() => {
                self.waiting = (e.kind() == SyncErrorKind::Iceberg).then_some(Waiting::Every);
                self.report.rounds += 1;
                self.report.failed_rounds += 1;
                self.report.last_error = Some(e.to_string());
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// The topics whose partition 0 the group assigned this follower now,
    /// for its maintenance passes.
    fn note_leading(&self) {
        let assigned = self.member.as_ref().and_then(|m| m.assignment());
        let topics = assigned
            .iter()
            .flatten()
            .filter(|(_, partition)| *partition == 0)
            .map(|(topic, _)| topic.clone())
            .collect();
        *self.leading.lock().unwrap_or_else(|p| p.into_inner()) = topics;
    }

    /// After [`REJOIN_AFTER`] rounds in a row failed on Kafka (a round
    /// whose group offsets commit failed counts), the next round joins the
    /// group with a new consumer: after a broker restart a classic-protocol
    /// member's group requests were seen to time out for minutes on end
    /// while a new consumer got answers at once.
    fn count_kafka_failures(&mut self, ran: &Result<SyncReport, SetupError>) {
        let on_kafka = match ran {
            Err(e) => e.kind() == SyncErrorKind::Kafka,
            Ok(round) => {
                !round.cancelled
                    && !round.group_offsets_committed
                    && !round.group_offsets_left_to_members
            }
        };
        if self.kafka_failures.after_round(on_kafka) && self.member.take().is_some() {
            tracing::warn!(
                failed_rounds = REJOIN_AFTER,
                "rounds keep failing on Kafka: joining the consumer group again with a new consumer"
            );
        }
    }

    /// After a round that left tables waiting on the catalog or the store:
    /// their topics read ahead into the spill. After one that committed
    /// them: the spill may say "full" again at the next outage.
    async fn read_ahead(&mut self, stop: &Arc<StopSignal>) {
        let Some(ahead) = self.ahead.as_mut() else {
            return;
        };
        match self.waiting.take() {
            Some(waiting) if !stop.requested() => {
                let member = self.member.clone();
                ahead.fill(self.job, member, waiting, stop).await;
            }
            Some(_) => {}
            None => ahead.committed(),
        }
    }

    /// The last round's report to the hook, with what the spill holds of
    /// each table's topic now.
    fn call_hook(&mut self) {
        let Some(mut round) = self.last_round.take() else {
            return;
        };
        let spilled = self.ahead.as_ref().map(|a| a.spill().topics());
        for t in &mut round.tables {
            t.buffered_bytes = spilled
                .as_ref()
                .and_then(|s| s.get(&t.topic))
                .map_or(0, |s| s.bytes);
        }
        if let Some(hook) = &self.options.on_round {
            hook(&round);
        }
    }

    /// The job's lock on this machine, taken at the first round that can
    /// and held to the stop: a scheduled sync of the job on this machine
    /// stops at once (`AlreadyRunning`) rather than meet the upsert key
    /// indexes the follower keeps open. The local spill is opened with it.
    fn hold_lock(&mut self) -> Result<Arc<JobLock>, SetupError> {
        if self.lock.is_none() {
            let job = self.job;
            self.lock = Some(Arc::new(JobLock::acquire(
                &job.state_dir,
                &job.consumer_group,
            )?));
            self.ahead = ReadAhead::open(job);
            self.report.spill_limit_bytes =
                self.ahead.as_ref().map_or(0, |_| job.tuning.spill_bytes);
        }
        Ok(Arc::clone(self.lock.as_ref().expect("just taken")))
    }

    /// Each table's cap for the next round: `commit_records`, and
    /// `commit_mb` over the bytes per message of its last committed round.
    fn record_caps(&self) -> RecordCaps {
        RecordCaps {
            records: self.job.tuning.commit_records,
            bytes: self.job.tuning.commit_bytes,
            bytes_per_record: self.bytes_per_record.clone(),
        }
    }

    /// Starts the background maintenance once the catalog is connected.
    fn start_maintenance(&mut self, stop: &Arc<StopSignal>) {
        if let (None, Some(clients)) = (&self.maintenance, &self.clients) {
            let destination = Arc::clone(&clients.destination);
            let (stop, totals) = (Arc::clone(stop), Arc::clone(&self.totals));
            let leading = Arc::clone(&self.leading);
            self.maintenance = Some(follow_maintain::spawn(
                self.job,
                destination,
                stop,
                totals,
                leading,
            ));
        }
    }

    /// The figures so far, to the live view.
    fn publish(&mut self) {
        let totals = &self.totals;
        self.report.maintenance_passes = totals.passes.load(Ordering::Relaxed);
        self.report.maintenance_failed_passes = totals.failed_passes.load(Ordering::Relaxed);
        self.report.files_compacted = totals.files_compacted.load(Ordering::Relaxed);
        self.report.snapshots_expired = totals.snapshots_expired.load(Ordering::Relaxed);
        if let Some(ahead) = &self.ahead {
            let spill = ahead.spill();
            let spilled = spill.topics();
            self.report.buffered_bytes = spill.bytes();
            for table in &mut self.report.tables {
                table.buffered_bytes = spilled.get(&table.topic).map_or(0, |s| s.bytes);
            }
        }
        self.publish_now();
    }

    fn publish_now(&self) {
        if let Some(live) = &self.options.live {
            live.publish(&self.report);
        }
    }

    /// After the last round: the maintenance pass in progress ends (within
    /// the stop timeout), the member leaves the group at once (its
    /// partitions can be assigned again now); the totals.
    async fn stop(mut self) -> FollowReport {
        if let Some(Some(task)) = self.maintenance.take() {
            follow_maintain::finish(task, self.job.tuning.stop_timeout).await;
        }
        self.key_indexes.close(self.job.tuning.stop_timeout).await;
        if let Some(member) = self.member.take().and_then(|m| Arc::try_unwrap(m).ok()) {
            let _ = tokio::task::spawn_blocking(move || member.leave()).await;
        }
        let report = &self.report;
        tracing::info!(
            rounds = report.rounds,
            snapshots = report.snapshots,
            records = report.records,
            "follower stopped after {} rounds: {} snapshots, {} records",
            topicberg_core::human::count(report.rounds),
            topicberg_core::human::count(report.snapshots),
            topicberg_core::human::count(report.records)
        );
        self.publish();
        self.report
    }
}

/// What a follower hands each round, beyond the clients it keeps.
struct RoundInputs {
    /// What earlier rounds logged.
    logged: Arc<LoggedOnce>,
    /// Each table's cap on the messages this round reads.
    caps: RecordCaps,
    /// The upsert tables' key indexes, kept open.
    indexes: Arc<KeptIndexes>,
    /// The job's lock on this machine, held to the stop.
    lock: Arc<JobLock>,
    /// The local spill, read before Kafka.
    spill: Option<Arc<topicberg_kafka::Spill>>,
    /// Kafka response buffers kept from round to round.
    buffers: Arc<FetchBuffers>,
    /// File sets handed to tables' committers, not yet seen committed.
    handed: Arc<HandedSets>,
    /// `wait` past the first round: a topic that goes missing under a
    /// running follower is warned about, its other topics kept; a typo
    /// still fails the first round (with the job's `missing_topics`).
    missing_topics: Option<topicberg_core::config::MissingTopics>,
}

/// One round: a bounded sync, cancelled before its commit phase if a stop
/// was requested more than `stop_timeout` ago and it is still reading.
async fn round(
    job: &Job,
    stop: &StopSignal,
    given: RoundInputs,
    (clients, member, protocol): (
        &mut Option<JobClients>,
        &mut Option<Arc<GroupMember>>,
        &mut Option<Option<topicberg_kafka::GroupProtocol>>,
    ),
) -> Result<SyncReport, SetupError> {
    if clients.is_none() {
        *clients = Some(JobClients::connect(job).await?);
    }
    if let Some(fatal) = member.as_ref().and_then(|m| m.fatal()) {
        tracing::warn!(error = %fatal, "the group member failed; joining the group again");
        *member = None;
    }
    if let Some(lost) = member.as_ref().and_then(|m| m.lost_for()) {
        if lost > REJOIN_AFTER_LOST {
            tracing::warn!(
                lost_s = lost.as_secs(),
                "the group took this member's partitions and gave none back: \
                 joining the group again with a new consumer"
            );
            *member = None;
        }
    }
    if member.is_none() {
        *member = Some(join_group(job).await?);
    }
    protocol.replace(member.as_ref().map(|m| m.protocol()));
    let cancel = Arc::new(AtomicBool::new(false));
    let options = SyncOptions {
        cancel: Some(Arc::clone(&cancel)),
        progress: None,
        logged_once: Some(given.logged),
        clients: clients.clone(),
        member: member.clone(),
        record_caps: Some(given.caps),
        kept_indexes: Some(given.indexes),
        job_lock: Some(given.lock),
        spill: given.spill,
        fetch_buffers: Some(given.buffers),
        handed: Some(given.handed),
        missing_topics: given.missing_topics,
    };
    let sync = run_sync_with(job, options);
    tokio::pin!(sync);
    tokio::select! {
        result = &mut sync => return result,
        () = stop.wait() => {}
    }
    tokio::select! {
        result = &mut sync => result,
        () = tokio::time::sleep(job.tuning.stop_timeout) => {
            tracing::warn!(
                stop_timeout_ms = job.tuning.stop_timeout.as_millis() as u64,
                "the round did not finish within the stop timeout: cancelling it \
                 (what it read and did not commit is read again at the next start)"
            );
            cancel.store(true, Ordering::SeqCst);
            sync.await
        }
    }
}

/// The topics whose tables failed on the catalog or the store this round.
fn waiting_on_destination(round: &SyncReport) -> Option<Waiting> {
    let topics: std::collections::BTreeSet<String> = round
        .tables
        .iter()
        .filter(|t| t.status == TableStatus::Failed && t.waits_on_destination)
        .map(|t| t.topic.clone())
        .collect();
    (!topics.is_empty()).then_some(Waiting::Topics(topics))
}

/// Joins the job's consumer group, subscribed to the topics the job
/// selects now (a round subscribes again when a pattern matches more).
async fn join_group(job: &Job) -> Result<Arc<GroupMember>, SetupError> {
    let connection = KafkaConnection::from_source(&job.source);
    let (topics, group) = (job.topics.clone(), job.consumer_group.clone());
    let member = tokio::task::spawn_blocking(move || -> Result<_, topicberg_kafka::KafkaError> {
        let selection = select_topics(&connection, &topics, KAFKA_TIMEOUT)?;
        let names: Vec<String> = selection.selected.iter().map(|t| t.name.clone()).collect();
        GroupMember::join(&connection, &group, &names, JOIN_TIMEOUT)
    })
    .await
    .map_err(SetupError::Task)??;
    tracing::info!(
        group = %job.consumer_group,
        protocol = member.protocol().as_str(),
        partitions = member.assignment().map_or(0, |a| a.len()),
        "joined the job's consumer group"
    );
    Ok(Arc::new(member))
}

/// One event per round that did something; an idle round logs at debug.
fn log_round(totals: &FollowReport, round: &SyncReport, started: Instant) {
    let committed: Vec<&str> = round
        .tables
        .iter()
        .filter(|t| t.status == TableStatus::Committed)
        .map(|t| t.table.as_str())
        .collect();
    let records: u64 = round.tables.iter().map(|t| t.records).sum();
    let superseded: Vec<&str> = round
        .tables
        .iter()
        .filter(|t| t.status == TableStatus::Superseded)
        .map(|t| t.table.as_str())
        .collect();
    if !superseded.is_empty() {
        tracing::info!(
            round = totals.rounds,
            tables = %superseded.join(","),
            "another sync of the job committed these messages first; nothing committed for them"
        );
    }
    let elapsed_ms = started.elapsed().as_millis() as u64;
    if totals.last_error.is_some() {
        // Logged by the loop, with the retry's delay.
    } else if committed.is_empty() {
        tracing::debug!(
            round = totals.rounds,
            elapsed_ms,
            "follow round: nothing new"
        );
    } else {
        tracing::info!(
            round = totals.rounds,
            elapsed_ms,
            records,
            tables = %committed.join(","),
            "follow round committed {} records",
            topicberg_core::human::count(records)
        );
    }
}

/// Doubles the wait after a failure, from the commit interval up to
/// [`MAX_BACKOFF`].
fn next_backoff(current: Duration, interval: Duration) -> Duration {
    (current * 2).clamp(interval, MAX_BACKOFF.max(interval))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_interval_up_to_a_minute() {
        let interval = Duration::from_secs(5);
        let mut wait = interval;
        let mut seen = Vec::new();
        for _ in 0..6 {
            wait = next_backoff(wait, interval);
            seen.push(wait.as_secs());
        }
        assert_eq!(seen, [10, 20, 40, 60, 60, 60]);
        let long = Duration::from_secs(120);
        assert_eq!(next_backoff(long, long), long);
    }

    #[test]
    fn three_rounds_in_a_row_failing_on_kafka_make_the_next_join_the_group_again() {
        let mut failures = KafkaFailures::default();
        let seen: Vec<bool> = [true, true, false, true, true, true, true, true, true]
            .into_iter()
            .map(|on_kafka| failures.after_round(on_kafka))
            .collect();
        // A round that did not fail on Kafka ends the run; after a rejoin
        // the count starts again.
        assert_eq!(
            seen,
            [false, false, false, false, false, true, false, false, true]
        );
    }
}

//! Test hooks: environment variables the integration tests set to reach
//! paths a small topic would not take, or to crash or pause a sync at a
//! chosen point. Read once, here, into [`Hooks`]; product code asks
//! [`hooks()`] and never reads the environment itself. All are inert when
//! unset.
//!
//! - `TOPICBERG_FAULT=<point>`: SIGKILL at `<point>` (see [`fault_point`];
//!   `after_records:<n>` in the middle of fetching).
//! - `TOPICBERG_PAUSE=<point>:<file>[,<point>:<file>...]`: wait at each
//!   `<point>` until its `<file>` exists (see [`pause_point`]).
//! - `TOPICBERG_MIN_CHUNK_MESSAGES=<n>`: the smallest offset piece a drain
//!   thread gets (100,000 otherwise).
//! - `TOPICBERG_UPSERT_MEMORY_ENTRIES=<n>`: upsert key entries held in
//!   memory before spilling (1,048,576 otherwise).
//!
//! (`TOPICBERG_S3_RETRY`, the object store's retry policy, is read by the
//! Iceberg crate, which owns storage.)

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// The hooks, as the environment set them when first asked.
#[derive(Debug, Default)]
pub struct Hooks {
    /// `TOPICBERG_FAULT`.
    pub fault: Option<String>,
    /// `TOPICBERG_PAUSE`: the points and their release files.
    pub pause: Vec<(String, PathBuf)>,
    /// `TOPICBERG_MIN_CHUNK_MESSAGES`.
    pub min_chunk_messages: Option<i64>,
    /// `TOPICBERG_UPSERT_MEMORY_ENTRIES`.
    pub upsert_memory_entries: Option<usize>,
    /// `TOPICBERG_UPSERT_SEGMENT_ROWS`.
    pub upsert_segment_rows: Option<u32>,
}

impl Hooks {
    fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let positive = |name: &str| {
            var(name)
                .and_then(|v| v.parse::<i64>().ok())
                .filter(|n| *n > 0)
        };
        Self {
            fault: var("TOPICBERG_FAULT"),
            pause: var("TOPICBERG_PAUSE")
                .unwrap_or_default()
                .split(',')
                .filter_map(|pair| {
                    let (point, file) = pair.split_once(':')?;
                    Some((point.to_string(), PathBuf::from(file)))
                })
                .collect(),
            min_chunk_messages: positive("TOPICBERG_MIN_CHUNK_MESSAGES"),
            upsert_memory_entries: positive("TOPICBERG_UPSERT_MEMORY_ENTRIES").map(|n| n as usize),
            upsert_segment_rows: positive("TOPICBERG_UPSERT_SEGMENT_ROWS")
                .and_then(|n| u32::try_from(n).ok()),
        }
    }

    /// The `after_records:<n>` threshold of `TOPICBERG_FAULT`, if set.
    pub fn fault_after_records(&self) -> Option<u64> {
        self.fault
            .as_deref()?
            .strip_prefix("after_records:")?
            .parse()
            .ok()
    }
}

static HOOKS: LazyLock<Hooks> = LazyLock::new(Hooks::from_env);

/// The process's hooks.
pub fn hooks() -> &'static Hooks {
    &HOOKS
}

/// Crash-test hook: with `TOPICBERG_FAULT=<point>` the process kills itself
/// with SIGKILL when it reaches `<point>`, so tests can prove that a crash
/// anywhere loses and duplicates nothing. Points: `before_iceberg_commit`
/// (data files written), `after_dead_letter_commit` (a dead-letter table
/// committed, its stream's table not yet), `after_first_table_commit`,
/// `before_key_index_update`, `before_group_commit` (every snapshot
/// committed); `maintain`: `before_compaction_commit` (files rewritten, the
/// `replace` not committed), `after_compaction_commit` (committed, before
/// the manifest rewrite).
pub fn fault_point(point: &str) {
    if hooks().fault.as_deref() == Some(point) {
        kill_self();
    }
}

/// Overlap-test hook: with `TOPICBERG_PAUSE=<point>:<file>` the sync, at
/// `<point>`, creates `<file>.ready` and waits until `<file>` exists (at
/// most 5 minutes), so a test can run another sync of the job in between.
/// Points: `before_drain` (tables planned, nothing read yet),
/// `before_iceberg_commit`, `before_upsert_commit` (an upsert table's rows
/// and deletes written, its snapshot not yet committed),
/// `before_compaction_commit` (`maintain`: files rewritten, the `replace`
/// snapshot not yet committed), `before_follow_maintenance` (a follower's
/// maintenance pass, before it starts).
pub async fn pause_point(point: &str) {
    let Some((_, release)) = hooks().pause.iter().find(|(at, _)| at == point) else {
        return;
    };
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

/// Kills this process with SIGKILL (the crash the fault hooks simulate).
pub fn kill_self() {
    eprintln!("TOPICBERG_FAULT: killing this process with SIGKILL");
    // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

//! The files of one table's key index, in `<state_dir>/<table uuid>/`:
//! - `keys.index`: what the index holds, rewritten whole at each commit (a
//!   new file renamed over the old one): the layout, the table uuid, the
//!   snapshot the index reflects, the number of live keys, the runs, and
//!   the data file paths by id (a path is stored once, not once per row;
//!   after a merge of every run, the paths no run names any more are
//!   dropped, so the list follows the table's live files, not every file
//!   it ever had);
//! - `keys-<n>.run`: sorted runs (see `run`); a key's newest entry wins;
//! - `keys.lock`: locked while a process has the index open.
//!
//! A change writes a new run, in key order, resolving each key against the
//! runs before it; [`Store::commit`] then names the new runs in
//! `keys.index`. A crash before that leaves the previous index whole (its
//! runs untouched), and the next open deletes the runs no index names.
//! After a commit, runs of similar size are merged (the newest two while
//! the older is at most twice the newer, so there are about log2(keys /
//! keys per sync) of them); a merge into the oldest run drops deleted keys.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::merge::{MergeJob, Merged};
use super::moves::{MovesChain, OutOfStep};
use roaring::RoaringBitmap;

use super::run::{Entry, Run, RunWriter};
use super::IndexedRow;
use crate::error::{IcebergError, IcebergErrorKind};
use crate::maintain::rebase::MovesById;

const INDEX_FILE: &str = "keys.index";
const LOCK_FILE: &str = "keys.lock";
const HEADER: &str = "topicberg key index";
/// The last line of `keys.index`: without it the file was cut short.
const END_LINE: &str = "end of index";
/// The line of an index whose runs still need compaction moves kept in
/// memory (`moves.rs`): read after a crash, it is rebuilt.
const MOVES_LINE: &str = "moves-pending yes";
const LAYOUT: &str = "3";
/// The first layout's file (redb), deleted when met.
const OLD_LAYOUT_FILES: [&str; 2] = ["keys.redb", "keys.redb.rebuild"];
/// Buffered operations written per run during a rebuild or an update.
pub(crate) const FLUSH_OPS: usize = 1_000_000;
/// More runs than this are merged whatever their sizes.
const MAX_RUNS: usize = 8;

pub(crate) fn store_err(
    step: impl Into<String>,
    e: impl std::error::Error + Send + Sync + 'static,
) -> IcebergError {
    IcebergError::new(IcebergErrorKind::Storage, step, e.to_string())
        .with_source(e)
        .with_retryable(false)
}

/// One buffered change of the index.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    /// The key's row is this one now.
    Put([u8; 16], IndexedRow),
    /// The row at this location was deleted: forget the key if it still
    /// points there (a newer row of the same key stays).
    RemoveIfAt([u8; 16], u32, u64),
    /// The key was deleted (a tombstone won).
    Remove([u8; 16]),
}

impl Op {
    pub(crate) fn key(&self) -> &[u8; 16] {
        match self {
            Op::Put(key, ..) | Op::RemoveIfAt(key, ..) | Op::Remove(key) => key,
        }
    }
}

/// What a committed index says it reflects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    pub table_uuid: String,
    /// `None`: a table without snapshots.
    pub snapshot: Option<i64>,
}

/// What opening found.
#[derive(Debug)]
pub(crate) enum Found {
    Index(Meta),
    Missing,
    Unreadable(String),
}

/// A key being written: its row before the write, and after its ops so far.
type KeyChange = ([u8; 16], Option<IndexedRow>, Option<IndexedRow>);

/// Counts what a write did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Flushed {
    /// `Put`s that replaced a key already present.
    pub replaced: u64,
    /// Keys removed.
    pub removed: u64,
}

/// The block each run's lookups read last, by position among the runs and
/// checked by run number (sorted lookups read each block once).
#[derive(Debug, Default)]
pub(crate) struct Blocks(Vec<Option<(u64, usize, Vec<u8>)>>);

/// One table's key index files, open and locked.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    _lock: File,
    /// Oldest first: the committed runs, then the ones written since.
    runs: Vec<Arc<Run>>,
    /// Compaction moves the older runs' rows still go through.
    moves: MovesChain,
    /// The merge running on its own thread, if any.
    merging: Option<JoinHandle<std::io::Result<Merged>>>,
    /// A row was met that a kept compaction left out ([`OutOfStep`]).
    out_of_step: AtomicBool,
    /// Whether merges may start on their own thread (tests hold them).
    background: bool,
    next_seq: u64,
    /// Data file paths by id (ids of dropped paths are gone).
    files: BTreeMap<u32, String>,
    /// The id the next new path gets (ids are not reused in a process).
    next_file: u32,
    file_ids: HashMap<String, u32>,
    /// The file ids each run written by this process names (runs opened
    /// from disk are not known until merged).
    run_files: HashMap<u64, RoaringBitmap>,
    keys: u64,
    /// Runs to delete once a commit no longer names them.
    obsolete: Vec<PathBuf>,
}

impl Drop for Store {
    /// A merge still running reads the runs and writes a run file under
    /// the next number: it ends before another open of the index can
    /// number its own runs.
    fn drop(&mut self) {
        self.abandon_merge();
    }
}

/// Why `keys.index` cannot be read (the index is then rebuilt).
#[derive(Debug, thiserror::Error)]
pub(crate) enum IndexFileError {
    #[error("not a key index")]
    NotAnIndex,
    #[error("a line after the end: {0}")]
    AfterEnd(String),
    #[error("a bad line: {0}")]
    BadLine(String),
    #[error("{line}: {source}")]
    BadNumber {
        line: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("file ids out of order at {0}")]
    FileOrder(String),
    #[error("an unknown line: {0}")]
    UnknownLine(String),
    #[error("an unknown layout")]
    UnknownLayout,
    #[error("an index cut short (no end line)")]
    CutShort,
    #[error("an incomplete index")]
    Incomplete,
    #[error("the process stopped before the key index folded in a compaction's row moves")]
    MovesPending,
    /// A run the index names could not be opened.
    #[error("{0}")]
    Run(#[source] std::io::Error),
}

/// `keys.index`, parsed.
struct Parsed {
    meta: Meta,
    keys: u64,
    next_seq: u64,
    runs: Vec<u64>,
    files: BTreeMap<u32, String>,
}

fn parse(text: &str) -> Result<Parsed, IndexFileError> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(IndexFileError::NotAnIndex);
    }
    let (mut uuid, mut snapshot, mut keys, mut next_seq) = (None, None, None, None);
    let (mut runs, mut files) = (Vec::new(), BTreeMap::new());
    let mut layout_ok = false;
    let mut ended = false;
    for line in lines {
        if ended {
            return Err(IndexFileError::AfterEnd(line.to_string()));
        }
        if line == END_LINE {
            ended = true;
            continue;
        }
        let bad_line = || IndexFileError::BadLine(line.to_string());
        let bad_number = |source| IndexFileError::BadNumber {
            line: line.to_string(),
            source,
        };
        let (name, value) = line.split_once(' ').ok_or_else(bad_line)?;
        let number = |v: &str| v.parse::<u64>().map_err(bad_number);
        match name {
            "layout" => layout_ok = value == LAYOUT,
            "table-uuid" => uuid = Some(value.to_string()),
            "snapshot-id" if value == "none" => snapshot = Some(None),
            "snapshot-id" => snapshot = Some(Some(value.parse::<i64>().map_err(bad_number)?)),
            "keys" => keys = Some(number(value)?),
            "next-run" => next_seq = Some(number(value)?),
            "run" => runs.push(number(value)?),
            _ if line == MOVES_LINE => return Err(IndexFileError::MovesPending),
            "file" => {
                let (id, path) = value.split_once(' ').ok_or_else(bad_line)?;
                let id = u32::try_from(number(id)?)
                    .map_err(|_| IndexFileError::FileOrder(line.to_string()))?;
                if files.last_key_value().is_some_and(|(last, _)| *last >= id) {
                    return Err(IndexFileError::FileOrder(line.to_string()));
                }
                files.insert(id, path.to_string());
            }
            _ => return Err(IndexFileError::UnknownLine(line.to_string())),
        }
    }
    if !layout_ok {
        return Err(IndexFileError::UnknownLayout);
    }
    if !ended {
        return Err(IndexFileError::CutShort);
    }
    match (uuid, snapshot, keys, next_seq) {
        (Some(table_uuid), Some(snapshot), Some(keys), Some(next_seq)) => Ok(Parsed {
            meta: Meta {
                table_uuid,
                snapshot,
            },
            keys,
            next_seq,
            runs,
            files,
        }),
        _ => Err(IndexFileError::Incomplete),
    }
}

impl Store {
    /// Opens (creating `dir`) and locks the index; an index missing or
    /// unreadable opens empty, saying so. Fails if another process has it.
    pub fn open(dir: &Path) -> std::io::Result<(Store, Found)> {
        std::fs::create_dir_all(dir)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))?;
        if let Err(e) = lock.try_lock() {
            return Err(std::io::Error::other(match e {
                std::fs::TryLockError::WouldBlock => {
                    "the index is open in another process".to_string()
                }
                std::fs::TryLockError::Error(e) => e.to_string(),
            }));
        }
        let mut store = Store {
            dir: dir.to_path_buf(),
            _lock: lock,
            runs: Vec::new(),
            moves: MovesChain::default(),
            merging: None,
            out_of_step: AtomicBool::new(false),
            background: true,
            next_seq: 0,
            files: BTreeMap::new(),
            next_file: 0,
            file_ids: HashMap::new(),
            run_files: HashMap::new(),
            keys: 0,
            obsolete: Vec::new(),
        };
        let mut older = false;
        for name in OLD_LAYOUT_FILES {
            match std::fs::remove_file(dir.join(name)) {
                Ok(()) => older = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let found = match std::fs::read_to_string(dir.join(INDEX_FILE)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && older => {
                Found::Unreadable("an index of an older layout (keys.redb)".into())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Found::Missing,
            Err(e) => Found::Unreadable(e.to_string()),
            Ok(text) => match parse(&text).and_then(|p| store.load(p)) {
                Ok(meta) => Found::Index(meta),
                Err(e) => {
                    store.reset();
                    store.obsolete.clear();
                    Found::Unreadable(e.to_string())
                }
            },
        };
        store.delete_unnamed_runs()?;
        Ok((store, found))
    }

    fn load(&mut self, parsed: Parsed) -> Result<Meta, IndexFileError> {
        for seq in parsed.runs {
            let run = Run::open(&self.run_path(seq), seq).map_err(IndexFileError::Run)?;
            self.runs.push(Arc::new(run));
        }
        self.next_seq = parsed.next_seq;
        self.file_ids = parsed
            .files
            .iter()
            .map(|(id, path)| (path.clone(), *id))
            .collect();
        self.next_file = parsed.files.last_key_value().map_or(0, |(id, _)| id + 1);
        self.files = parsed.files;
        self.keys = parsed.keys;
        Ok(parsed.meta)
    }

    fn run_path(&self, seq: u64) -> PathBuf {
        self.dir.join(format!("keys-{seq}.run"))
    }

    /// Deletes runs a crash left behind (written, never committed).
    fn delete_unnamed_runs(&mut self) -> std::io::Result<()> {
        for item in std::fs::read_dir(&self.dir)? {
            let path = item?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let seq = name
                .strip_prefix("keys-")
                .and_then(|n| n.strip_suffix(".run"))
                .and_then(|n| n.parse::<u64>().ok());
            let stray = match seq {
                Some(seq) => !self.runs.iter().any(|r| r.seq == seq),
                None => name.ends_with(".tmp"),
            };
            if stray {
                std::fs::remove_file(&path)?;
            }
            if let Some(seq) = seq {
                self.next_seq = self.next_seq.max(seq + 1);
            }
        }
        Ok(())
    }

    /// Lets a merge in progress end (it reads the runs) and leaves its
    /// run unused.
    fn abandon_merge(&mut self) {
        if let Some(merging) = self.merging.take() {
            let _ = merging.join();
        }
    }

    /// Forgets every key and data file (a rebuild follows); the files go
    /// at the next commit.
    pub fn reset(&mut self) {
        self.abandon_merge();
        self.moves = MovesChain::default();
        self.obsolete
            .extend(self.runs.drain(..).map(|r| r.path.clone()));
        self.files.clear();
        self.next_file = 0;
        self.file_ids.clear();
        self.run_files.clear();
        self.keys = 0;
    }

    /// The number of live keys.
    pub fn len(&self) -> u64 {
        self.keys
    }

    /// The id of a data file path, assigned on first use.
    pub fn file_id(&mut self, path: &str) -> u32 {
        if let Some(id) = self.file_ids.get(path) {
            return *id;
        }
        let id = self.next_file;
        self.next_file += 1;
        self.files.insert(id, path.to_string());
        self.file_ids.insert(path.to_string(), id);
        id
    }

    /// The id of a known data file path.
    pub fn known_file_id(&self, path: &str) -> Option<u32> {
        self.file_ids.get(path).copied()
    }

    /// The path of data file id `id`.
    pub fn path(&self, id: u32) -> Option<&str> {
        self.files.get(&id).map(String::as_str)
    }

    /// The current row of `key`: its newest entry.
    pub fn get(&self, key: &[u8; 16], blocks: &mut Blocks) -> std::io::Result<Option<IndexedRow>> {
        blocks.0.resize_with(self.runs.len(), || None);
        for (run, slot) in self.runs.iter().zip(blocks.0.iter_mut()).rev() {
            // Sorted lookups mostly stay within the block read last.
            let hit =
                matches!(slot, Some((seq, _, buf)) if *seq == run.seq && Run::covers(buf, key));
            if !hit {
                let Some(block) = run.block_of(key) else {
                    continue;
                };
                let read = matches!(slot, Some((seq, b, _)) if *seq == run.seq && *b == block);
                if !read {
                    let mut buf = slot.take().map(|(_, _, buf)| buf).unwrap_or_default();
                    run.read_block(block, &mut buf)?;
                    *slot = Some((run.seq, block, buf));
                }
            }
            let (_, _, buf) = slot.as_ref().expect("the block was read above");
            if let Some(entry) = Run::find_in_block(buf, key) {
                return match entry.row {
                    Some(row) => self.moved(run.seq, row).map(Some),
                    None => Ok(None),
                };
            }
        }
        Ok(None)
    }

    /// Every live key's row in key order, from an index of at most one
    /// run (after [`Self::merge_all`]); `None` with more runs.
    pub fn live_rows(
        &self,
    ) -> Option<impl Iterator<Item = std::io::Result<([u8; 16], IndexedRow)>> + '_> {
        if self.runs.len() > 1 {
            return None;
        }
        Some(self.runs.iter().flat_map(move |run| {
            run.iter().filter_map(move |entry| match entry {
                Err(e) => Some(Err(e)),
                Ok(Entry { row: None, .. }) => None,
                Ok(Entry {
                    key,
                    row: Some(row),
                }) => Some(self.moved(run.seq, row).map(|r| (key, r))),
            })
        }))
    }

    /// Where `row`, read from run `run`, is now (after the kept moves).
    fn moved(&self, run: u64, row: IndexedRow) -> std::io::Result<IndexedRow> {
        if self.moves.is_empty() {
            return Ok(row);
        }
        let placed = self.moves.place(run, row);
        if let Err(e) = &placed {
            self.note_out_of_step(e);
        }
        placed
    }

    fn note_out_of_step(&self, e: &std::io::Error) {
        if OutOfStep::is(e) {
            self.out_of_step.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a row a kept compaction left out was met: the index is
    /// wrong and must be rebuilt (its `keys.index` says moves are pending,
    /// so the next open does).
    pub fn out_of_step(&self) -> bool {
        self.out_of_step.load(Ordering::Relaxed)
    }

    /// Keeps a compaction's moves for the runs written so far (see
    /// `moves.rs`); they are folded in by the next full merge.
    pub fn add_moves(&mut self, moves: MovesById) {
        if !self.runs.is_empty() {
            self.moves.push(self.next_seq, moves);
        }
    }

    /// Writes `ops` as a new run (not committed yet). `resolve`: each key's
    /// ops apply to its current row (counts exact); otherwise (a rebuild's
    /// puts) to none, and [`Self::merge_all`] settles the counts.
    pub fn write(&mut self, ops: &mut [Op], resolve: bool) -> std::io::Result<Flushed> {
        // Stable: the ops on one key keep their order.
        ops.sort_by_key(|op| *op.key());
        self.write_sorted(ops.iter().copied().map(Ok), resolve)
    }

    /// [`Self::write`] of ops already in ascending key order (the ops of one
    /// key in their order), streamed into one run: nothing is held. A key
    /// out of order fails the write (nothing is committed).
    pub fn write_sorted(
        &mut self,
        ops: impl Iterator<Item = std::io::Result<Op>>,
        resolve: bool,
    ) -> std::io::Result<Flushed> {
        let keys = self.keys;
        let written = self.write_run(ops, resolve);
        if written.is_err() {
            self.keys = keys;
        }
        written
    }

    fn write_run(
        &mut self,
        ops: impl Iterator<Item = std::io::Result<Op>>,
        resolve: bool,
    ) -> std::io::Result<Flushed> {
        let seq = self.next_seq;
        let path = self.run_path(seq);
        let mut writer = RunWriter::create(&path)?;
        let mut blocks = Blocks::default();
        let mut out = Flushed::default();
        let mut named = RoaringBitmap::new();
        let mut current: Option<KeyChange> = None;
        for op in ops {
            let op = op?;
            let key = *op.key();
            if current.is_none_or(|(k, ..)| k != key) {
                if let Some(done) = current.take() {
                    self.close_key(&mut writer, done, &mut named)?;
                }
                let before = if resolve {
                    self.get(&key, &mut blocks)?
                } else {
                    None
                };
                current = Some((key, before, before));
            }
            let (_, _, row) = current.as_mut().expect("set above");
            match op {
                Op::Put(_, new) => {
                    out.replaced += u64::from(row.is_some());
                    *row = Some(new);
                }
                Op::Remove(_) => out.removed += u64::from(row.take().is_some()),
                Op::RemoveIfAt(_, file, pos) if row.is_some_and(|r| r.is_at(file, pos)) => {
                    *row = None;
                    out.removed += 1;
                }
                Op::RemoveIfAt(..) => {}
            }
        }
        if let Some(done) = current.take() {
            self.close_key(&mut writer, done, &mut named)?;
        }
        self.next_seq += 1;
        if writer.finish()? == 0 {
            std::fs::remove_file(&path)?;
        } else {
            self.runs.push(Arc::new(Run::open(&path, seq)?));
            self.run_files.insert(seq, named);
        }
        Ok(out)
    }

    /// Writes a key's entry if its ops changed its row, and counts it.
    fn close_key(
        &mut self,
        writer: &mut RunWriter,
        (key, before, row): KeyChange,
        named: &mut RoaringBitmap,
    ) -> std::io::Result<()> {
        if row != before {
            writer.push(&Entry { key, row })?;
            named.extend(row.map(|r| r.file));
        }
        match (before.is_some(), row.is_some()) {
            (false, true) => self.keys += 1,
            (true, false) => self.keys = self.keys.saturating_sub(1),
            _ => {}
        }
        Ok(())
    }

    /// Merges every run into one without deleted keys, now; the number of
    /// entries a newer run's entry of the same key shadowed. The live count
    /// is recounted (a rebuild's blind puts leave it to this).
    pub fn merge_all(&mut self) -> std::io::Result<u64> {
        self.wait_merge()?;
        let Some(job) = self.merge_job(0) else {
            self.keys = 0;
            return Ok(0);
        };
        let merged = self.run_job(job)?;
        let (shadowed, live) = (merged.shadowed, merged.live);
        self.install(merged)?;
        self.keys = live;
        Ok(shadowed)
    }

    /// A merge of `runs[from..]` (`None`: no run there).
    fn merge_job(&mut self, from: usize) -> Option<MergeJob> {
        if self.runs.len() <= from {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        Some(MergeJob {
            inputs: self.runs[from..].to_vec(),
            moves: self.moves.clone(),
            seq,
            path: self.run_path(seq),
            drop_deleted: from == 0,
        })
    }

    fn run_job(&self, job: MergeJob) -> std::io::Result<Merged> {
        let merged = job.run();
        if let Err(e) = &merged {
            self.note_out_of_step(e);
        }
        merged
    }

    /// Puts a merged run in place of its inputs, if they are still the
    /// index's (a rebuild since dropped them: the run is deleted). The live
    /// count is kept: every write counted its keys exactly.
    fn install(&mut self, merged: Merged) -> std::io::Result<bool> {
        let n = merged.inputs.len();
        let at = self
            .runs
            .windows(n)
            .position(|w| w.iter().map(|r| r.seq).eq(merged.inputs.iter().copied()));
        let Some(at) = at else {
            if let Some(run) = merged.run {
                std::fs::remove_file(&run.path)?;
            }
            return Ok(false);
        };
        let new = merged.run.map(Arc::new);
        if let Some(run) = &new {
            self.run_files.insert(run.seq, merged.files);
        }
        let old: Vec<Arc<Run>> = self.runs.splice(at..at + n, new).collect();
        self.obsolete.extend(old.iter().map(|r| r.path.clone()));
        for run in &old {
            self.run_files.remove(&run.seq);
        }
        let oldest = self.runs.iter().map(|r| r.seq).min();
        self.moves.drop_folded(oldest);
        self.drop_unnamed_files();
        Ok(true)
    }

    /// Forgets the data file paths no run names and no kept compaction
    /// moves a row to, once every run's files are known (after a merge of
    /// every run read from disk). Ids are not reused in this process.
    fn drop_unnamed_files(&mut self) {
        let mut named = self.moves.new_files();
        for run in &self.runs {
            match self.run_files.get(&run.seq) {
                Some(files) => named |= files,
                None => return,
            }
        }
        let file_ids = &mut self.file_ids;
        self.files.retain(|id, path| {
            let keep = named.contains(*id);
            if !keep {
                file_ids.remove(path.as_str());
            }
            keep
        });
    }

    /// Data file paths kept.
    #[cfg(test)]
    pub fn file_count(&self) -> usize {
        self.file_ids.len()
    }

    /// Where the next merge starts, if one is due: every run while moves
    /// are kept, else the newest two while the older is at most twice the
    /// newer, or while there are too many.
    fn due_from(&self) -> Option<usize> {
        if !self.moves.is_empty() && !self.runs.is_empty() {
            return Some(0);
        }
        let n = self.runs.len();
        let (older, newer) = (self.runs.get(n.checked_sub(2)?)?, self.runs.last()?);
        (older.entries() <= 2 * newer.entries() || n > MAX_RUNS).then_some(n - 2)
    }

    /// Starts no merge on its own thread from now on (tests).
    #[cfg(test)]
    pub fn hold_background_merges(&mut self) {
        self.background = false;
    }

    /// Whether a merge is due or running.
    pub fn merge_due_or_running(&self) -> bool {
        self.merging.is_some() || self.due_from().is_some()
    }

    /// Starts the merge due, if any and none is running, on its own thread.
    pub fn start_merge(&mut self) -> std::io::Result<()> {
        if self.merging.is_some() || !self.background {
            return Ok(());
        }
        let Some(job) = self.due_from().and_then(|from| self.merge_job(from)) else {
            return Ok(());
        };
        let thread = std::thread::Builder::new().name("key-index-merge".into());
        let folds = !job.moves.is_empty();
        self.merging = Some(thread.spawn(move || {
            // Beside the rounds, which come first (`background.rs`).
            crate::background::lower_priority("key-index-merge");
            let started = std::time::Instant::now();
            let merged = job.run();
            if let Ok(m) = &merged {
                let (runs, ms) = (m.inputs.len(), started.elapsed().as_millis() as u64);
                // A compaction's fold is one event a pass; the merges of
                // the rounds' runs, one a round, are debug.
                if folds {
                    tracing::info!(
                        runs,
                        live = m.live,
                        ms,
                        "key index folded a compaction's row moves in the background"
                    );
                } else {
                    tracing::debug!(
                        runs,
                        live = m.live,
                        ms,
                        "key index merged in the background"
                    );
                }
            }
            merged
        })?);
        Ok(())
    }

    /// Puts the merge that ran on its own thread in place, if it ended
    /// (`wait`: waits for it). Whether the runs changed.
    pub fn finish_merge(&mut self, wait: bool) -> std::io::Result<bool> {
        let ended = self.merging.as_ref().is_some_and(JoinHandle::is_finished);
        let Some(merging) = self.merging.take_if(|_| wait || ended) else {
            return Ok(false);
        };
        let merged = merging
            .join()
            .map_err(|_| std::io::Error::other("the key index merge panicked"))?;
        if let Err(e) = &merged {
            self.note_out_of_step(e);
        }
        self.install(merged?)
    }

    fn wait_merge(&mut self) -> std::io::Result<bool> {
        self.finish_merge(true)
    }

    /// Records the runs written so far and what the index reflects (the
    /// commit point), deletes the runs no longer named, then merges runs of
    /// similar size (committing each merge).
    pub fn commit(&mut self, meta: &Meta) -> std::io::Result<()> {
        self.commit_unmerged(meta)?;
        self.merge_due(meta)
    }

    /// [`Self::commit`] without the merges (see [`Self::merge_due`]).
    pub fn commit_unmerged(&mut self, meta: &Meta) -> std::io::Result<()> {
        self.write_index(meta)
    }

    /// Waits for a merge running on its own thread, then merges, now, until
    /// none is due, committing each merge; `meta` is what the index
    /// reflects (unchanged by a merge).
    pub fn merge_due(&mut self, meta: &Meta) -> std::io::Result<()> {
        if self.wait_merge()? {
            self.write_index(meta)?;
        }
        while let Some(job) = self.due_from().and_then(|from| self.merge_job(from)) {
            let merged = self.run_job(job)?;
            self.install(merged)?;
            self.write_index(meta)?;
        }
        Ok(())
    }

    /// [`Self::merge_all`], the index file then listing the one run.
    pub fn merge_all_recorded(&mut self, meta: &Meta) -> std::io::Result<()> {
        self.merge_all()?;
        self.write_index(meta)
    }

    fn write_index(&mut self, meta: &Meta) -> std::io::Result<()> {
        let mut text = format!(
            "{HEADER}\nlayout {LAYOUT}\ntable-uuid {}\n",
            meta.table_uuid
        );
        match meta.snapshot {
            Some(id) => text.push_str(&format!("snapshot-id {id}\n")),
            None => text.push_str("snapshot-id none\n"),
        }
        text.push_str(&format!("keys {}\nnext-run {}\n", self.keys, self.next_seq));
        for run in &self.runs {
            text.push_str(&format!("run {}\n", run.seq));
        }
        if !self.moves.is_empty() {
            text.push_str(MOVES_LINE);
            text.push('\n');
        }
        for (id, path) in &self.files {
            if path.contains('\n') {
                return Err(std::io::Error::other(format!(
                    "a data file path with a line break: {path:?}"
                )));
            }
            text.push_str(&format!("file {id} {path}\n"));
        }
        // Last: a file cut short anywhere (even mid-path) lacks it.
        text.push_str(END_LINE);
        text.push('\n');
        let tmp = self.dir.join(format!("{INDEX_FILE}.tmp"));
        let mut file = File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, self.dir.join(INDEX_FILE))?;
        File::open(&self.dir)?.sync_all()?;
        for path in self.obsolete.drain(..) {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// The index file (what the log names).
    pub fn index_path(&self) -> PathBuf {
        self.dir.join(INDEX_FILE)
    }

    /// Bytes of the runs on disk.
    pub fn run_bytes(&self) -> u64 {
        self.runs
            .iter()
            .filter_map(|r| std::fs::metadata(&r.path).ok())
            .map(|m| m.len())
            .sum()
    }
}

#[cfg(test)]
mod tests;

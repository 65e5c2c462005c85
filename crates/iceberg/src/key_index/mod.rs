//! The persistent key index of an upsert table: `_olake_id` -> the data
//! file and row position of the key's current row, which a position delete
//! or a deletion vector needs.
//!
//! Files per table under `<state_dir>/<table uuid>/` (see `store`): sorted
//! runs of (key, data file id, row position), log-structured: a commit's
//! changes are written as one new run in key order, runs of similar size are
//! merged, and `keys.index` names the runs that make the index (the commit
//! point: a crash midway leaves the previous index whole). Keys are the 16
//! bytes of the `_olake_id` hex; an entry is 40 bytes on disk (with the row's `Stamp`). Nothing is
//! held in memory per key but the runs' fences (16 bytes per 1,024 keys):
//! a lookup reads one 40 KiB block per run, a sorted batch of lookups reads
//! each block at most once; a commit's changes (in key order) stream into
//! one run, rebuilds and updates write runs of at most 1,000,000 changes,
//! and data files are read one column, one batch (8,192 rows) at a time. A
//! rebuild keeps the table's deletes in memory as Roaring bitmaps per data
//! file.
//!
//! Why not a B-tree store (the first layout was redb): each insert cost about
//! 1.6 µs even in key order, most of an upsert's CPU; a run is written
//! sequentially, and a merge streams its inputs (bench/README.md, "After
//! the key index became sorted runs": upsert 4.2 -> 2.3 CPU µs/msg).
//!
//! The file I/O is blocking local-disk I/O, made on the calling task.
//!
//! [`KeyIndex::open`] checks the index against the table:
//! - it reflects the current snapshot: [`IndexState::Fresh`];
//! - it reflects an ancestor of the current snapshot on `main` (e.g. the
//!   process died between an Iceberg commit and [`KeyIndex::apply`], or
//!   another writer appended): the snapshots since are replayed (their added
//!   data files' `_olake_id`, their added deletes remove keys whose row they
//!   retire): [`IndexState::UpdatedFrom`];
//! - otherwise (missing, unreadable, another table's, a snapshot not on
//!   `main`'s history, or a snapshot since that removes data files outside a
//!   `replace`, or adds equality deletes): rebuilt from the current
//!   snapshot: [`IndexState::Rebuilt`]. The old runs are deleted only once
//!   the rebuilt index is committed.
//!
//! The sync looks keys up with [`KeyIndex::lookup`] and, only once its
//! Iceberg commit succeeded, records it with [`KeyIndex::apply`], which
//! writes the commit's run and leaves the merges it makes due to
//! [`KeyIndex::merge`] (a scheduled sync merges at once; a follower keeps
//! the index open and merges in the background, [`KeyIndex::refresh`]
//! bringing it to the table's snapshot at its next round).

mod build;
pub(crate) use build::snapshots_since;
mod merge;
mod moves;
mod run;
pub(crate) mod scan;
mod store;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use iceberg::io::FileIO;

pub use build::{BuildStats, ReplayRefused};
pub use scan::parse_key;
use scan::KeyFields;
pub use scan::ORDER_BY_PROPERTY;

use crate::error::{IcebergError, IcebergErrorKind};
use crate::table::TableHandle;
use crate::Destination;
use store::{store_err, Blocks, Found, Meta, Op, Store};

/// Where a row came from in the stream, kept with each key's row: a
/// message of the key from another partition replaces the row only when
/// it is newer (the sync's `Version::replaces`), whichever worker or round
/// commits it. Read from the row's `_kafka_timestamp` (on a table of
/// change events `_cdc_lsn`) and `_kafka_partition` when the index is
/// built from the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// The message timestamp in microseconds, or a change event's log
    /// position (`i64::MIN`: none).
    pub timestamp: i64,
    /// The message's partition (`-1`: unknown).
    pub partition: i32,
}

impl Stamp {
    /// A row whose place is not known (a data file without the columns):
    /// any message of its key replaces it.
    pub const UNKNOWN: Stamp = Stamp {
        timestamp: i64::MIN,
        partition: -1,
    };
}

/// A key's current row as the index holds it: the data file (by id), the
/// row's position in it, and its [`Stamp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexedRow {
    /// The data file's id (see [`KeyReader::path`]).
    pub file: u32,
    /// The row's position in it (0-based).
    pub pos: u64,
    /// Where the row came from.
    pub stamp: Stamp,
}

impl IndexedRow {
    /// Whether the row is at `pos` of file `file`.
    pub fn is_at(&self, file: u32, pos: u64) -> bool {
        self.file == file && self.pos == pos
    }
}

/// A row a commit wrote, for [`KeyIndex::apply_each`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewRow {
    /// The row's key.
    pub key: [u8; 16],
    /// The data file, as an index into the commit's files.
    pub file: usize,
    /// The row's position in it.
    pub pos: u64,
    /// Where the row came from.
    pub stamp: Stamp,
}

/// Where a key's current row is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RowLocation {
    /// The data file's path, as in the manifest.
    pub data_file: String,
    /// The row's position in it (0-based).
    pub pos: u64,
}

/// Why an index was rebuilt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildReason {
    /// No index file (first run, or the state folder was lost).
    Missing,
    /// The file could not be read (corrupt, or another layout).
    Unreadable(String),
    /// The file belongs to another table (this uuid).
    OtherTable(String),
    /// The index reflects a snapshot that is not the current one nor one of
    /// its ancestors on `main` (another writer replaced history, expired
    /// snapshots, a rollback).
    UnknownSnapshot(i64),
    /// A snapshot since the recorded one cannot be replayed.
    NotReplayable(ReplayRefused),
}

impl std::fmt::Display for RebuildReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => write!(f, "no index yet"),
            Self::Unreadable(e) => write!(f, "the index could not be read: {e}"),
            Self::OtherTable(uuid) => write!(f, "the index belongs to table {uuid}"),
            Self::UnknownSnapshot(id) => write!(
                f,
                "the index reflects snapshot {id}, not an ancestor of the current one"
            ),
            Self::NotReplayable(why) => write!(f, "{why}"),
        }
    }
}

/// What [`KeyIndex::open`] had to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexState {
    /// The index already reflected the current snapshot.
    Fresh,
    /// Replayed this many snapshots committed since the recorded one.
    UpdatedFrom(usize),
    /// Rebuilt from the table.
    Rebuilt(RebuildReason),
}

impl std::fmt::Display for IndexState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fresh => write!(f, "up to date"),
            Self::UpdatedFrom(n) => write!(f, "updated from {n} snapshots since its last"),
            Self::Rebuilt(reason) => write!(f, "rebuilt from the table ({reason})"),
        }
    }
}

/// What [`KeyIndex::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Recorded: the index reflects the new snapshot.
    Recorded,
    /// The commit's parent is not the snapshot the index reflects (another
    /// writer committed in between): nothing written; the next
    /// [`KeyIndex::open`] replays the snapshots in order.
    Stale,
}

/// The key index of one table, open.
pub struct KeyIndex {
    store: Store,
    path: PathBuf,
    table_uuid: String,
    snapshot_id: Option<i64>,
    state: IndexState,
    stats: BuildStats,
}

impl std::fmt::Debug for KeyIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyIndex")
            .field("path", &self.path)
            .field("snapshot_id", &self.snapshot_id)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl KeyIndex {
    /// Opens the table's index under `state_dir`, bringing it to the
    /// table's current snapshot (see the module doc). Fails if the table has
    /// no `_olake_id` column, on a storage error, or if another process has
    /// the index open.
    pub async fn open(
        state_dir: &Path,
        table: &TableHandle,
        file_io: &FileIO,
    ) -> Result<KeyIndex, IcebergError> {
        let uuid = table.metadata().uuid().to_string();
        let fields = Self::key_fields(table, Self::opening(table))?;
        let dir = state_dir.join(&uuid);
        let step = format!("opening the key index in {}", dir.display());
        let (store, found) = Store::open(&dir).map_err(|e| store_err(&step, e))?;
        let mut index =
            Self::bring_up_to_date(store, found, table, file_io, fields, &|_| None).await?;
        index.merge()?;
        Ok(index)
    }

    /// Brings an index kept open since an earlier commit (a follower's, from
    /// round to round) to the table's current snapshot, as [`Self::open`]
    /// does: [`IndexState::Fresh`] when no other writer committed since. A
    /// compaction `destination` committed in this process is followed by
    /// keeping its row moves, found by counting, which lookups go through
    /// until a background merge folds them into the runs (`moves.rs`);
    /// no file is read and no run rewritten on the way. Merges run in the
    /// background ([`Self::merge_in_background`]).
    pub async fn refresh(
        self,
        table: &TableHandle,
        destination: &Destination,
    ) -> Result<KeyIndex, IcebergError> {
        let mut index = self;
        index.merge_in_background()?;
        let fields = Self::key_fields(table, Self::opening(table))?;
        let found = Found::Index(Meta {
            table_uuid: index.table_uuid,
            snapshot: index.snapshot_id,
        });
        let uuid = table.metadata().uuid().to_string();
        let moves = |snapshot| destination.moves_of(&uuid, snapshot);
        let file_io = destination.file_io();
        let mut index =
            Self::bring_up_to_date(index.store, found, table, file_io, fields, &moves).await?;
        index.merge_in_background()?;
        Ok(index)
    }

    /// The columns the index reads from `table`'s files; an error names
    /// `step` when the table has no key column.
    fn key_fields(table: &TableHandle, step: impl Into<String>) -> Result<KeyFields, IcebergError> {
        let order_by = table.metadata().properties().get(ORDER_BY_PROPERTY);
        KeyFields::of(table.schema(), order_by.map(String::as_str)).ok_or_else(|| {
            IcebergError::new(
                IcebergErrorKind::Data,
                step,
                format!("the table has no {} column", scan::KEY_COLUMN),
            )
        })
    }

    /// The step an open or refresh of `table`'s index names.
    fn opening(table: &TableHandle) -> String {
        format!("opening the key index of table {}", table.name())
    }

    /// What [`Self::open`] and [`Self::refresh`] share: the index as `found`,
    /// checked against the table's current snapshot, replayed or rebuilt.
    async fn bring_up_to_date(
        mut store: Store,
        found: Found,
        table: &TableHandle,
        file_io: &FileIO,
        fields: KeyFields,
        moves: build::MovesOf<'_>,
    ) -> Result<KeyIndex, IcebergError> {
        let metadata = table.metadata();
        let uuid = metadata.uuid().to_string();
        let path = store.index_path();
        let current = metadata.current_snapshot_id();
        let meta = Meta {
            table_uuid: uuid.clone(),
            snapshot: current,
        };
        let reason = match found {
            Found::Missing => RebuildReason::Missing,
            Found::Unreadable(why) => RebuildReason::Unreadable(why),
            Found::Index(found) if found.table_uuid != uuid => {
                RebuildReason::OtherTable(found.table_uuid)
            }
            Found::Index(found) if found.snapshot == current => {
                return Ok(Self::new(store, path, meta, IndexState::Fresh));
            }
            Found::Index(found) => match build::snapshots_since(metadata, found.snapshot) {
                None => RebuildReason::UnknownSnapshot(found.snapshot.unwrap_or(-1)),
                Some(chain) => {
                    let step = format!("updating key index {}", path.display());
                    match build::update(&mut store, &step, metadata, file_io, fields, &chain, moves)
                        .await?
                    {
                        Ok(stats) => {
                            store
                                .commit_unmerged(&meta)
                                .map_err(|e| store_err(&step, e))?;
                            let state = IndexState::UpdatedFrom(chain.len());
                            let mut index = Self::new(store, path, meta, state);
                            index.stats = stats;
                            return Ok(index);
                        }
                        Err(why) => RebuildReason::NotReplayable(why),
                    }
                }
            },
        };
        // The old runs stay named until the rebuilt index is committed.
        let step = format!("rebuilding key index {}", path.display());
        store.reset();
        let stats = build::rebuild(&mut store, &step, metadata, file_io, fields).await?;
        store.commit(&meta).map_err(|e| store_err(&step, e))?;
        let mut index = Self::new(store, path, meta, IndexState::Rebuilt(reason));
        index.stats = stats;
        Ok(index)
    }

    fn new(store: Store, path: PathBuf, meta: Meta, state: IndexState) -> Self {
        Self {
            store,
            path,
            table_uuid: meta.table_uuid,
            snapshot_id: meta.snapshot,
            state,
            stats: BuildStats::default(),
        }
    }

    fn meta(&self) -> Meta {
        Meta {
            table_uuid: self.table_uuid.clone(),
            snapshot: self.snapshot_id,
        }
    }

    /// Merges the runs due, now (log-structured: runs of similar size
    /// become one; every run while compaction moves are kept), after the
    /// merge running in the background, if any. [`Self::apply_each`]
    /// leaves them: a scheduled sync merges after its commit, a follower
    /// in the background ([`Self::merge_in_background`]) and at its stop.
    pub fn merge(&mut self) -> Result<(), IcebergError> {
        let step = self.merge_step();
        let meta = self.meta();
        self.store.merge_due(&meta).map_err(|e| store_err(&step, e))
    }

    /// Merges every run into one, now: what [`KeyReader::rows`] needs.
    pub fn merge_all(&mut self) -> Result<(), IcebergError> {
        let step = self.merge_step();
        let meta = self.meta();
        self.store
            .merge_all_recorded(&meta)
            .map_err(|e| store_err(&step, e))
    }

    /// Puts in place the background merge that ended, if any, and starts
    /// the next one due on its own thread; never waits. Lookups and
    /// commits go on meanwhile (a merge reads runs that do not change).
    pub fn merge_in_background(&mut self) -> Result<(), IcebergError> {
        let step = self.merge_step();
        if self
            .store
            .finish_merge(false)
            .map_err(|e| store_err(&step, e))?
        {
            let meta = self.meta();
            self.store
                .commit_unmerged(&meta)
                .map_err(|e| store_err(&step, e))?;
        }
        self.store.start_merge().map_err(|e| store_err(&step, e))
    }

    fn merge_step(&self) -> String {
        format!("merging the runs of key index {}", self.path.display())
    }

    /// Starts no merge in the background from now on (tests).
    #[cfg(test)]
    pub(crate) fn hold_background_merges(&mut self) {
        self.store.hold_background_merges();
    }

    /// Whether a merge is due or running ([`Self::merge`]).
    pub fn merge_pending(&self) -> bool {
        self.store.merge_due_or_running()
    }

    /// Whether the index met a row that a compaction it follows left out:
    /// it is out of step with the table and must not be kept (the next
    /// open rebuilds it).
    pub fn out_of_step(&self) -> bool {
        self.store.out_of_step()
    }

    /// What opening had to do (for the log).
    pub fn state(&self) -> &IndexState {
        &self.state
    }

    /// The counts of the rebuild or update opening did (zero when fresh),
    /// including keys found on more than one live row.
    pub fn build_stats(&self) -> &BuildStats {
        &self.stats
    }

    /// The snapshot the index reflects (`None`: a table without snapshots).
    pub fn snapshot_id(&self) -> Option<i64> {
        self.snapshot_id
    }

    /// The index file (`keys.index`, naming the runs beside it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the index's runs on disk.
    pub fn size_on_disk(&self) -> u64 {
        self.store.run_bytes()
    }

    /// The number of keys (live rows) indexed.
    pub fn len(&self) -> Result<u64, IcebergError> {
        Ok(self.store.len())
    }

    /// Whether no key is indexed.
    pub fn is_empty(&self) -> Result<bool, IcebergError> {
        Ok(self.len()? == 0)
    }

    /// The current row of each key (`None`: not in the table), in order.
    pub fn lookup(
        &self,
        keys: impl IntoIterator<Item = [u8; 16]>,
    ) -> Result<Vec<Option<RowLocation>>, IcebergError> {
        let reader = self.reader()?;
        let mut out = Vec::new();
        for key in keys {
            let found = match reader.get(&key)? {
                Some(row) => Some(RowLocation {
                    data_file: reader.path(row.file)?,
                    pos: row.pos,
                }),
                None => None,
            };
            out.push(found);
        }
        Ok(out)
    }

    /// A reader for many lookups; see [`KeyReader`]. Looking keys up in
    /// ascending order reads each block of the index at most once.
    pub fn reader(&self) -> Result<KeyReader<'_>, IcebergError> {
        Ok(KeyReader {
            store: &self.store,
            blocks: RefCell::new(Blocks::default()),
            step: format!("looking up keys in {}", self.path.display()),
        })
    }

    /// Records a committed snapshot: `deletes` (tombstoned keys) are
    /// removed, then `upserts` (key, data file path, row position, stamp) set, and
    /// the snapshot id recorded. Call it only after the Iceberg commit
    /// succeeded, with the committed snapshot's id and parent: a parent
    /// other than [`Self::snapshot_id`] writes nothing and returns
    /// [`Applied::Stale`]. See [`Self::apply_each`] for any number of keys.
    pub fn apply<P: AsRef<str>>(
        &mut self,
        snapshot_id: i64,
        parent_snapshot_id: Option<i64>,
        upserts: &[([u8; 16], P, u64, Stamp)],
        deletes: &[[u8; 16]],
    ) -> Result<Applied, IcebergError> {
        let mut files: Vec<String> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (_, path, _, _) in upserts {
            index.entry(path.as_ref()).or_insert_with(|| {
                files.push(path.as_ref().to_string());
                files.len() - 1
            });
        }
        let mut rows: Vec<NewRow> = upserts
            .iter()
            .map(|(key, path, pos, stamp)| NewRow {
                key: *key,
                file: index[path.as_ref()],
                pos: *pos,
                stamp: *stamp,
            })
            .collect();
        // Stable: of two upserts of one key the later wins.
        rows.sort_by_key(|row| row.key);
        self.apply_each(
            snapshot_id,
            parent_snapshot_id,
            &files,
            rows.into_iter().map(Ok::<_, std::io::Error>),
            deletes,
        )
    }

    /// [`Self::apply`] for any number of upserts, read from an iterator of
    /// [`NewRow`]s in ascending key order:
    /// streamed into one run, then committed; a crash midway leaves the
    /// index at the parent snapshot (the next open replays this one). Keys
    /// out of order fail it (and the next open replays the snapshot).
    pub fn apply_each<E>(
        &mut self,
        snapshot_id: i64,
        parent_snapshot_id: Option<i64>,
        files: &[String],
        upserts: impl Iterator<Item = Result<NewRow, E>>,
        deletes: &[[u8; 16]],
    ) -> Result<Applied, IcebergError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if parent_snapshot_id != self.snapshot_id {
            return Ok(Applied::Stale);
        }
        let step = format!(
            "recording snapshot {snapshot_id} in key index {}",
            self.path.display()
        );
        let ids: Vec<u32> = files.iter().map(|p| self.store.file_id(p)).collect();
        let mut removes: Vec<[u8; 16]> = deletes.to_vec();
        removes.sort_unstable();
        let puts = upserts.map(|upsert| {
            let new = upsert.map_err(std::io::Error::other)?;
            let file = ids.get(new.file).ok_or_else(|| {
                std::io::Error::other(format!("no data file number {}", new.file))
            })?;
            let row = IndexedRow {
                file: *file,
                pos: new.pos,
                stamp: new.stamp,
            };
            Ok(Op::Put(new.key, row))
        });
        // One run, streamed: the upserts come in key order (the sync's
        // winners); a key's remove goes before its put.
        let ops = MergeByKey::new(removes.into_iter().map(|k| Ok(Op::Remove(k))), puts);
        self.store
            .write_sorted(ops, true)
            .map_err(|e| store_err(&step, e))?;
        let meta = Meta {
            table_uuid: self.table_uuid.clone(),
            snapshot: Some(snapshot_id),
        };
        self.store
            .commit_unmerged(&meta)
            .map_err(|e| store_err(&step, e))?;
        self.snapshot_id = Some(snapshot_id);
        Ok(Applied::Recorded)
    }
}

impl KeyIndex {
    /// [`Self::apply_each`] with the upserts read back from `files` (the
    /// committed snapshot's new data files): each row's `_olake_id` at its
    /// position. For files whose rows are not in the order they were
    /// written (a partitioned table's: rows are split per partition), where
    /// a written row's position cannot be counted. Holds one entry per new
    /// row (32 bytes) until they are recorded.
    pub async fn apply_read_back(
        &mut self,
        file_io: &FileIO,
        handle: &TableHandle,
        snapshot_id: i64,
        parent_snapshot_id: Option<i64>,
        files: &[String],
        deletes: &[[u8; 16]],
    ) -> Result<Applied, IcebergError> {
        if parent_snapshot_id != self.snapshot_id {
            return Ok(Applied::Stale);
        }
        let step = format!("recording snapshot {snapshot_id} in the key index");
        let fields = Self::key_fields(handle, step)?;
        let mut upserts: Vec<NewRow> = Vec::new();
        for (n, path) in files.iter().enumerate() {
            scan::read_stamped_keys(file_io, path, fields, |pos, key, stamp| {
                upserts.extend(key.map(|key| NewRow {
                    key,
                    file: n,
                    pos,
                    stamp,
                }));
                Ok(())
            })
            .await?;
        }
        upserts.sort_unstable_by_key(|row| row.key);
        self.apply_each(
            snapshot_id,
            parent_snapshot_id,
            files,
            upserts.into_iter().map(Ok::<_, std::io::Error>),
            deletes,
        )
    }
}

/// Many lookups in a [`KeyIndex`] (it stays borrowed meanwhile).
pub struct KeyReader<'a> {
    store: &'a Store,
    blocks: RefCell<Blocks>,
    step: String,
}

impl KeyReader<'_> {
    /// Every key's row, in key order (the order [`Self::get`] is best
    /// called in), when the index is one run: after
    /// [`KeyIndex::merge_all`].
    pub fn rows(
        &self,
    ) -> Result<impl Iterator<Item = Result<([u8; 16], IndexedRow), IcebergError>> + '_, IcebergError>
    {
        let rows = self.store.live_rows().ok_or_else(|| {
            IcebergError::new(
                IcebergErrorKind::Storage,
                self.step.clone(),
                "the key index has several runs; merge them first",
            )
        })?;
        Ok(rows.map(|r| r.map_err(|e| store_err(&self.step, e))))
    }
    /// `key`'s current row, if any.
    pub fn get(&self, key: &[u8; 16]) -> Result<Option<IndexedRow>, IcebergError> {
        self.store
            .get(key, &mut self.blocks.borrow_mut())
            .map_err(|e| store_err(&self.step, e))
    }

    /// The path of data file id `file`.
    pub fn path(&self, file: u32) -> Result<String, IcebergError> {
        self.store.path(file).map(str::to_string).ok_or_else(|| {
            IcebergError::new(
                IcebergErrorKind::Storage,
                &self.step,
                format!("no path for file id {file}"),
            )
            .with_retryable(false)
        })
    }
}

/// Two streams of ops in key order, merged in key order (the first's op
/// goes first on a tie).
struct MergeByKey<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A, B> MergeByKey<A, B>
where
    A: Iterator<Item = std::io::Result<Op>>,
    B: Iterator<Item = std::io::Result<Op>>,
{
    fn new(a: A, b: B) -> Self {
        Self {
            a: a.peekable(),
            b: b.peekable(),
        }
    }
}

impl<A, B> Iterator for MergeByKey<A, B>
where
    A: Iterator<Item = std::io::Result<Op>>,
    B: Iterator<Item = std::io::Result<Op>>,
{
    type Item = std::io::Result<Op>;

    fn next(&mut self) -> Option<Self::Item> {
        let take_a = match (self.a.peek(), self.b.peek()) {
            (Some(Ok(a)), Some(Ok(b))) => a.key() <= b.key(),
            (Some(_), Some(Err(_))) => false,
            (Some(_), _) => true,
            (None, _) => false,
        };
        if take_a {
            self.a.next()
        } else {
            self.b.next()
        }
    }
}

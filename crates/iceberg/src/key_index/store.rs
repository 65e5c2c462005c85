//! The redb file of one table's key index.
//!
//! Tables:
//! - `keys`: `_olake_id` (16 bytes) -> (data file id, row position);
//! - `files`: data file id -> path, and `file_ids`: path -> id (a data file
//!   path is stored once, not once per row);
//! - `meta`: `table-uuid`, `snapshot-id` (the snapshot the index reflects,
//!   `none` for a table without snapshots; absent while a rebuild or an
//!   update is unfinished), `layout`.

use std::path::Path;

use redb::{
    Database, ReadableTable, ReadableTableMetadata, Table, TableDefinition, WriteTransaction,
};

use crate::error::{IcebergError, IcebergErrorKind};

pub(crate) const KEYS: TableDefinition<[u8; 16], (u32, u64)> = TableDefinition::new("keys");
pub(crate) const FILES: TableDefinition<u32, &str> = TableDefinition::new("files");
pub(crate) const FILE_IDS: TableDefinition<&str, u32> = TableDefinition::new("file_ids");
pub(crate) const META: TableDefinition<&str, &str> = TableDefinition::new("meta");

const LAYOUT: &str = "1";
/// redb's page cache: the index's memory no matter how many keys it holds.
const CACHE_BYTES: usize = 32 * 1024 * 1024;
/// Buffered operations written per transaction during a rebuild or update.
pub(crate) const FLUSH_OPS: usize = 200_000;

pub(crate) fn store_err(step: impl Into<String>, e: impl std::fmt::Display) -> IcebergError {
    IcebergError::new(IcebergErrorKind::Storage, step, e.to_string()).with_retryable(false)
}

/// A redb error, boxed (redb's own is large).
#[derive(Debug)]
pub(crate) struct StoreError(Box<redb::Error>);

impl<E: Into<redb::Error>> From<E> for StoreError {
    fn from(e: E) -> Self {
        Self(Box::new(e.into()))
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One buffered change of the index.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// The key's row is at this location now.
    Put([u8; 16], u32, u64),
    /// The row at this location was deleted: forget the key if it still
    /// points there (a newer row of the same key stays).
    RemoveIfAt([u8; 16], u32, u64),
    /// The key was deleted (a tombstone won).
    Remove([u8; 16]),
}

/// What reading the metadata found.
#[derive(Debug, Default)]
pub(crate) struct Meta {
    pub table_uuid: Option<String>,
    /// `None`: unfinished; `Some(None)`: a table without snapshots.
    pub snapshot: Option<Option<i64>>,
    pub layout: Option<String>,
}

pub(crate) fn open_db(path: &Path) -> Result<Database, redb::DatabaseError> {
    Database::builder().set_cache_size(CACHE_BYTES).create(path)
}

/// Creates the tables (so reads never meet a missing one).
pub(crate) fn init(db: &Database, path: &Path) -> Result<(), IcebergError> {
    let step = format!("initialising key index {}", path.display());
    let tx = db.begin_write().map_err(|e| store_err(&step, e))?;
    {
        tx.open_table(KEYS).map_err(|e| store_err(&step, e))?;
        tx.open_table(FILES).map_err(|e| store_err(&step, e))?;
        tx.open_table(FILE_IDS).map_err(|e| store_err(&step, e))?;
        tx.open_table(META).map_err(|e| store_err(&step, e))?;
    }
    tx.commit().map_err(|e| store_err(&step, e))
}

pub(crate) fn read_meta(db: &Database) -> Result<Meta, StoreError> {
    let tx = db.begin_read()?;
    let table = match tx.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Meta::default()),
        Err(e) => return Err(e.into()),
    };
    let get = |k: &str| -> Result<Option<String>, StoreError> {
        Ok(table.get(k)?.map(|v| v.value().to_string()))
    };
    let snapshot = get("snapshot-id")?.map(|s| s.parse::<i64>().ok());
    Ok(Meta {
        table_uuid: get("table-uuid")?,
        snapshot,
        layout: get("layout")?,
    })
}

pub(crate) fn layout_ok(meta: &Meta) -> bool {
    meta.layout.as_deref() == Some(LAYOUT)
}

/// Writes the table uuid and the snapshot the index reflects (`None` in
/// `snapshot`: unfinished).
pub(crate) fn write_meta(
    tx: &WriteTransaction,
    table_uuid: &str,
    snapshot: Option<Option<i64>>,
) -> Result<(), StoreError> {
    let mut meta = tx.open_table(META)?;
    meta.insert("layout", LAYOUT)?;
    meta.insert("table-uuid", table_uuid)?;
    match snapshot {
        Some(Some(id)) => {
            meta.insert("snapshot-id", id.to_string().as_str())?;
        }
        Some(None) => {
            meta.insert("snapshot-id", "none")?;
        }
        None => {
            meta.remove("snapshot-id")?;
        }
    }
    Ok(())
}

/// The id of a data file path, assigned on first use.
pub(crate) fn file_id(tx: &WriteTransaction, path: &str) -> Result<u32, StoreError> {
    let mut ids = tx.open_table(FILE_IDS)?;
    if let Some(id) = ids.get(path)? {
        return Ok(id.value());
    }
    let mut files = tx.open_table(FILES)?;
    let next = match files.last()? {
        Some((id, _)) => id.value() + 1,
        None => 0,
    };
    files.insert(next, path)?;
    ids.insert(path, next)?;
    Ok(next)
}

/// The id of a known data file path.
pub(crate) fn known_file_id(db: &Database, path: &str) -> Result<Option<u32>, StoreError> {
    let tx = db.begin_read()?;
    let ids = tx.open_table(FILE_IDS)?;
    Ok(ids.get(path)?.map(|v| v.value()))
}

/// Counts what a flush did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Flushed {
    /// `Put`s that replaced a key already present.
    pub replaced: u64,
    /// Keys removed.
    pub removed: u64,
}

impl Op {
    fn key(&self) -> &[u8; 16] {
        match self {
            Op::Put(key, ..) | Op::RemoveIfAt(key, ..) | Op::Remove(key) => key,
        }
    }
}

fn apply_ops(keys: &mut Table<[u8; 16], (u32, u64)>, ops: &[Op]) -> Result<Flushed, StoreError> {
    let mut out = Flushed::default();
    // In key order (B-tree locality); a stable sort keeps the order of the
    // ops on one key, and ops on different keys commute.
    let mut order: Vec<&Op> = ops.iter().collect();
    order.sort_by_key(|op| op.key());
    for op in order {
        match op {
            Op::Put(key, file, pos) => {
                if keys.insert(key, (*file, *pos))?.is_some() {
                    out.replaced += 1;
                }
            }
            Op::Remove(key) => {
                if keys.remove(key)?.is_some() {
                    out.removed += 1;
                }
            }
            Op::RemoveIfAt(key, file, pos) => {
                let here = keys.get(key)?.map(|v| v.value()) == Some((*file, *pos));
                if here {
                    keys.remove(key)?;
                    out.removed += 1;
                }
            }
        }
    }
    Ok(out)
}

/// Writes the ops in one transaction; `meta`: also record this (table
/// uuid, snapshot).
pub(crate) fn flush(
    db: &Database,
    ops: &[Op],
    meta: Option<(&str, Option<Option<i64>>)>,
    step: &str,
) -> Result<Flushed, IcebergError> {
    // Durable commits even midway: redb reuses the pages a transaction
    // frees only after a durable commit, and non-durable ones made a
    // rebuild's file several times larger.
    let tx = db.begin_write().map_err(|e| store_err(step, e))?;
    let flushed = (|| -> Result<Flushed, StoreError> {
        let flushed = {
            let mut keys = tx.open_table(KEYS)?;
            apply_ops(&mut keys, ops)?
        };
        if let Some((uuid, snapshot)) = meta {
            write_meta(&tx, uuid, snapshot)?;
        }
        Ok(flushed)
    })()
    .map_err(|e| store_err(step, e))?;
    tx.commit().map_err(|e| store_err(step, e))?;
    Ok(flushed)
}

/// The number of keys.
pub(crate) fn key_count(db: &Database) -> Result<u64, StoreError> {
    let tx = db.begin_read()?;
    let keys = tx.open_table(KEYS)?;
    Ok(keys.len()?)
}

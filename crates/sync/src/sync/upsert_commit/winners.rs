//! Every key's winner of an upsert sync, against the key index: which held
//! rows are written (`u` for keys the table has), which old rows retire.
//!
//! A truncate of the source table (a change event) also retires every row
//! of the table it supersedes, and drops the sync's own versions it
//! supersedes: the index is walked in key order beside the winners, which
//! come in key order too.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use roaring::RoaringTreemap;
use topicberg_core::config::DeleteFormat;
use topicberg_iceberg::key_index::{IndexedRow, KeyIndex, KeyReader};

use super::super::failure::UpsertError;
use super::super::upsert::{
    decide_by_value, Decision, Fill, FillFrom, KeyHash, Part, RowSet, Slot, UpsertBuffer, Version,
    VersionOrder,
};
use super::previous_values::{Donor, Filling};
use super::written_rows::encode_winner;

/// Primary-key changes followed back from one row, at most.
const MAX_MOVES: usize = 64;

/// Every key's winner, against the key index.
pub(super) struct Winners {
    /// Held rows to write.
    pub winners: Arc<RowSet>,
    /// Of those, the ones whose key the table has (`_op_type` `u`).
    pub updates: Arc<RowSet>,
    /// Tombstoned (or truncated) keys the table has.
    pub deleted: Vec<KeyHash>,
    /// Keys whose old row retires, per data file of that row (equality
    /// deletes name them, in the data file's partition).
    pub retired_keys: BTreeMap<String, Vec<KeyHash>>,
    /// Old rows to retire: data file -> positions.
    pub retire: BTreeMap<String, RoaringTreemap>,
    /// How many old rows retire.
    pub deletes: u64,
    /// Keys whose winner is older than the table's row of the key (which
    /// came from another partition): neither written nor deleting.
    pub outranked: u64,
    /// Keys of a change stream keyed by payload fields whose delete named
    /// a row neither the table nor the sync had (counted only there, see
    /// [`UpsertBuffer::deletes_name_rows`]).
    pub unmatched_deletes: u64,
    /// The written keys and their held row numbers, in key order.
    pub winner_keys: PathBuf,
    /// The winning rows' unsent values and where each is read from.
    pub fillings: Vec<Filling>,
}

/// Where an unsent value is read from, the table's data file by its id.
enum Source {
    Held(u32),
    Table { file: u32, pos: u64 },
}

/// The winners as they are settled, key by key.
struct Fold {
    delete_format: DeleteFormat,
    winners: RowSet,
    updates: RowSet,
    deleted: Vec<KeyHash>,
    retired_by_id: BTreeMap<u32, Vec<KeyHash>>,
    retire_by_id: BTreeMap<u32, RoaringTreemap>,
    deletes: u64,
    outranked: u64,
    unmatched_deletes: u64,
    keys_out: BufWriter<File>,
    keys_path: PathBuf,
    /// The topic, for errors.
    topic: String,
    /// (winning row, column, source) of each unsent value.
    fillings: Vec<(u32, Arc<str>, Source)>,
    /// (winning row, column, its version, the key it moved from, the
    /// version that moved it) of each value to take from another key.
    moved: Vec<(u32, Arc<str>, Version, KeyHash, Version)>,
}

impl Fold {
    /// Settles `key`: its winner `slot` at `version` against the table's
    /// row `old`.
    fn settle(
        &mut self,
        key: &KeyHash,
        (slot, version): (Slot, Version),
        old: Option<IndexedRow>,
        fills: &[Fill],
    ) -> Result<(), UpsertError> {
        if old.is_some_and(|old| !version.replaces(&old.stamp)) {
            // The table's row came later, from another partition (another
            // worker's, or an earlier round's): it stays.
            self.outranked += 1;
            return Ok(());
        }
        self.take(key, (slot, version), old, fills)
    }

    /// Settles `key` by `order_by`: its partitions' last words against
    /// the table's row ([`decide_by_value`]).
    fn settle_by_value(
        &mut self,
        key: &KeyHash,
        parts: &[Part],
        old: Option<IndexedRow>,
    ) -> Result<(), UpsertError> {
        match decide_by_value(parts, old.map(|o| o.stamp)) {
            Decision::Keep => {
                self.outranked += 1;
                Ok(())
            }
            // Change events, whose rows alone lack values, are not
            // ordered by value.
            Decision::Take(part) => self.take(key, (part.slot, part.version), old, &[]),
        }
    }

    /// `key`'s winner `slot` is written (a row, its unsent values filled
    /// from `fills`) or deletes (a tombstone); the table's row `old`
    /// retires either way.
    fn take(
        &mut self,
        key: &KeyHash,
        (slot, version): (Slot, Version),
        old: Option<IndexedRow>,
        fills: &[Fill],
    ) -> Result<(), UpsertError> {
        match slot {
            Slot::Row(row) => {
                self.fill(row, version, old, fills)?;
                self.winners.insert(row);
                if old.is_some() {
                    self.updates.insert(row);
                }
                self.keys_out
                    .write_all(&encode_winner(key, row, version.stamp()))
                    .map_err(UpsertError::winners_file(&self.keys_path))?;
            }
            Slot::Tombstone if old.is_some() => self.deleted.push(*key),
            Slot::Tombstone => {}
        }
        if let Some(old) = old {
            self.retire(key, old);
        }
        Ok(())
    }

    /// Notes where the winning row `row`'s unsent values are read from: an
    /// earlier held row, or the table's row `old`; none is an error.
    fn fill(
        &mut self,
        row: u32,
        version: Version,
        old: Option<IndexedRow>,
        fills: &[Fill],
    ) -> Result<(), UpsertError> {
        for fill in fills {
            let source = match (fill.from, old) {
                (FillFrom::Held(donor), _) => Source::Held(donor),
                (FillFrom::Table, Some(old)) => Source::Table {
                    file: old.file,
                    pos: old.pos,
                },
                (FillFrom::Moved { from, at }, _) => {
                    // Settled once every key was seen.
                    let column = Arc::clone(&fill.column);
                    self.moved.push((row, column, version, from, at));
                    continue;
                }
                (FillFrom::Table | FillFrom::Nowhere, _) => {
                    return Err(self.unsent_without_row(&fill.column, version))
                }
            };
            self.fillings.push((row, Arc::clone(&fill.column), source));
        }
        Ok(())
    }

    /// The winning rows' values to take from the key their row moved from
    /// (a primary-key change): its version before the move, a row held or
    /// the table's (followed through further moves).
    fn fill_moved(
        &mut self,
        buffer: &UpsertBuffer,
        reader: &KeyReader<'_>,
    ) -> Result<(), UpsertError> {
        for (row, column, version, mut from, mut at) in std::mem::take(&mut self.moved) {
            // Each move followed is earlier than the last; the bound only
            // guards against a cycle of contradicting versions.
            let mut hops = 0;
            let source = loop {
                hops += 1;
                if hops > MAX_MOVES {
                    return Err(self.unsent_without_row(&column, version));
                }
                match buffer.moved_value(&from, at, &column) {
                    FillFrom::Held(donor) => break Source::Held(donor),
                    // The table's row of that key, when it is from before
                    // the move (not a later row of the key).
                    FillFrom::Table => match reader.get(&from).map_err(UpsertError::KeyIndex)? {
                        Some(old) if at.replaces(&old.stamp) => {
                            break Source::Table {
                                file: old.file,
                                pos: old.pos,
                            }
                        }
                        _ => return Err(self.unsent_without_row(&column, version)),
                    },
                    FillFrom::Moved { from: f, at: a } if a != at => (from, at) = (f, a),
                    FillFrom::Moved { .. } | FillFrom::Nowhere => {
                        return Err(self.unsent_without_row(&column, version))
                    }
                }
            };
            self.fillings.push((row, column, source));
        }
        Ok(())
    }

    fn unsent_without_row(&self, column: &str, version: Version) -> UpsertError {
        UpsertError::UnsentWithoutRow {
            topic: self.topic.clone(),
            column: column.to_owned(),
            partition: version.partition,
            offset: version.offset,
        }
    }

    /// A key of the table the sync has no message of, at a truncate: its
    /// row retires unless it came later (from another partition).
    fn truncated(&mut self, key: &KeyHash, old: IndexedRow, truncate: Version) {
        if truncate.replaces(&old.stamp) {
            self.deleted.push(*key);
            self.retire(key, old);
        }
    }

    /// The table's row `old` of `key` retires.
    fn retire(&mut self, key: &KeyHash, old: IndexedRow) {
        self.retire_by_id
            .entry(old.file)
            .or_default()
            .insert(old.pos);
        self.deletes += 1;
        if self.delete_format == DeleteFormat::Equality {
            self.retired_by_id.entry(old.file).or_default().push(*key);
        }
    }
}

/// Every key's winner, in key order, against the key index (one run when
/// the buffer holds a truncate: [`KeyIndex::merge_all`]). The written keys
/// with their held row go to a file, in key order: the key index is
/// updated in that order after the commit (sequential B-tree inserts).
pub(super) fn find_winners(
    index: &KeyIndex,
    buffer: &mut UpsertBuffer,
    delete_format: DeleteFormat,
) -> Result<Winners, UpsertError> {
    let reader = index.reader().map_err(UpsertError::KeyIndex)?;
    let winner_keys = buffer.dir().join("winners.bin");
    let file_err = UpsertError::winners_file(&winner_keys);
    let mut fold = Fold {
        delete_format,
        winners: RowSet::new(buffer.rows()),
        updates: RowSet::new(buffer.rows()),
        deleted: Vec::new(),
        retired_by_id: BTreeMap::new(),
        retire_by_id: BTreeMap::new(),
        deletes: 0,
        outranked: 0,
        unmatched_deletes: 0,
        keys_out: BufWriter::new(File::create(&winner_keys).map_err(&file_err)?),
        keys_path: winner_keys.clone(),
        topic: buffer.topic().to_owned(),
        fillings: Vec::new(),
        moved: Vec::new(),
    };
    let truncate = buffer.truncated();
    let mut table_rows = match truncate {
        Some(_) => Some(reader.rows().map_err(UpsertError::KeyIndex)?.peekable()),
        None => None,
    };
    let by_value = buffer.order() == VersionOrder::Field;
    let count_unmatched = buffer.deletes_name_rows();
    buffer.for_each_key(|key, slot, version, parts, facts| {
        let unmatched = count_unmatched && slot == Slot::Tombstone && !facts.had_row;
        let old = match (&mut table_rows, truncate) {
            (Some(rows), Some(t)) => {
                // The table's keys before this one have no message here.
                while let Some((k, row)) = next_if(rows, |k| k < key)? {
                    fold.truncated(&k, row, t);
                }
                next_if(rows, |k| k == key)?.map(|(_, row)| row)
            }
            _ => reader.get(key).map_err(UpsertError::KeyIndex)?,
        };
        if unmatched && old.is_none() {
            fold.unmatched_deletes += 1;
        }
        if by_value {
            // No truncate here: change events are not ordered by value.
            return fold.settle_by_value(key, parts, old);
        }
        // A version the truncate supersedes is gone with it.
        let (slot, version) = match truncate {
            Some(t) if t.supersedes(&version) => (Slot::Tombstone, t),
            _ => (slot, version),
        };
        fold.settle(key, (slot, version), old, facts.fills)
    })?;
    if let (Some(rows), Some(t)) = (table_rows, truncate) {
        for found in rows {
            let (k, row) = found.map_err(UpsertError::KeyIndex)?;
            fold.truncated(&k, row, t);
        }
    }
    fold.fill_moved(buffer, &reader)?;
    fold.keys_out.flush().map_err(&file_err)?;
    drop(file_err);
    finish(fold, &reader, winner_keys)
}

/// The next of the table's rows when its key is `wanted`.
fn next_if<I>(
    rows: &mut std::iter::Peekable<I>,
    wanted: impl Fn(&KeyHash) -> bool,
) -> Result<Option<(KeyHash, IndexedRow)>, UpsertError>
where
    I: Iterator<Item = Result<(KeyHash, IndexedRow), topicberg_iceberg::IcebergError>>,
{
    match rows.next_if(|r| r.as_ref().map_or(true, |(k, _)| wanted(k))) {
        None => Ok(None),
        Some(found) => found.map(Some).map_err(UpsertError::KeyIndex),
    }
}

/// The fold's sets, the data files named by path.
fn finish(
    fold: Fold,
    reader: &KeyReader<'_>,
    winner_keys: PathBuf,
) -> Result<Winners, UpsertError> {
    let mut retire: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
    for (id, positions) in fold.retire_by_id {
        retire.insert(reader.path(id).map_err(UpsertError::KeyIndex)?, positions);
    }
    let mut retired_keys: BTreeMap<String, Vec<KeyHash>> = BTreeMap::new();
    for (id, keys) in fold.retired_by_id {
        retired_keys.insert(reader.path(id).map_err(UpsertError::KeyIndex)?, keys);
    }
    let mut fillings = Vec::with_capacity(fold.fillings.len());
    for (row, column, source) in fold.fillings {
        let donor = match source {
            Source::Held(donor) => Donor::Held(donor),
            Source::Table { file, pos } => Donor::Table {
                file: reader.path(file).map_err(UpsertError::KeyIndex)?,
                pos,
            },
        };
        fillings.push(Filling { row, column, donor });
    }
    Ok(Winners {
        winners: Arc::new(fold.winners),
        updates: Arc::new(fold.updates),
        deleted: fold.deleted,
        retired_keys,
        retire,
        deletes: fold.deletes,
        outranked: fold.outranked,
        unmatched_deletes: fold.unmatched_deletes,
        winner_keys,
        fillings,
    })
}

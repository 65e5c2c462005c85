//! The row moves of this process's compactions that the index has not
//! folded into its runs yet.
//!
//! When a follower's own compaction commits, every key whose row was in a
//! rewritten file has a new place, found by counting (`maintain/rebase.rs`).
//! Rather than rewriting every run at once on the round that meets the
//! compaction (one pass over the whole index: 20 s at 30M keys), the index
//! keeps the moves and puts each row it reads from a run written before
//! them through them; a background merge of every run then writes the rows
//! at their new places, and the moves are dropped once no run written
//! before them is left. A run written after a compaction never names a
//! file it rewrote (those files left the table with it), so only older runs
//! are translated.
//!
//! While moves are kept, `keys.index` says so (`moves-pending`): the moves
//! live in memory only, so an index a crash left in that state is rebuilt
//! at the next open.

use std::sync::Arc;

use roaring::RoaringBitmap;

use super::IndexedRow;
use crate::maintain::rebase::{Moved, MovesById};

/// One compaction's moves and the runs they apply to.
#[derive(Debug, Clone)]
struct Pending {
    /// Runs numbered below this were written before the compaction.
    before_run: u64,
    moves: Arc<MovesById>,
}

/// The moves kept, oldest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct MovesChain(Vec<Pending>);

/// A run holds a row a compaction left out or deleted, which a right index
/// never does: the index is out of step with the table (and is rebuilt).
#[derive(Debug, thiserror::Error)]
#[error(
    "the key index holds row {pos} of data file id {file}, which a compaction of this \
     process left out: the index is out of step with the table and will be rebuilt"
)]
pub(crate) struct OutOfStep {
    pub file: u32,
    pub pos: u64,
}

impl OutOfStep {
    /// Whether an I/O error of the store is this one.
    pub(crate) fn is(e: &std::io::Error) -> bool {
        e.get_ref().is_some_and(|inner| inner.is::<OutOfStep>())
    }
}

impl MovesChain {
    /// Keeps `moves` for the runs numbered below `before_run`.
    pub(crate) fn push(&mut self, before_run: u64, moves: MovesById) {
        self.0.push(Pending {
            before_run,
            moves: Arc::new(moves),
        });
    }

    /// Whether no moves are kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Where `row`, read from run `run`, is now (its stamp goes with it).
    pub(crate) fn place(&self, run: u64, row: IndexedRow) -> std::io::Result<IndexedRow> {
        let mut row = row;
        for pending in self.0.iter().filter(|p| run < p.before_run) {
            match pending.moves.place(row.file, row.pos) {
                Moved::Stayed => {}
                Moved::To(file, pos) => (row.file, row.pos) = (file, pos),
                Moved::Gone => {
                    let (file, pos) = (row.file, row.pos);
                    return Err(std::io::Error::other(OutOfStep { file, pos }));
                }
            }
        }
        Ok(row)
    }

    /// The ids of the files the kept moves move rows to.
    pub(crate) fn new_files(&self) -> RoaringBitmap {
        let ids = self.0.iter().flat_map(|p| p.moves.new_ids());
        ids.collect()
    }

    /// Drops the moves no run needs: every run is numbered `oldest_run` or
    /// above (`None`: no run is left).
    pub(crate) fn drop_folded(&mut self, oldest_run: Option<u64>) {
        match oldest_run {
            Some(oldest) => self.0.retain(|p| oldest < p.before_run),
            None => self.0.clear(),
        }
    }
}

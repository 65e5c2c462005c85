//! Merging runs: newest-first runs of one index streamed into one, each
//! key's newest entry kept, its row put through the compaction moves the
//! index keeps (`moves`). A merge reads runs that never change and writes a
//! run no index names yet, so it can run on its own thread while the index
//! goes on taking lookups and commits (which only add newer runs); the
//! store then puts the merged run in place of its inputs.

use std::path::PathBuf;
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::moves::MovesChain;
use super::run::{Entry, Run, RunWriter};

/// A merge to run: its inputs, oldest first, a contiguous slice of the
/// index's runs when it started.
#[derive(Debug)]
pub(crate) struct MergeJob {
    pub(crate) inputs: Vec<Arc<Run>>,
    pub(crate) moves: MovesChain,
    /// The merged run's number and file.
    pub(crate) seq: u64,
    pub(crate) path: PathBuf,
    /// The inputs start with the index's oldest run: a deleted key's
    /// tombstone has nothing left to shadow and is dropped.
    pub(crate) drop_deleted: bool,
}

/// What a merge wrote.
#[derive(Debug)]
pub(crate) struct Merged {
    /// The numbers of the runs merged, oldest first.
    pub(crate) inputs: Vec<u64>,
    /// The merged run (`None`: no entry was left, its file deleted).
    pub(crate) run: Option<Run>,
    /// Entries a newer entry of the same key shadowed.
    pub(crate) shadowed: u64,
    /// Keys with a row in the merged run.
    pub(crate) live: u64,
    /// The data file ids the merged run names.
    pub(crate) files: RoaringBitmap,
}

impl MergeJob {
    /// Streams the inputs into one run. A row a kept compaction left out
    /// fails it ([`super::moves::OutOfStep`]), its file deleted.
    pub(crate) fn run(self) -> std::io::Result<Merged> {
        let written = self.write();
        if written.is_err() {
            let _ = std::fs::remove_file(&self.path);
        }
        written
    }

    fn write(&self) -> std::io::Result<Merged> {
        let mut writer = RunWriter::create(&self.path)?;
        let (mut shadowed, mut live) = (0u64, 0u64);
        let mut files = RoaringBitmap::new();
        let mut heads: Vec<_> = self.inputs.iter().map(|r| r.iter().peekable()).collect();
        loop {
            let mut min: Option<[u8; 16]> = None;
            for head in heads.iter_mut() {
                match head.peek() {
                    Some(Ok(e)) => min = Some(min.map_or(e.key, |m| m.min(e.key))),
                    Some(Err(_)) => return Err(head.next().expect("peeked").unwrap_err()),
                    None => {}
                }
            }
            let Some(key) = min else { break };
            let mut newest: Option<(Entry, u64)> = None;
            for (head, run) in heads.iter_mut().zip(&self.inputs) {
                if matches!(head.peek(), Some(Ok(e)) if e.key == key) {
                    shadowed += u64::from(newest.is_some());
                    let entry = head.next().expect("peeked")?;
                    newest = Some((entry, run.seq));
                }
            }
            let (mut entry, seq) = newest.expect("a head holds the smallest key");
            if let Some(row) = entry.row {
                let row = self.moves.place(seq, row)?;
                entry.row = Some(row);
                files.insert(row.file);
                live += 1;
            }
            if entry.row.is_some() || !self.drop_deleted {
                writer.push(&entry)?;
            }
        }
        let run = if writer.finish()? == 0 {
            std::fs::remove_file(&self.path)?;
            None
        } else {
            Some(Run::open(&self.path, self.seq)?)
        };
        Ok(Merged {
            inputs: self.inputs.iter().map(|r| r.seq).collect(),
            run,
            shadowed,
            live,
            files,
        })
    }
}

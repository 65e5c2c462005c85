//! A follower's upsert key indexes, kept open from round to round: a
//! round takes its table's index, brings it to the table's current
//! snapshot (fresh unless another writer committed; its own compactions
//! followed by counting), and hands it back after its commit. Merges of the
//! index's runs (and the fold of a compaction's moves into them) run on
//! their own thread and never hold a round: a round looks keys up and
//! commits while a merge writes (`key_index/merge.rs`). A scheduled sync
//! keeps none: it opens each index, merges after its commit, and closes it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use topicberg_iceberg::key_index::KeyIndex;
use topicberg_iceberg::{Destination, IcebergError, TableHandle};

/// Where an upsert table's key index lives (`<state_dir>/<table uuid>/`)
/// and, in a follower, the indexes kept open between its rounds.
#[derive(Clone, Copy)]
pub(crate) struct IndexHome<'a> {
    pub(crate) state_dir: &'a Path,
    pub(crate) kept: Option<&'a KeptIndexes>,
}

impl IndexHome<'_> {
    /// The table's index: the kept one brought up to date, else opened.
    pub(crate) async fn open(
        &self,
        destination: &Destination,
        handle: &TableHandle,
    ) -> Result<KeyIndex, IcebergError> {
        let dir = self.state_dir.join(handle.metadata().uuid().to_string());
        if let Some(index) = match self.kept {
            Some(kept) => kept.take(&dir),
            None => None,
        } {
            return index.refresh(handle, destination).await;
        }
        let index = KeyIndex::open(self.state_dir, handle, destination.file_io()).await?;
        let table = handle.qualified_name();
        tracing::info!(
            table = %table,
            keep = self.kept.is_some(),
            "opened the key index"
        );
        Ok(index)
    }

    /// Hands the index back after a commit (or a failed attempt): kept for
    /// the next round with its due merge started in the background, or
    /// merged now and closed.
    pub(crate) fn close(&self, mut index: KeyIndex) {
        match self.kept {
            Some(kept) => kept.put(index),
            None => {
                if let Err(e) = index.merge() {
                    // The index is right; its runs are merged at its next commit.
                    tracing::warn!(error = %e, "merging the key index's runs failed");
                }
            }
        }
    }
}

/// The key indexes a follower keeps open, by index folder.
#[derive(Default)]
pub struct KeptIndexes {
    indexes: Mutex<HashMap<PathBuf, KeyIndex>>,
}

impl std::fmt::Debug for KeptIndexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptIndexes").finish_non_exhaustive()
    }
}

impl KeptIndexes {
    fn indexes(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, KeyIndex>> {
        self.indexes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kept index of folder `dir` (`None`: not kept: opened from disk).
    fn take(&self, dir: &Path) -> Option<KeyIndex> {
        self.indexes().remove(dir)
    }

    /// Keeps `index` for the next round, with the merge due started in the
    /// background; an index out of step with its table is not kept (the
    /// next round's open rebuilds it).
    fn put(&self, mut index: KeyIndex) {
        let Some(dir) = index.path().parent().map(Path::to_path_buf) else {
            return;
        };
        if index.out_of_step() {
            tracing::warn!(index = %index.path().display(), "the key index is out of step with its table; it is rebuilt at the next round");
            return;
        }
        if let Err(e) = index.merge_in_background() {
            // Tried again at the next round.
            tracing::warn!(error = %e, "merging the key index's runs failed");
        }
        self.indexes().insert(dir, index);
    }

    /// Ends the merges in progress and the ones due (the fold of kept
    /// compaction moves among them, without which the next start rebuilds
    /// the index), at most `timeout` in all, then closes every index: a
    /// follower's stop.
    pub async fn close(&self, timeout: Duration) {
        let indexes: Vec<KeyIndex> = self.indexes().drain().map(|(_, i)| i).collect();
        let merges = tokio::task::spawn_blocking(move || {
            for mut index in indexes {
                if let Err(e) = index.merge() {
                    tracing::warn!(error = %e, "merging the key index's runs failed; the next start merges them");
                }
            }
        });
        if tokio::time::timeout(timeout, merges).await.is_err() {
            tracing::warn!("a key index merge did not end within the stop timeout; the next start merges its runs (or rebuilds an index whose compaction moves were not folded in)");
        }
    }
}

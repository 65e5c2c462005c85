//! A follower's upsert key indexes, kept open from round to round: a
//! round takes its table's index (waiting for the merge its last commit
//! left, which ran in the background while the round read Kafka), brings
//! it to the table's current snapshot (fresh unless another writer
//! committed), and hands it back after its commit, with the merge that
//! commit left started in the background. A scheduled sync keeps none: it
//! opens each index, merges after its commit, and closes it.

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
            Some(kept) => kept.take(&dir).await,
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

enum Slot {
    Ready(Box<KeyIndex>),
    /// Its due merge, on a thread of the blocking pool.
    Merging(tokio::task::JoinHandle<KeyIndex>),
}

/// The key indexes a follower keeps open, by index folder.
#[derive(Default)]
pub struct KeptIndexes {
    slots: Mutex<HashMap<PathBuf, Slot>>,
}

impl std::fmt::Debug for KeptIndexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptIndexes").finish_non_exhaustive()
    }
}

impl KeptIndexes {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kept index of folder `dir`, once its background merge ended
    /// (`None`: not kept, or its merge panicked: opened again from disk).
    async fn take(&self, dir: &Path) -> Option<KeyIndex> {
        let slot = self.slots().remove(dir)?;
        match slot {
            Slot::Ready(index) => Some(*index),
            Slot::Merging(task) => task.await.ok(),
        }
    }

    fn put(&self, index: KeyIndex) {
        let Some(dir) = index.path().parent().map(Path::to_path_buf) else {
            return;
        };
        let slot = if index.merge_pending() {
            let mut index = index;
            Slot::Merging(tokio::task::spawn_blocking(move || {
                if let Err(e) = index.merge() {
                    // Tried again when the next round takes it.
                    tracing::warn!(error = %e, "merging the key index's runs failed");
                }
                index
            }))
        } else {
            Slot::Ready(Box::new(index))
        };
        self.slots().insert(dir, slot);
    }

    /// Waits for the merges in progress (at most `timeout` in all), then
    /// closes every index: a follower's stop.
    pub async fn close(&self, timeout: Duration) {
        let slots: Vec<Slot> = self.slots().drain().map(|(_, s)| s).collect();
        let merges = async {
            for slot in slots {
                if let Slot::Merging(task) = slot {
                    let _ = task.await;
                }
            }
        };
        if tokio::time::timeout(timeout, merges).await.is_err() {
            tracing::warn!("a key index merge did not end within the stop timeout; the next start merges its runs");
        }
    }
}

//! An upsert buffer's folder under the spill directory, locked for as long
//! as the buffer lives. A sync killed part-way leaves its folder behind
//! (gigabytes for a large sync); the next sync with an upsert table
//! (`stages::prepare_inputs`, before it makes its own) removes every
//! folder under that spill directory whose lock no process holds. The kernel
//! drops a dead process's lock, so the folder of a sync still running (of
//! another job sharing the state directory) is never touched. A folder is
//! only named `upsert-*` once its lock file is in it and locked; folders
//! without a lock file (being made, or left by a version before the locks)
//! are left alone.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use super::SpillError;

/// The lock file in every buffer's folder.
const LOCK_FILE: &str = "folder.lock";
/// The prefix of a buffer's folder.
const PREFIX: &str = "upsert-";

/// A buffer's folder, locked; removed when dropped.
#[derive(Debug)]
pub struct SpillFolder {
    path: PathBuf,
    _lock: File,
}

impl SpillFolder {
    /// A new folder under `spill_dir` (created if missing).
    pub fn create(spill_dir: &Path) -> Result<Self, SpillError> {
        let failed = |path: &Path, e: std::io::Error| SpillError::io(path, e);
        std::fs::create_dir_all(spill_dir).map_err(|e| failed(spill_dir, e))?;
        let id = uuid::Uuid::new_v4().simple();
        let making = spill_dir.join(format!("making-{id}"));
        std::fs::create_dir(&making).map_err(|e| failed(&making, e))?;
        let lock = File::create(making.join(LOCK_FILE))
            .and_then(|file| file.try_lock().map(|()| file).map_err(std::io::Error::from));
        let path = spill_dir.join(format!("{PREFIX}{id}"));
        let lock = lock
            .and_then(|lock| std::fs::rename(&making, &path).map(|()| lock))
            .map_err(|e| {
                let _ = std::fs::remove_dir_all(&making);
                failed(&path, e)
            })?;
        Ok(SpillFolder { path, _lock: lock })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SpillFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Removes the buffers' folders under `spill_dir` whose lock no process
/// holds (logged); how many.
pub fn remove_abandoned(spill_dir: &Path) -> usize {
    let removed = remove_unlocked(spill_dir);
    if removed > 0 {
        tracing::info!(spill_dir = %spill_dir.display(), folders = removed,
            "removed the spill folders of upsert syncs that did not end");
    }
    removed
}

fn remove_unlocked(spill_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(spill_dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let abandoned = entry.file_name().to_string_lossy().starts_with(PREFIX)
            && File::open(entry.path().join(LOCK_FILE)).is_ok_and(|lock| {
                !matches!(lock.try_lock(), Err(TryLockError::WouldBlock))
                    && std::fs::remove_dir_all(entry.path()).is_ok()
            });
        removed += usize::from(abandoned);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spill_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "topicberg-spill-folder-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn removing_abandoned_folders_keeps_live_and_unlocked_ones() {
        let dir = spill_dir();
        let live = SpillFolder::create(&dir).unwrap();
        // A killed sync's folder: its lock file is there, nobody holds it.
        let abandoned = dir.join("upsert-abandoned");
        std::fs::create_dir(&abandoned).unwrap();
        std::fs::write(abandoned.join(LOCK_FILE), b"").unwrap();
        std::fs::write(abandoned.join("rows-0000.arrow"), vec![0u8; 4096]).unwrap();
        // A folder without a lock file (being made, or an older version's).
        let unlocked = dir.join("upsert-older");
        std::fs::create_dir(&unlocked).unwrap();

        assert_eq!(remove_abandoned(&dir), 1);
        let new = SpillFolder::create(&dir).unwrap();
        assert!(!abandoned.exists(), "the abandoned folder is removed");
        assert!(live.path().exists(), "a live buffer's folder stays");
        assert!(unlocked.exists(), "a folder without a lock file stays");
        assert!(new.path().join(LOCK_FILE).exists());

        let (live_path, new_path) = (live.path().to_path_buf(), new.path().to_path_buf());
        drop(live);
        drop(new);
        assert!(
            !live_path.exists() && !new_path.exists(),
            "removed when dropped"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

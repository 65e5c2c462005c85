//! One sync of a job at a time on a machine: an advisory lock file per
//! consumer group under `<state_dir>/locks/`, taken by `topicberg sync` and
//! by `topicberg serve`'s runs alike. A second sync started while one runs
//! (a cron entry overlapping the previous run, `serve` beside a cron job)
//! stops at once with [`SetupError::AlreadyRunning`] instead of draining
//! the same messages.
//!
//! The lock is only the cheap early stop. Exactly once does not depend on
//! it (syncs on two machines, or with two state folders, do not see each
//! other's lock): a commit lands only on the offsets its plan started from
//! (`topicberg_iceberg::offsets`).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::destination::SetupError;

/// A held job lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct JobLock {
    _file: File,
    path: PathBuf,
}

impl JobLock {
    /// Takes the lock of consumer group `group` in `state_dir`, or fails
    /// with [`SetupError::AlreadyRunning`] naming the holder.
    pub fn acquire(state_dir: &Path, group: &str) -> Result<Self, SetupError> {
        let folder = state_dir.join("locks");
        let io = |step: &'static str, path: &Path, source: std::io::Error| SetupError::Lock {
            step,
            path: path.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(&folder).map_err(|e| io("creating", &folder, e))?;
        let path = folder.join(format!("{}.lock", file_name(group)));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io("opening", &path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                return Err(SetupError::AlreadyRunning {
                    group: group.to_string(),
                    holder: holder.trim().to_string(),
                    lock: path,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io("locking", &path, e)),
        }
        let holder = format!(
            "pid {}, started {}",
            std::process::id(),
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(holder.as_bytes()));
        written.map_err(|e| io("writing", &path, e))?;
        Ok(Self { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The group as a file name: characters other than letters, digits, `-`,
/// `_` and `.` become `_`.
fn file_name(group: &str) -> String {
    group
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_sync_of_the_same_job_stops_at_once_naming_the_holder() {
        let dir = std::env::temp_dir().join(format!("topicberg-lock-{}", uuid::Uuid::new_v4()));
        let held = JobLock::acquire(&dir, "topicberg_orders").unwrap();
        let err = JobLock::acquire(&dir, "topicberg_orders").unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, SetupError::AlreadyRunning { .. }), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        // Another job is not held up.
        let other = JobLock::acquire(&dir, "topicberg_customers").unwrap();
        drop((held, other));
        // Released on drop.
        JobLock::acquire(&dir, "topicberg_orders").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn group_names_become_safe_file_names() {
        assert_eq!(file_name("a/b c:d"), "a_b_c_d");
        assert_eq!(file_name("topicberg_job-1.x"), "topicberg_job-1.x");
    }
}

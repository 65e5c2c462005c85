//! Orphan-file removal: files under a table's location that no snapshot
//! of the table references and that are older than a safety window.
//!
//! Referenced: the current metadata JSON file and those in its metadata
//! log, every snapshot's manifest list, every manifest they list, every
//! file those manifests name (deleted entries too), the statistics files.
//! Never deleted: `version-hint.text`, and files younger than the window (a
//! commit in flight writes its data files, manifests, manifest list and
//! metadata JSON file before the catalog points at them). What is left is
//! what failed or killed commits left behind: data files of a sync whose
//! commit did not land, `<commit id>-m<n>.avro` manifests, `snap-*`
//! manifest lists of attempts that lost, files of expired snapshots
//! another engine did not delete, and the metadata JSON files of old
//! versions, which left the table's metadata log (it keeps the last
//! `write.metadata.previous-versions-max`, 100 by default): one per
//! commit, 86,400 a day for a follower committing every second. The table
//! refers to none of them; a catalog that keeps its own history of
//! metadata files (Nessie's commits) loses the versions before the log.
//!
//! The data files a pending file set names (`file_sets.rs`: written by one
//! worker of a job, waiting for the table's committer) count as referenced
//! while the set is there; the set itself is not.
//!
//! Safety check: each file a live snapshot needs (manifest lists,
//! manifests, live data and delete files) that lies under the table's
//! location must be in the listing; one that is not means the listing and
//! the metadata spell locations differently, and nothing is deleted. The
//! snapshots committed since a minute before the listing began are left
//! out of the check (their files may have been written after the listing
//! saw the folder: a follower commits every second); the older snapshots
//! still check the spelling.

use std::collections::HashSet;
use std::time::Duration;

use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;
use serde::Serialize;

use crate::commit::manifest_entries::{entries_of, location_key};
use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};
use crate::table::TableHandle;
use crate::table_metadata::manifests_of;
use crate::write::storage::ListedFile;
use crate::Destination;

/// What orphan removal did to one table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OrphanOutcome {
    /// Files listed under the table's location.
    pub files_listed: usize,
    /// Orphans deleted (or, in a dry run, that would be).
    pub orphans_removed: usize,
    /// Their bytes.
    pub bytes_removed: u64,
    /// Unreferenced files kept because they are younger than the window.
    pub orphans_too_young: usize,
    /// Orphans that could not be deleted.
    pub orphans_not_deleted: usize,
    /// The orphans' locations (at most 100, for the report).
    pub sample: Vec<String>,
}

/// Deletes the table's orphan files older than `min_age` (see the module
/// doc); `dry_run`: only finds them.
pub async fn remove_orphans(
    destination: &Destination,
    handle: &TableHandle,
    min_age: Duration,
    dry_run: bool,
) -> Result<OrphanOutcome, IcebergError> {
    let file_io = destination.file_io();
    let metadata = handle.metadata();
    let location = metadata.location().trim_end_matches('/').to_string();
    let step = format!("removing orphan files of {location}");
    // Listed first: a file written after the listing is not considered.
    let started_ms = crate::commit::snapshot_commit::now_ms();
    let listed = destination
        .storage()
        .list_with_times(&format!("{location}/"))
        .await
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
    // The metadata as it is now (after the listing): whatever a commit
    // that landed meanwhile references is referenced.
    let fresh = destination.reload_patiently(handle).await?;
    let checked_before_ms = started_ms - CLOCK_SKEW.as_millis() as i64;
    let mut references = References::of(file_io, fresh.metadata(), checked_before_ms).await?;
    // The current metadata file (with what was loaded at the start): a
    // catalog that keeps no metadata log still has it.
    for current in [fresh.metadata_location(), handle.metadata_location()] {
        references.referenced.extend(current.map(location_key));
    }
    // The data files of the sets waiting for the table's committer.
    let pending = crate::file_sets::pending_files(destination, &fresh).await?;
    references
        .referenced
        .extend(pending.iter().map(|f| location_key(f)));
    references.check_listing(&step, &location, &listed)?;
    let mut outcome = OrphanOutcome {
        files_listed: listed.len(),
        ..OrphanOutcome::default()
    };
    let cutoff = started_ms - min_age.as_millis() as i64;
    for file in &listed {
        let key = location_key(&file.location);
        if references.referenced.contains(&key) || is_version_hint(&key) {
            continue;
        }
        if file.last_modified_ms > cutoff {
            outcome.orphans_too_young += 1;
            continue;
        }
        if !dry_run {
            if let Err(e) = file_io.delete(&file.location).await {
                tracing::warn!(location = %file.location, error = %e, "could not delete an orphan file");
                outcome.orphans_not_deleted += 1;
                continue;
            }
        }
        outcome.orphans_removed += 1;
        outcome.bytes_removed += file.size;
        if outcome.sample.len() < 100 {
            outcome.sample.push(file.location.clone());
        }
    }
    Ok(outcome)
}

/// How far the committing writers' clocks (a snapshot's timestamp) may be
/// ahead of ours: snapshots this close to the listing's start are not
/// checked against it.
const CLOCK_SKEW: Duration = Duration::from_secs(60);

/// The Hadoop catalog's pointer to the current metadata: never deleted.
fn is_version_hint(key: &str) -> bool {
    key.rsplit('/').next() == Some("version-hint.text")
}

/// The files a table's snapshots reference, as [`location_key`]s.
struct References {
    /// Every file a snapshot names (deleted entries and statistics too).
    referenced: HashSet<String>,
    /// The files a live snapshot committed before the listing needs:
    /// manifest lists, manifests, live data and delete files.
    needed: HashSet<String>,
}

impl References {
    /// `checked_before_ms`: only snapshots committed before this fill
    /// `needed` (see the module doc).
    async fn of(
        file_io: &FileIO,
        metadata: &TableMetadata,
        checked_before_ms: i64,
    ) -> Result<Self, IcebergError> {
        let mut referenced: HashSet<String> = metadata
            .metadata_log()
            .iter()
            .map(|m| location_key(&m.metadata_file))
            .collect();
        let mut needed: HashSet<String> = HashSet::new();
        // Older snapshots first: a manifest's entries are read once, as
        // needed when an older snapshot names it.
        let mut snapshots: Vec<_> = metadata.snapshots().collect();
        snapshots.sort_by_key(|s| s.timestamp_ms());
        let mut seen_manifests = HashSet::new();
        for snapshot in snapshots {
            let checked = snapshot.timestamp_ms() < checked_before_ms;
            referenced.insert(location_key(snapshot.manifest_list()));
            if checked {
                needed.insert(location_key(snapshot.manifest_list()));
            }
            for manifest in manifests_of(file_io, metadata, snapshot).await? {
                referenced.insert(location_key(&manifest.manifest_path));
                if checked {
                    needed.insert(location_key(&manifest.manifest_path));
                }
                if !seen_manifests.insert(manifest.manifest_path.clone()) {
                    continue;
                }
                for entry in entries_of(file_io, &manifest).await? {
                    referenced.insert(location_key(entry.path()));
                    if checked && entry.is_live() {
                        needed.insert(location_key(entry.path()));
                    }
                }
            }
        }
        for stats in metadata.statistics_iter() {
            referenced.insert(location_key(&stats.statistics_path));
        }
        for stats in metadata.partition_statistics_iter() {
            referenced.insert(location_key(&stats.statistics_path));
        }
        Ok(Self { referenced, needed })
    }

    /// The safety check: every needed file under the table's `location` is
    /// in the listing, else the two spell locations differently and
    /// nothing may be deleted.
    fn check_listing(
        &self,
        step: &str,
        location: &str,
        listed: &[ListedFile],
    ) -> Result<(), IcebergError> {
        let listed_keys: HashSet<String> =
            listed.iter().map(|f| location_key(&f.location)).collect();
        let root = format!("{}/", location_key(location));
        match self
            .needed
            .iter()
            .find(|k| k.starts_with(&root) && !listed_keys.contains(*k))
        {
            Some(missing) => Err(IcebergError::new(
                IcebergErrorKind::Data,
                step,
                format!(
                    "{missing} is referenced by a snapshot but not in the listing of the \
                     table's location: not deleting anything"
                ),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use iceberg::spec::FormatVersion;

    use super::*;
    use crate::write::schema::{Column, ColumnType};

    /// A listing of every file `References` needs except `left_out`.
    fn listing(refs: &References, left_out: &str) -> Vec<ListedFile> {
        refs.referenced
            .iter()
            .filter(|k| !k.ends_with(left_out))
            .map(|k| ListedFile {
                location: k.clone(),
                last_modified_ms: 0,
                size: 1,
            })
            .collect()
    }

    /// An embedded catalog in a folder of its own with an empty table
    /// `ns.t` of one long column `v`.
    async fn embedded_table() -> (std::path::PathBuf, Destination, TableHandle) {
        let dir =
            std::env::temp_dir().join(format!("tb-orphans-{}", uuid::Uuid::new_v4().simple()));
        let destination = Destination::open_embedded(&dir.join("catalog"), "default").unwrap();
        let columns = [Column::optional("v", 1, ColumnType::Long)];
        let ns = vec!["ns".to_string()];
        let table = destination
            .ensure_table(&ns, "t", &columns, FormatVersion::V2)
            .await
            .unwrap();
        (dir, destination, table)
    }

    #[tokio::test]
    async fn a_snapshot_committed_during_the_listing_does_not_fail_the_safety_check() {
        let (dir, destination, mut table) = embedded_table().await;
        let batch = |table: &TableHandle, v: i64| {
            RecordBatch::try_new(
                table.arrow_schema().clone(),
                vec![Arc::new(Int64Array::from(vec![v])) as ArrayRef],
            )
            .unwrap()
        };
        let first = batch(&table, 1);
        let files = destination.write_data_files(&table, [first]).await.unwrap();
        destination
            .commit_append(&mut table, files, BTreeMap::new())
            .await
            .unwrap();
        let listing_began = table.metadata().current_snapshot().unwrap().timestamp_ms() + 1;
        // A commit lands while the listing runs: its file is not listed.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let second = batch(&table, 2);
        let files = destination
            .write_data_files(&table, [second])
            .await
            .unwrap();
        let late = files[0].file_path().to_string();
        destination
            .commit_append(&mut table, files, BTreeMap::new())
            .await
            .unwrap();
        let late_key = location_key(&late);
        let file_io = destination.file_io();
        let refs = References::of(file_io, table.metadata(), listing_began)
            .await
            .unwrap();
        assert!(
            refs.referenced.contains(&late_key),
            "the late file is still referenced"
        );
        let location = table
            .metadata()
            .location()
            .trim_end_matches('/')
            .to_string();
        let listed = listing(&refs, &late_key);
        refs.check_listing("step", &location, &listed).unwrap();
        // Checked against every snapshot, the same listing is refused.
        let all = References::of(file_io, table.metadata(), i64::MAX)
            .await
            .unwrap();
        let refused = all.check_listing("step", &location, &listed).unwrap_err();
        assert!(
            refused.to_string().contains("not in the listing"),
            "{refused}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn metadata_files_that_left_the_metadata_log_are_orphans_and_the_log_is_kept() {
        let (dir, destination, mut table) = embedded_table().await;
        for v in 0..3 {
            let batch = RecordBatch::try_new(
                table.arrow_schema().clone(),
                vec![Arc::new(Int64Array::from(vec![v])) as ArrayRef],
            )
            .unwrap();
            let files = destination.write_data_files(&table, [batch]).await.unwrap();
            destination
                .commit_append(&mut table, files, BTreeMap::new())
                .await
                .unwrap();
        }
        let location = table.metadata_location().unwrap().to_string();
        let current = std::path::Path::new(location.trim_start_matches("file://"));
        let folder = current.parent().unwrap().to_path_buf();
        let json = |folder: &std::path::Path| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(folder)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".metadata.json"))
                .collect();
            names.sort();
            names
        };
        let kept = json(&folder);
        assert_eq!(kept.len(), 4, "created + 3 commits: {kept:?}");
        // An old version that left the log (as the 101st back does).
        std::fs::copy(current, folder.join("00000-left-the-log.metadata.json")).unwrap();
        std::fs::write(folder.join("version-hint.text"), "3").unwrap();
        let outcome = remove_orphans(&destination, &table, Duration::ZERO, false)
            .await
            .unwrap();
        assert_eq!(outcome.orphans_removed, 1, "{outcome:?}");
        assert!(outcome.sample[0].ends_with("00000-left-the-log.metadata.json"));
        assert_eq!(json(&folder), kept, "the current file and the log are kept");
        assert!(folder.join("version-hint.text").exists());
        let reloaded = destination.reload_patiently(&table).await.unwrap();
        assert_eq!(reloaded.metadata().snapshots().count(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_waiting_file_sets_data_files_are_kept_and_go_once_the_set_is_dropped() {
        let (dir, destination, mut table) = embedded_table().await;
        let batch = RecordBatch::try_new(
            table.arrow_schema().clone(),
            vec![Arc::new(Int64Array::from(vec![7])) as ArrayRef],
        )
        .unwrap();
        let files = destination.write_data_files(&table, [batch]).await.unwrap();
        let path = files[0].file_path().to_string();
        // An empty commit gives the table a snapshot; the file is in none.
        destination
            .commit_append(&mut table, Vec::new(), BTreeMap::new())
            .await
            .unwrap();
        let set = crate::file_sets::one_message_set(files);
        let location = destination.publish_file_set(&table, &set).await.unwrap();
        let kept = remove_orphans(&destination, &table, Duration::ZERO, false)
            .await
            .unwrap();
        assert!(!kept.sample.contains(&path), "{kept:?}");
        assert!(destination.file_io().exists(&path).await.unwrap());
        assert_eq!(destination.drop_file_sets(&[location]).await, 0);
        let removed = remove_orphans(&destination, &table, Duration::ZERO, false)
            .await
            .unwrap();
        assert!(
            removed
                .sample
                .iter()
                .any(|s| location_key(s) == location_key(&path)),
            "{removed:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

//! The newest rows of an append-only table: the rows of the data files its
//! latest snapshots added, newest snapshot first (serve's table page shows
//! a dead-letter table's latest messages with them). Not a scan: delete
//! files are not applied, so it is for tables nothing deletes from.

use arrow_array::RecordBatch;
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, ManifestStatus};

use crate::error::IcebergError;
use crate::key_index::scan::{snapshot_files, stream_columns};
use crate::table::TableHandle;

/// Snapshots looked at, at most (each one's added files are read).
const MAX_SNAPSHOTS: usize = 50;

/// The rows of the data files added by the table's newest snapshots of
/// `main`, newest snapshot first, until at least `limit` rows (or
/// [`MAX_SNAPSHOTS`] snapshots) were read. Rows of one file keep its order.
pub(crate) async fn newest_rows(
    file_io: &FileIO,
    handle: &TableHandle,
    limit: usize,
) -> Result<Vec<RecordBatch>, IcebergError> {
    let metadata = handle.metadata();
    let mut batches = Vec::new();
    let mut rows = 0;
    let mut snapshot = metadata.current_snapshot().cloned();
    let mut seen = 0;
    while let Some(current) = snapshot {
        if rows >= limit || seen >= MAX_SNAPSHOTS {
            break;
        }
        seen += 1;
        let id = current.snapshot_id();
        let files = snapshot_files(file_io, metadata, &current, Some(id)).await?;
        let added = files
            .iter()
            .filter(|f| f.content == DataContentType::Data && f.status == ManifestStatus::Added);
        for file in added {
            stream_columns(
                file_io,
                &file.path,
                |_, _| true,
                |batch| {
                    rows += batch.num_rows();
                    batches.push(batch.clone());
                    Ok(())
                },
            )
            .await?;
        }
        snapshot = current
            .parent_snapshot_id()
            .and_then(|p| metadata.snapshot_by_id(p).cloned());
    }
    Ok(batches)
}

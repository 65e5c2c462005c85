//! The delete side of upsert on [`Destination`]: write position delete
//! files, deletion vectors or equality delete files (one of them, by the
//! table's delete format: [`Destination::write_deletes`]), list a table's
//! current deletion vectors, and commit data and delete files together as
//! one row-delta snapshot.

pub mod deletion_vectors;
pub mod equality;
pub mod position;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::DataFile;
use roaring::RoaringTreemap;
use topicberg_core::config::DeleteFormat;

use crate::commit::row_delta::{list_deletion_vectors, PendingRowDelta, RowDelta};
use crate::destination::{CommittedSnapshot, Destination, DEFAULT_COMMIT_ATTEMPTS};
use crate::error::{IcebergError, IcebergErrorKind};
use crate::key_index::scan::KEY_COLUMN;
use crate::table::TableHandle;
use deletion_vectors::{read_deletion_vector, write_deletion_vectors};
use equality::write_equality_delete_file;
use position::write_position_delete_file;

/// The delete files that retire rows, for [`RowDelta::delete_files`], and
/// the deletion vectors they replace, for [`RowDelta::replaced_dvs`].
#[derive(Debug, Default)]
pub struct WrittenDeletes {
    /// The new delete files.
    pub delete_files: Vec<DataFile>,
    /// The current deletion vectors that new ones replace (v3).
    pub replaced_dvs: Vec<DataFile>,
}

impl Destination {
    /// Writes the delete files that retire `rows` (data file path -> row
    /// positions) in `format`:
    /// - [`DeleteFormat::Position`]: one position delete file (format v2);
    /// - [`DeleteFormat::Dv`]: one deletion vector per data file (format
    ///   v3), merged with the data file's current vector, which it replaces;
    /// - [`DeleteFormat::Equality`]: one equality delete file on
    ///   `_olake_id` naming `keys` (the keys of those rows, in any order).
    ///   It deletes only rows of earlier commits, so this commit's new rows
    ///   with the same keys stay.
    ///
    /// Nothing is written when `rows` is empty.
    pub async fn write_deletes(
        &self,
        handle: &TableHandle,
        format: DeleteFormat,
        rows: BTreeMap<String, RoaringTreemap>,
        mut keys: Vec<[u8; 16]>,
    ) -> Result<WrittenDeletes, IcebergError> {
        if rows.is_empty() {
            return Ok(WrittenDeletes::default());
        }
        check_format_version(handle, format)?;
        match format {
            DeleteFormat::Position => {
                let grouped: Vec<(String, Vec<u64>)> = rows
                    .into_iter()
                    .map(|(f, p)| (f, p.into_iter().collect()))
                    .collect();
                let file = self.write_position_deletes(handle, &grouped).await?;
                Ok(WrittenDeletes {
                    delete_files: file.into_iter().collect(),
                    replaced_dvs: Vec::new(),
                })
            }
            DeleteFormat::Dv => {
                let current = self.current_deletion_vectors(handle).await?;
                let mut vectors = Vec::new();
                let mut replaced = Vec::new();
                for (data_file, mut bitmap) in rows {
                    if let Some(old) = current.get(&data_file) {
                        bitmap |= self.read_deletion_vector(old).await?;
                        replaced.push(old.clone());
                    }
                    vectors.push((data_file, bitmap));
                }
                let files = self.write_deletion_vectors(handle, &vectors).await?;
                Ok(WrittenDeletes {
                    delete_files: files,
                    replaced_dvs: replaced,
                })
            }
            DeleteFormat::Equality => {
                keys.sort_unstable();
                let file = self.write_equality_deletes(handle, &keys).await?;
                Ok(WrittenDeletes {
                    delete_files: file.into_iter().collect(),
                    replaced_dvs: Vec::new(),
                })
            }
        }
    }

    /// Writes one position delete file (format v2 tables) for `deletes`
    /// (data file path -> row positions) and returns its entry for
    /// [`RowDelta::delete_files`]; `None` when there is nothing to delete.
    pub async fn write_position_deletes(
        &self,
        handle: &TableHandle,
        deletes: &[(String, Vec<u64>)],
    ) -> Result<Option<DataFile>, IcebergError> {
        write_position_delete_file(
            self.file_io(),
            handle.metadata(),
            deletes,
            self.options.zstd_level,
        )
        .await
    }

    /// Writes one equality delete file on the table's `_olake_id` column
    /// (format v2 and v3 tables) deleting the rows of `keys` (rendered as
    /// the 32-lowercase-hex `_olake_id`), and returns its entry for
    /// [`RowDelta::delete_files`]; `None` when `keys` is empty. It deletes
    /// only rows of data files committed before it, not rows added in the
    /// same commit. Fails if the table has no `_olake_id` column.
    pub async fn write_equality_deletes(
        &self,
        handle: &TableHandle,
        keys: &[[u8; 16]],
    ) -> Result<Option<DataFile>, IcebergError> {
        let field = handle.schema().field_by_name(KEY_COLUMN).ok_or_else(|| {
            IcebergError::new(
                IcebergErrorKind::Data,
                format!("writing equality deletes for table {}", handle.name()),
                format!("the table has no {KEY_COLUMN} column"),
            )
        })?;
        write_equality_delete_file(
            self.file_io(),
            handle.metadata(),
            field.id,
            !field.required,
            keys,
            self.options.zstd_level,
        )
        .await
    }

    /// Writes one Puffin file with a deletion vector per data file (format
    /// v3 tables) and returns one entry per vector for
    /// [`RowDelta::delete_files`]. A vector for a data file that already
    /// has one must already hold the old positions too (see
    /// [`Self::current_deletion_vectors`], [`read_deletion_vector`]).
    pub async fn write_deletion_vectors(
        &self,
        handle: &TableHandle,
        vectors: &[(String, RoaringTreemap)],
    ) -> Result<Vec<DataFile>, IcebergError> {
        write_deletion_vectors(self.file_io(), handle.metadata(), vectors).await
    }

    /// The current deletion vectors of the handle's `main` snapshot: data
    /// file path -> its DV entry (pass an entry in
    /// [`RowDelta::replaced_dvs`] when replacing it).
    pub async fn current_deletion_vectors(
        &self,
        handle: &TableHandle,
    ) -> Result<HashMap<String, DataFile>, IcebergError> {
        list_deletion_vectors(self.file_io(), handle.metadata()).await
    }

    /// The positions a DV entry deletes.
    pub async fn read_deletion_vector(
        &self,
        dv: &DataFile,
    ) -> Result<RoaringTreemap, IcebergError> {
        read_deletion_vector(self.file_io(), dv).await
    }

    /// Commits a row delta with up to [`DEFAULT_COMMIT_ATTEMPTS`] attempts;
    /// see [`Self::commit_row_delta_with_retry`].
    pub async fn commit_row_delta(
        &self,
        handle: &mut TableHandle,
        delta: RowDelta,
    ) -> Result<CommittedSnapshot, IcebergError> {
        self.commit_row_delta_with_retry(handle, delta, DEFAULT_COMMIT_ATTEMPTS)
            .await
    }

    /// Commits data files and delete files as one snapshot on `main`
    /// (`append`, `overwrite` or `delete`), making at most `max_attempts`
    /// commit requests, with the retry rules of
    /// [`Self::commit_append_with_retry`]:
    /// - HTTP 409: reload and rebuild on the new parent (the new manifests
    ///   are reused). If a DV in [`RowDelta::replaced_dvs`] is no longer
    ///   current there, or another writer added a DV for a data file this
    ///   delta adds one for, fail with `Catalog(Conflict)` for which
    ///   [`crate::is_stale_deletes`] is true: merge again and retry.
    /// - 5xx / lost connection: reload and look for our commit id.
    pub async fn commit_row_delta_with_retry(
        &self,
        handle: &mut TableHandle,
        delta: RowDelta,
        max_attempts: u32,
    ) -> Result<CommittedSnapshot, IcebergError> {
        let pending = PendingRowDelta::new(handle.metadata(), delta);
        self.commit_with_retry(handle, pending, max_attempts).await
    }
}

/// Deletion vectors exist from format v3 on, and v3 takes no new position
/// delete files: a table whose version does not fit the delete format
/// (made elsewhere, or a catalog that created another version than asked:
/// Nessie 0.99 makes v2 tables only) is refused before anything is written.
fn check_format_version(handle: &TableHandle, format: DeleteFormat) -> Result<(), IcebergError> {
    let version = handle.metadata().format_version();
    let fits = match format {
        DeleteFormat::Dv => version >= iceberg::spec::FormatVersion::V3,
        DeleteFormat::Position => version < iceberg::spec::FormatVersion::V3,
        DeleteFormat::Equality => true,
    };
    if fits {
        return Ok(());
    }
    let (wanted, advice) = match format {
        DeleteFormat::Dv => (
            "deletion vectors need format v3",
            "choose target_engines that read position deletes, or set delete_format = \"position\"",
        ),
        _ => (
            "format v3 takes deletion vectors, not position delete files",
            "set delete_format = \"dv\" (or target_engines that read deletion vectors)",
        ),
    };
    Err(IcebergError::new(
        IcebergErrorKind::Config,
        format!(
            "writing the deletes of table {}.{}",
            handle.namespace().join("."),
            handle.name()
        ),
        format!(
            "the table is format {version:?} (the catalog created or keeps it so); {wanted}: {advice}"
        ),
    ))
}

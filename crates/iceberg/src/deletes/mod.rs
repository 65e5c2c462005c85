//! The delete side of upsert on [`Destination`]: write position delete
//! files, deletion vectors or equality delete files (one of them, by the
//! table's delete format: [`Destination::write_deletes`]), list a table's
//! current deletion vectors, and commit data and delete files together as
//! one row-delta snapshot.

mod delete_file_error;
pub mod deletion_vectors;
pub mod equality;
pub mod partitions;
pub mod position;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::DataFile;
use roaring::RoaringTreemap;
use topicberg_core::config::DeleteFormat;

pub use delete_file_error::{DeleteFileError, DeleteFileErrorKind};

use crate::commit::row_delta::{list_deletion_vectors, PendingRowDelta, RowDelta};
use crate::destination::{CommittedSnapshot, Destination, DEFAULT_COMMIT_ATTEMPTS};
use crate::error::{IcebergError, IcebergErrorKind};
use crate::key_index::scan::KEY_COLUMN;
use crate::table::TableHandle;
use deletion_vectors::{read_deletion_vector, write_deletion_vectors};
use equality::write_equality_delete_file;
use partitions::{data_file_partitions, group_by_partition, partition_of, FilePartition};
use position::write_position_delete_file;

/// File-scoped position delete files written at once (uploads).
const PARALLEL_DELETE_FILES: usize = 8;

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
    /// positions) in `format`, each in the partition of the data files it
    /// names (see [`partitions`]):
    /// - [`DeleteFormat::Position`]: one position delete file per data file
    ///   (format v2; "file-scoped", as Iceberg's `write.delete.granularity =
    ///   file`): a reader loads only the deletes of the files it scans, and
    ///   Polars reads no other kind;
    /// - [`DeleteFormat::Dv`]: one deletion vector per data file (format
    ///   v3), merged with the data file's current vector, which it replaces;
    /// - [`DeleteFormat::Equality`]: one equality delete file on
    ///   `_olake_id` per partition, naming the keys of the retired rows
    ///   (`keys`: data file path -> the keys of its retired rows). It
    ///   deletes only rows of earlier commits, so this commit's new rows
    ///   with the same keys stay.
    ///
    /// Nothing is written when `rows` is empty.
    pub async fn write_deletes(
        &self,
        handle: &TableHandle,
        format: DeleteFormat,
        rows: BTreeMap<String, RoaringTreemap>,
        keys: BTreeMap<String, Vec<[u8; 16]>>,
    ) -> Result<WrittenDeletes, IcebergError> {
        if rows.is_empty() {
            return Ok(WrittenDeletes::default());
        }
        check_format_version(handle, format)?;
        let paths: Vec<&str> = rows.keys().map(String::as_str).collect();
        let partitions = data_file_partitions(self.file_io(), handle.metadata(), &paths).await?;
        match format {
            DeleteFormat::Position => {
                let delete_files = self
                    .write_file_scoped_position_deletes(handle, rows, &partitions)
                    .await?;
                Ok(WrittenDeletes {
                    delete_files,
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
                let files = write_deletion_vectors(
                    self.file_io(),
                    handle.metadata(),
                    &vectors,
                    &partitions,
                )
                .await?;
                Ok(WrittenDeletes {
                    delete_files: files,
                    replaced_dvs: replaced,
                })
            }
            DeleteFormat::Equality => {
                let grouped = group_by_partition(keys, &partitions)?;
                let mut delete_files = Vec::with_capacity(grouped.len());
                for (partition, files) in grouped {
                    let keys: Vec<[u8; 16]> = files.into_iter().flat_map(|(_, k)| k).collect();
                    delete_files.extend(
                        self.write_equality_deletes_in(handle, &keys, &partition)
                            .await?,
                    );
                }
                Ok(WrittenDeletes {
                    delete_files,
                    replaced_dvs: Vec::new(),
                })
            }
        }
    }

    /// One position delete file per data file of `rows`, in that data
    /// file's partition, written a few at a time.
    async fn write_file_scoped_position_deletes(
        &self,
        handle: &TableHandle,
        rows: BTreeMap<String, RoaringTreemap>,
        partitions: &HashMap<String, FilePartition>,
    ) -> Result<Vec<DataFile>, IcebergError> {
        use futures::{StreamExt, TryStreamExt};
        let mut scoped = Vec::with_capacity(rows.len());
        for (path, positions) in rows {
            let partition = partition_of(partitions, &path, "writing position deletes")?.clone();
            scoped.push((
                vec![(path, positions.into_iter().collect::<Vec<u64>>())],
                partition,
            ));
        }
        let written: Vec<Option<DataFile>> = futures::stream::iter(scoped)
            .map(|(deletes, partition)| async move {
                write_position_delete_file(
                    self.file_io(),
                    handle.metadata(),
                    &deletes,
                    &partition,
                    self.options.zstd_level,
                )
                .await
            })
            .buffered(PARALLEL_DELETE_FILES)
            .try_collect()
            .await?;
        Ok(written.into_iter().flatten().collect())
    }

    /// Writes one position delete file (format v2 tables) for `deletes`
    /// (data file path -> row positions, the data files all in one
    /// partition) and returns its entry for [`RowDelta::delete_files`];
    /// `None` when there is nothing to delete.
    pub async fn write_position_deletes(
        &self,
        handle: &TableHandle,
        deletes: &[(String, Vec<u64>)],
    ) -> Result<Option<DataFile>, IcebergError> {
        let partition = self
            .one_partition(handle, deletes.iter().map(|(p, _)| p))
            .await?;
        write_position_delete_file(
            self.file_io(),
            handle.metadata(),
            deletes,
            &partition,
            self.options.zstd_level,
        )
        .await
    }

    /// Writes one equality delete file on the table's `_olake_id` column
    /// (format v2 and v3 tables) deleting the rows of `keys` (rendered as
    /// the 32-lowercase-hex `_olake_id`), in the table's default spec
    /// (which must be unpartitioned: [`Self::write_deletes`] writes them
    /// per partition), and returns its entry for
    /// [`RowDelta::delete_files`]; `None` when `keys` is empty. It deletes
    /// only rows of data files committed before it, not rows added in the
    /// same commit. Fails if the table has no `_olake_id` column.
    pub async fn write_equality_deletes(
        &self,
        handle: &TableHandle,
        keys: &[[u8; 16]],
    ) -> Result<Option<DataFile>, IcebergError> {
        let partition = self.one_partition(handle, std::iter::empty()).await?;
        self.write_equality_deletes_in(handle, keys, &partition)
            .await
    }

    async fn write_equality_deletes_in(
        &self,
        handle: &TableHandle,
        keys: &[[u8; 16]],
        partition: &FilePartition,
    ) -> Result<Option<DataFile>, IcebergError> {
        let field = handle.schema().field_by_name(KEY_COLUMN).ok_or_else(|| {
            IcebergError::new(
                IcebergErrorKind::Data,
                format!("writing equality deletes for table {}", handle.name()),
                format!("the table has no {KEY_COLUMN} column"),
            )
        })?;
        let mut keys = keys.to_vec();
        keys.sort_unstable();
        write_equality_delete_file(
            self.file_io(),
            handle.metadata(),
            field.id,
            !field.required,
            &keys,
            partition,
            self.options.zstd_level,
        )
        .await
    }

    /// The one partition the data files `paths` are in (the default spec's
    /// empty partition when there is none and it is unpartitioned).
    async fn one_partition(
        &self,
        handle: &TableHandle,
        paths: impl Iterator<Item = &String>,
    ) -> Result<FilePartition, IcebergError> {
        let paths: Vec<&str> = paths.map(String::as_str).collect();
        let found = data_file_partitions(self.file_io(), handle.metadata(), &paths).await?;
        let distinct: Vec<&FilePartition> = found
            .values()
            .collect::<std::collections::HashSet<_>>()
            .into_iter()
            .collect();
        let default = handle.metadata().default_partition_spec();
        match distinct.as_slice() {
            [] if default.is_unpartitioned() => Ok(FilePartition::unpartitioned(default.spec_id())),
            [one] => Ok((*one).clone()),
            _ => Err(IcebergError::new(
                IcebergErrorKind::Data,
                format!("writing a delete file for table {}", handle.name()),
                "the data files are in several partitions (or none is named on a partitioned \
                 table); use write_deletes, which writes one delete file per partition",
            )),
        }
    }

    /// Writes one Puffin file with a deletion vector per data file (format
    /// v3 tables), each entry in its data file's partition, and returns one
    /// entry per vector for [`RowDelta::delete_files`]. A vector for a data
    /// file that already has one must already hold the old positions too
    /// (see [`Self::current_deletion_vectors`], [`read_deletion_vector`]).
    pub async fn write_deletion_vectors(
        &self,
        handle: &TableHandle,
        vectors: &[(String, RoaringTreemap)],
    ) -> Result<Vec<DataFile>, IcebergError> {
        let paths: Vec<&str> = vectors.iter().map(|(p, _)| p.as_str()).collect();
        let partitions = data_file_partitions(self.file_io(), handle.metadata(), &paths).await?;
        write_deletion_vectors(self.file_io(), handle.metadata(), vectors, &partitions).await
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
        format!("writing the deletes of table {}", handle.qualified_name()),
        format!(
            "the table is format {version:?} (the catalog created or keeps it so); {wanted}: {advice}"
        ),
    ))
}

//! The library API the sync command uses: connect to a catalog and a store,
//! make sure a table exists, write data files, commit an append.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, FormatVersion, TableMetadata};
use iceberg::TableUpdate;
use roaring::RoaringTreemap;
use topicberg_core::config::{PartitionField, SortKey};

use crate::catalog::rest::{LoadedTable, Namespace, RestCatalog, RestCatalogConfig};
use crate::catalog::Catalog;
use crate::commit::append::PendingAppend;
use crate::commit::gate::CommitGates;
use crate::commit::offsets::{OffsetsAdvance, OFFSETS_PROPERTY};
use crate::commit::snapshot_commit::PendingCommit;
use crate::commit::summary::COMMIT_ID_PROPERTY;
use crate::error::{IcebergError, IcebergErrorKind};
use crate::maintain::rebase::RowMoves;
use crate::table::{SnapshotInfo, TableHandle};
use crate::write::credentials::{Refresh, RefreshError, Vended};
use crate::write::data_files::{DataFileWriter, WriteOptions};
use crate::write::partition::partition_spec;
use crate::write::schema::{iceberg_schema, schema_differences, Column};
use crate::write::signing::{RemoteSigning, SignerToken};
use crate::write::sort::sort_order;
use crate::write::storage::{CredentialPath, ObjectStorage, StorageConfig};
use crate::CatalogErrorKind;

/// Attempts [`Destination::commit_append`] makes before giving up on
/// concurrent writers.
pub const DEFAULT_COMMIT_ATTEMPTS: u32 = 5;

/// The smallest row group [`Destination::data_file_writer_of`] gives a
/// writer (bytes).
const MIN_SHARED_ROW_GROUP: usize = 8 * 1024 * 1024;

/// A catalog plus the storage its tables live in.
#[derive(Debug)]
pub struct Destination {
    catalog: Catalog,
    storage: ObjectStorage,
    file_io: FileIO,
    pub(crate) options: WriteOptions,
    /// One commit per table at a time in this process.
    gates: CommitGates,
    /// Where this process's latest compactions moved rows, for its key
    /// indexes: (table uuid, replace snapshot id, moves), newest last.
    moves: std::sync::Mutex<std::collections::VecDeque<(String, i64, Arc<RowMoves>)>>,
}

/// The compactions whose row moves a destination keeps.
const KEPT_MOVES: usize = 8;

/// The snapshot an append committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedSnapshot {
    /// The new snapshot's id.
    pub snapshot_id: i64,
    /// Its parent (the `main` snapshot it was built on).
    pub parent_snapshot_id: Option<i64>,
    /// Its sequence number.
    pub sequence_number: i64,
    /// Its summary properties besides `operation` (the caller's extras,
    /// the metrics, `topicberg.commit-id`).
    pub summary: BTreeMap<String, String>,
    /// The commit attempts it took (1 unless a conflict or an unconfirmed
    /// commit was retried).
    pub attempts: u32,
}

impl CommittedSnapshot {
    /// The snapshot a commit landed as, in `attempts` attempts.
    fn of(snapshot: SnapshotInfo, attempts: u32) -> Self {
        Self {
            snapshot_id: snapshot.snapshot_id,
            parent_snapshot_id: snapshot.parent_snapshot_id,
            sequence_number: snapshot.sequence_number,
            summary: snapshot.summary,
            attempts,
        }
    }
}

/// What a table [`Destination::ensure_partitioned_table`] creates gets
/// besides its columns.
#[derive(Debug, Clone, Copy, Default)]
pub struct NewTable<'a> {
    /// Its partition fields (empty: unpartitioned).
    pub partition_by: &'a [PartitionField],
    /// Its sort order (empty: unsorted).
    pub sort_by: &'a [SortKey],
    /// Its table properties, besides `format-version`.
    pub properties: &'a [(&'a str, &'a str)],
}

impl Destination {
    /// Connects to the catalog (token exchange, `GET /v1/config`); storage
    /// connects on first use.
    pub async fn connect(
        catalog: &RestCatalogConfig,
        storage: StorageConfig,
    ) -> Result<Self, IcebergError> {
        let catalog = Catalog::Rest(Arc::new(RestCatalog::connect(catalog).await?));
        Ok(Self::with_catalog(catalog, ObjectStorage::new(storage)))
    }

    /// Opens the embedded catalog in `folder` (a SQLite file `catalog.db`
    /// and the tables' files beside it), creating it when missing.
    pub fn open_embedded(
        folder: &std::path::Path,
        catalog_name: &str,
    ) -> Result<Self, IcebergError> {
        let catalog = Catalog::Sql(crate::catalog::sql::SqlCatalog::open(folder, catalog_name)?);
        Ok(Self::with_catalog(
            catalog,
            ObjectStorage::new(StorageConfig::local()),
        ))
    }

    /// Opens the embedded catalog in `folder` as [`Destination::open_embedded`]
    /// does, its tables (metadata and data) under the remote `warehouse`
    /// URI (`s3://`, `gs://`, `abfss://`), reached through `storage`.
    pub fn open_embedded_with_warehouse(
        folder: &std::path::Path,
        catalog_name: &str,
        warehouse: &str,
        storage: StorageConfig,
    ) -> Result<Self, IcebergError> {
        let storage = ObjectStorage::new(storage);
        let catalog = crate::catalog::sql::SqlCatalog::open_with_warehouse(
            folder,
            catalog_name,
            Some((warehouse, storage.file_io())),
        )?;
        Ok(Self::with_catalog(Catalog::Sql(catalog), storage))
    }

    fn with_catalog(catalog: Catalog, storage: ObjectStorage) -> Self {
        let file_io = storage.file_io();
        Self {
            catalog,
            storage,
            file_io,
            options: WriteOptions::default(),
            gates: CommitGates::default(),
            moves: std::sync::Mutex::default(),
        }
    }

    /// Replaces the data file options (target size, row group size, zstd).
    pub fn with_write_options(mut self, options: WriteOptions) -> Self {
        self.options = options;
        self
    }

    /// The catalog client.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The storage, e.g. to read back a file.
    pub fn storage(&self) -> &ObjectStorage {
        &self.storage
    }

    /// Records where the compaction committed as `snapshot` of table
    /// `uuid` moved rows (the latest [`KEPT_MOVES`] are kept).
    pub(crate) fn record_moves(&self, uuid: &str, snapshot: i64, moves: RowMoves) {
        let mut kept = self.moves.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() == KEPT_MOVES {
            kept.pop_front();
        }
        kept.push_back((uuid.to_string(), snapshot, Arc::new(moves)));
    }

    /// Where the compaction committed as `snapshot` of table `uuid` moved
    /// rows, if this process made it.
    pub(crate) fn moves_of(&self, uuid: &str, snapshot: i64) -> Option<Arc<RowMoves>> {
        let kept = self.moves.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter()
            .find(|(u, s, _)| u == uuid && *s == snapshot)
            .map(|(_, _, moves)| Arc::clone(moves))
    }

    /// `positions` (rows to delete, computed on snapshot `base` of
    /// `table`) at their places in the table as it is now: carried through
    /// the compactions this process committed since (their recorded row
    /// moves). `None` when a snapshot since is anything else than such a
    /// compaction or a manifest rewrite (another writer's commit may have
    /// changed which rows are live: compute again), or a row did not
    /// survive the compaction as live.
    pub fn carry_positions(
        &self,
        table: &TableMetadata,
        base: Option<i64>,
        positions: &BTreeMap<String, RoaringTreemap>,
    ) -> Option<BTreeMap<String, RoaringTreemap>> {
        let uuid = table.uuid().to_string();
        let mut carried = positions.clone();
        for snapshot in crate::key_index::snapshots_since(table, base)? {
            let summary = snapshot.summary();
            if summary.operation != iceberg::spec::Operation::Replace {
                return None;
            }
            if crate::commit::row_delta::moves_rows(summary) {
                carried = self
                    .moves_of(&uuid, snapshot.snapshot_id())?
                    .carry(&carried)?;
            }
        }
        Some(carried)
    }

    /// The `iceberg` `FileIO` over [`Self::storage`].
    pub fn file_io(&self) -> &FileIO {
        &self.file_io
    }

    /// The rows of the data files the table's newest snapshots added,
    /// newest first, at least `limit` of them when the table has that many
    /// (delete files not applied: for append-only tables such as a
    /// dead-letter table).
    pub async fn newest_rows(
        &self,
        handle: &TableHandle,
        limit: usize,
    ) -> Result<Vec<arrow_array::RecordBatch>, IcebergError> {
        crate::newest_rows::newest_rows(&self.file_io, handle, limit).await
    }

    /// The values of the top-level columns `field_ids` at `positions`
    /// (ascending, distinct) of the table's data file `path`: per field
    /// id, one value per position, or `None` when the file has no such
    /// column (its values are null).
    pub async fn rows_at(
        &self,
        path: &str,
        positions: &[u64],
        field_ids: &[i32],
    ) -> Result<Vec<Option<arrow_array::ArrayRef>>, IcebergError> {
        crate::rows_at::rows_at(&self.file_io, path, positions, field_ids).await
    }

    /// Loads a table.
    pub async fn load_table(
        &self,
        namespace: &Namespace,
        table: &str,
    ) -> Result<TableHandle, IcebergError> {
        let loaded = self.catalog.load_table(namespace, table).await?;
        self.use_vended_credentials(namespace, table, &loaded)?;
        TableHandle::new(namespace.clone(), table.to_string(), loaded)
    }

    /// A REST table whose catalog vended storage credentials is read and
    /// written with them from now on, renewed through the catalog.
    fn use_vended_credentials(
        &self,
        namespace: &Namespace,
        table: &str,
        loaded: &LoadedTable,
    ) -> Result<(), IcebergError> {
        let Catalog::Rest(rest) = &self.catalog else {
            return Ok(());
        };
        let location = loaded.metadata.location();
        if self.storage.has_job_keys_for(location) {
            return Ok(());
        }
        let qualified = format!("{}.{table}", namespace.join("."));
        let vended = Vended::for_location(location, &loaded.storage_credentials, &loaded.config);
        let used = if let Some(vended) = vended {
            let refresh = vended_refresh(rest.clone(), namespace.clone(), table.to_string());
            self.storage
                .use_vended(&qualified, location, &vended, refresh)
        } else if let Some(signing) = RemoteSigning::from_config(&loaded.config, rest.uri()) {
            self.storage
                .use_remote_signing(location, &signing, signer_token(rest.clone()))
        } else {
            return Ok(());
        };
        used.map_err(|e| {
            IcebergError::new(
                IcebergErrorKind::Config,
                format!("using the storage credentials vended for table {qualified}"),
                e.message().to_string(),
            )
            .with_source(e)
        })
    }

    /// Which credentials reach the table's files (for `check` and reports).
    pub fn credential_path(&self, handle: &TableHandle) -> CredentialPath {
        self.storage.credential_path(handle.metadata().location())
    }

    /// Reloads the handle's table from the catalog.
    pub async fn refresh(&self, handle: &mut TableHandle) -> Result<(), IcebergError> {
        *handle = self.load_table(&handle.namespace, &handle.name).await?;
        Ok(())
    }

    /// Loads the table, or creates it (and its namespace) with `columns` and
    /// `format_version` (2 or 3). An existing table whose columns differ
    /// (by position, name, type, nullability) is an error of kind
    /// [`IcebergErrorKind::Data`].
    pub async fn ensure_table(
        &self,
        namespace: &Namespace,
        table: &str,
        columns: &[Column],
        format_version: FormatVersion,
    ) -> Result<TableHandle, IcebergError> {
        let layout = NewTable::default();
        self.ensure_partitioned_table(namespace, table, columns, format_version, &layout)
            .await
    }

    /// [`Self::ensure_table`], creating a missing table partitioned by
    /// `partition_by` (field ids from 1000; a column the table lacks, or
    /// whose type the transform does not take, is a
    /// [`IcebergErrorKind::Config`] error naming it). An existing table
    /// keeps its own spec (another engine may have changed it; files are
    /// written under its current default spec). `sort_by` is the new
    /// table's sort order (id 1; rows are written in the table's order,
    /// see [`crate::write::sort`]); an existing table keeps its own, and
    /// its properties (`layout.properties` are a new table's).
    pub async fn ensure_partitioned_table(
        &self,
        namespace: &Namespace,
        table: &str,
        columns: &[Column],
        format_version: FormatVersion,
        layout: &NewTable<'_>,
    ) -> Result<TableHandle, IcebergError> {
        let qualified = format!("{}.{table}", namespace.join("."));
        if format_version == FormatVersion::V1 {
            return Err(IcebergError::new(
                IcebergErrorKind::Config,
                format!("creating table {qualified}"),
                "format version 1 is not supported (use 2 or 3)",
            ));
        }
        let loaded = match self.catalog.load_table(namespace, table).await {
            Ok(loaded) => loaded,
            Err(e) if e.kind == CatalogErrorKind::NotFound => {
                self.catalog.ensure_namespace(namespace).await?;
                let schema = iceberg_schema(columns)?;
                let bound = Arc::new(schema.clone());
                let spec = partition_spec(&qualified, &bound, columns, layout.partition_by)?;
                let order = sort_order(&qualified, &bound, columns, layout.sort_by)?;
                let mut properties: std::collections::HashMap<String, String> = layout
                    .properties
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                properties.insert(
                    "format-version".to_string(),
                    (format_version as u8).to_string(),
                );
                match self
                    .catalog
                    .create_partitioned_table(namespace, table, &schema, &spec, &order, &properties)
                    .await
                {
                    Ok(created) => created,
                    // Someone else created it meanwhile.
                    Err(e) if e.kind == CatalogErrorKind::Conflict => {
                        self.catalog.load_table(namespace, table).await?
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        };
        self.use_vended_credentials(namespace, table, &loaded)?;
        let differences = schema_differences(columns, loaded.metadata.current_schema());
        if !differences.is_empty() {
            return Err(IcebergError::new(
                IcebergErrorKind::Data,
                format!("checking the columns of table {qualified}"),
                format!(
                    "the table exists with other columns: {}",
                    differences.join("; ")
                ),
            ));
        }
        TableHandle::new(namespace.clone(), table.to_string(), loaded)
    }

    /// Drops a table (`purge`: ask the catalog to delete its files too).
    pub async fn drop_table(
        &self,
        namespace: &Namespace,
        table: &str,
        purge: bool,
    ) -> Result<(), IcebergError> {
        Ok(self.catalog.drop_table(namespace, table, purge).await?)
    }

    /// A streaming writer of data files for the table: push batches, then
    /// `finish()` for the files to commit.
    pub async fn data_file_writer(
        &self,
        handle: &TableHandle,
    ) -> Result<DataFileWriter, IcebergError> {
        DataFileWriter::new(self.file_io.clone(), handle.metadata(), &self.options).await
    }

    /// One of `writers` data file writers running at once: each flushes
    /// row groups of `1 / writers` of the configured size (at least 8 MiB),
    /// so together they hold about what one writer holds.
    pub async fn data_file_writer_of(
        &self,
        handle: &TableHandle,
        writers: usize,
    ) -> Result<DataFileWriter, IcebergError> {
        let mut options = self.options.clone();
        let shared = options.row_group_size / writers.max(1);
        options.row_group_size = shared.max(MIN_SHARED_ROW_GROUP).min(options.row_group_size);
        DataFileWriter::new(self.file_io.clone(), handle.metadata(), &options).await
    }

    /// Writes the batches into data files (not yet part of the table).
    pub async fn write_data_files(
        &self,
        handle: &TableHandle,
        batches: impl IntoIterator<Item = RecordBatch>,
    ) -> Result<Vec<DataFile>, IcebergError> {
        let mut writer = self.data_file_writer(handle).await?;
        for batch in batches {
            writer.write(&batch).await?;
        }
        writer.finish().await
    }

    /// Commits the data files as one `append` snapshot on `main`, with
    /// `summary_extra` (e.g. `topicberg.offsets`) in its summary, retrying
    /// up to [`DEFAULT_COMMIT_ATTEMPTS`] times; see
    /// [`Self::commit_append_with_retry`].
    pub async fn commit_append(
        &self,
        handle: &mut TableHandle,
        data_files: Vec<DataFile>,
        summary_extra: BTreeMap<String, String>,
    ) -> Result<CommittedSnapshot, IcebergError> {
        self.commit_append_with_retry(handle, data_files, summary_extra, DEFAULT_COMMIT_ATTEMPTS)
            .await
    }

    /// Commits an append, making at most `max_attempts` commit requests:
    /// - HTTP 409 (another writer moved `main`): reload the table and rebuild
    ///   the snapshot on the new parent (same data files and manifest).
    /// - HTTP 500/502/503/504 or a lost connection: the commit may have
    ///   landed. Reload and look for our `topicberg.commit-id` on `main`:
    ///   found means done; absent means try again; a reload that fails too
    ///   is [`IcebergErrorKind::CommitStateUnknown`].
    ///
    /// On success the handle holds the table as committed. When attempts run
    /// out on conflicts the error is `Catalog(Conflict)`, retryable.
    pub async fn commit_append_with_retry(
        &self,
        handle: &mut TableHandle,
        data_files: Vec<DataFile>,
        summary_extra: BTreeMap<String, String>,
        max_attempts: u32,
    ) -> Result<CommittedSnapshot, IcebergError> {
        let pending = PendingAppend::new(handle.metadata(), data_files, summary_extra);
        self.commit_with_retry(handle, pending, max_attempts).await
    }

    /// Commits the data files (possibly none) as one `append` snapshot that
    /// moves `offsets`: it lands only on a table that still records the
    /// offsets the plan read (else [`IcebergErrorKind::Superseded`]), and
    /// records the new ones in the table's properties and the snapshot's
    /// summary (see [`crate::commit::offsets`]). Retries as
    /// [`Self::commit_append_with_retry`].
    pub async fn commit_append_moving(
        &self,
        handle: &mut TableHandle,
        data_files: Vec<DataFile>,
        offsets: OffsetsAdvance,
    ) -> Result<CommittedSnapshot, IcebergError> {
        let mut pending = PendingAppend::new(handle.metadata(), data_files, BTreeMap::new());
        pending.offsets = Some(offsets);
        self.commit_with_retry(handle, pending, DEFAULT_COMMIT_ATTEMPTS)
            .await
    }

    /// The commit loop of [`Self::commit_append_with_retry`] and
    /// [`Self::commit_row_delta_with_retry`], with the retry rules
    /// documented on the former. What must still hold on a reloaded table
    /// is checked by `pending.build`. From its `gated_from` attempt on, the
    /// commit holds the table's gate (`commit/gate.rs`); an attempt that
    /// waited for it builds on the table reloaded inside it.
    pub(crate) async fn commit_with_retry(
        &self,
        handle: &mut TableHandle,
        mut pending: impl PendingCommit,
        max_attempts: u32,
    ) -> Result<CommittedSnapshot, IcebergError> {
        let mut attempt = 0;
        let mut gate = None;
        loop {
            attempt += 1;
            if gate.is_none() && attempt >= pending.gated_from() {
                gate = Some(self.enter_gate(handle, attempt).await?);
            }
            // The offsets first: a table another sync moved is not built on.
            let offsets = match pending.offsets() {
                Some(advance) => Some(advance.on(handle.metadata())?),
                None => None,
            };
            if let Some(update) = &offsets {
                pending
                    .summary_extra_mut()
                    .insert(OFFSETS_PROPERTY.to_string(), update.summary.clone());
            }
            let built = pending
                .build(&self.file_io, handle.metadata(), attempt)
                .await?;
            let (mut updates, mut requirements) = match &handle.pending_schema {
                Some(schema) => schema.updates_and_requirements(),
                None => (Vec::new(), Vec::new()),
            };
            updates.extend(built.updates.iter().cloned());
            if let Some(update) = offsets {
                updates.push(TableUpdate::SetProperties {
                    updates: HashMap::from([update.property]),
                });
            }
            requirements.extend(built.requirements.iter().cloned());
            let sent = self
                .catalog
                .commit_table(&handle.namespace, &handle.name, &requirements, &updates)
                .await;
            let err = match sent {
                Ok(committed) => {
                    *handle =
                        TableHandle::new(handle.namespace.clone(), handle.name.clone(), committed)?;
                    return Ok(CommittedSnapshot::of(
                        SnapshotInfo::of(&built.snapshot),
                        attempt,
                    ));
                }
                Err(e) => e,
            };
            let unknown = matches!(
                err.kind,
                CatalogErrorKind::Server | CatalogErrorKind::Unreachable
            );
            if !unknown && err.kind != CatalogErrorKind::Conflict {
                return Err(err.into());
            }
            // Conflict or unknown outcome: look at the table as it is now.
            let reloaded = match self.reload_patiently(handle).await {
                Ok(reloaded) => reloaded,
                Err(reload) if unknown => {
                    return Err(IcebergError::new(
                        IcebergErrorKind::CommitStateUnknown,
                        err.step,
                        format!(
                            "{}; reloading the table to check whether it landed failed: {reload}",
                            err.detail
                        ),
                    ))
                }
                Err(reload) => return Err(reload),
            };
            let schema = handle.pending_schema.take();
            *handle = reloaded;
            if let Some(found) = handle.find_commit(pending.commit_id()) {
                return Ok(CommittedSnapshot::of(found, attempt));
            }
            // The caller's next attempt (an upsert computed again on the
            // new table) writes with the columns this one added, too.
            // A schema another writer changed meanwhile is this commit's
            // end (kind SchemaMoved: its files may use another column's
            // field ids), whatever attempts are left.
            *handle = handle.clone().reapply_pending_schema(schema)?;
            if attempt >= max_attempts {
                return Err(IcebergError::from(err)
                    .with_detail_suffix(&format!(" (gave up after {attempt} commit attempts)")));
            }
        }
    }

    /// Holds the table's commit gate (`commit/gate.rs`); past the first
    /// attempt, reloads the table inside it (commits passed meanwhile).
    async fn enter_gate(
        &self,
        handle: &mut TableHandle,
        attempt: u32,
    ) -> Result<tokio::sync::OwnedMutexGuard<()>, IcebergError> {
        let table = handle.qualified_name();
        let gate = self.gates.enter(&table).await;
        if attempt > 1 {
            let schema = handle.pending_schema.take();
            *handle = self.reload_patiently(handle).await?;
            *handle = handle.clone().reapply_pending_schema(schema)?;
        }
        Ok(gate)
    }

    /// Reloads the table, retrying transient failures a few times.
    pub(crate) async fn reload_patiently(
        &self,
        handle: &TableHandle,
    ) -> Result<TableHandle, IcebergError> {
        let mut delay = Duration::from_millis(500);
        let mut tries = 0;
        loop {
            tries += 1;
            match self.load_table(&handle.namespace, &handle.name).await {
                Ok(reloaded) => return Ok(reloaded),
                Err(e) if e.retryable() && tries < 4 => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Cleaning up after a sync whose commit failed.
impl Destination {
    /// Deletes, best effort, data and delete files that were written for a
    /// commit that did not land, so no snapshot references them. Returns
    /// `(location, error)` for each file that could not be deleted (for a
    /// report listing what is left to clean up); a file already gone
    /// counts as deleted. Several entries naming one file (deletion vectors
    /// in one Puffin file) delete it once.
    ///
    /// Only for files whose commit failed for certain: never after
    /// [`IcebergErrorKind::CommitStateUnknown`], where the commit may have
    /// landed and the files may be live (reconcile first).
    pub async fn delete_uncommitted(&self, files: &[DataFile]) -> Vec<(String, String)> {
        use futures::StreamExt;
        let mut locations: Vec<&str> = files.iter().map(|f| f.file_path()).collect();
        locations.sort_unstable();
        locations.dedup();
        let results: Vec<(String, Result<(), iceberg::Error>)> =
            futures::stream::iter(locations)
                .map(|location| async move {
                    (location.to_string(), self.file_io.delete(location).await)
                })
                .buffer_unordered(8)
                .collect()
                .await;
        let mut left = Vec::new();
        for (location, result) in results {
            if let Err(e) = result {
                let e = crate::error::from_iceberg(
                    format!("deleting {location}"),
                    e,
                    IcebergErrorKind::Storage,
                );
                tracing::warn!(location = %location, error = %e, "could not delete an uncommitted file");
                left.push((location, e.detail));
            }
        }
        left.sort();
        left
    }

    /// Deletes, best effort, the metadata files a commit wrote that no
    /// snapshot references, found by the commit id in their names under
    /// `<table>/metadata/`:
    /// - manifest lists `snap-<snapshot id>-<attempt>-<commit id>.avro`
    ///   that no snapshot of the table points to (the attempts that did
    ///   not land, also after a commit that landed on a later attempt);
    /// - manifests `<commit id>-m<n>.avro` (and the merged
    ///   `<commit id>-mg<attempt>-<n>.avro`), only when no snapshot of the
    ///   table carries the commit id (the commit did not land).
    ///
    /// Reloads the table first; a failed reload deletes nothing and is the
    /// error. Returns `(location, error)` for files that could not be
    /// deleted. Like [`Self::delete_uncommitted`], never after
    /// [`IcebergErrorKind::CommitStateUnknown`]: the commit may still land.
    pub async fn delete_commit_metadata(
        &self,
        handle: &TableHandle,
        commit_id: &str,
    ) -> Result<Vec<(String, String)>, IcebergError> {
        let fresh = self.reload_patiently(handle).await?;
        let metadata = fresh.metadata();
        let landed = metadata.snapshots().any(|s| {
            s.summary()
                .additional_properties
                .get(COMMIT_ID_PROPERTY)
                .map(String::as_str)
                == Some(commit_id)
        });
        let referenced: std::collections::HashSet<&str> =
            metadata.snapshots().map(|s| s.manifest_list()).collect();
        let folder = format!("{}/metadata", metadata.location().trim_end_matches('/'));
        let listed = self.storage.list(&folder).await.map_err(|e| {
            crate::error::from_iceberg(format!("listing {folder}"), e, IcebergErrorKind::Storage)
        })?;
        let ours = |location: &&String| {
            let name = location.rsplit('/').next().unwrap_or_default();
            let list = name.starts_with("snap-") && name.ends_with(&format!("-{commit_id}.avro"));
            let manifest = name.starts_with(&format!("{commit_id}-m")) && name.ends_with(".avro");
            (list && !referenced.contains(location.as_str())) || (manifest && !landed)
        };
        let doomed: Vec<&String> = listed.iter().filter(ours).collect();
        let mut left = Vec::new();
        for location in doomed {
            if let Err(e) = self.file_io.delete(location).await {
                let e = crate::error::from_iceberg(
                    format!("deleting {location}"),
                    e,
                    IcebergErrorKind::Storage,
                );
                tracing::warn!(location = %location, error = %e, "could not delete a commit's metadata file");
                left.push((location.clone(), e.detail));
            }
        }
        Ok(left)
    }
}

/// The catalog's bearer token, for its S3 signer.
fn signer_token(rest: Arc<RestCatalog>) -> SignerToken {
    Arc::new(move || {
        let rest = rest.clone();
        Box::pin(async move { rest.bearer(false).await })
    })
}

/// Asks the catalog for the table's fresh credentials: its credentials
/// endpoint, or (a catalog without one) a reload of the table.
fn vended_refresh(rest: Arc<RestCatalog>, namespace: Namespace, table: String) -> Refresh {
    Arc::new(move || {
        let (rest, namespace, table) = (rest.clone(), namespace.clone(), table.clone());
        Box::pin(async move {
            let (location, entries, config) = match rest.load_credentials(&namespace, &table).await
            {
                Ok(entries) if !entries.is_empty() => (None, entries, Default::default()),
                _ => {
                    let loaded = rest.load_table(&namespace, &table).await?;
                    let location = loaded.metadata.location().to_string();
                    (Some(location), loaded.storage_credentials, loaded.config)
                }
            };
            let location = location.unwrap_or_else(|| {
                entries
                    .iter()
                    .map(|e| e.prefix.clone())
                    .max_by_key(String::len)
                    .unwrap_or_default()
            });
            Vended::for_location(&location, &entries, &config).ok_or(RefreshError::NoCredentials)
        })
    })
}

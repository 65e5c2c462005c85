//! topicberg's Iceberg side: catalogs, data and delete files, snapshots and
//! their commits, and the upsert key index.
//!
//! # Layout
//!
//! | folder | what it owns |
//! |---|---|
//! | [`catalog`] | the catalogs a table lives in, behind one [`Catalog`]: [`catalog::rest`] (our own REST client: OAuth2 tokens, `GET /v1/config`, namespaces, table load / create / drop / commit, bounded retries) and [`catalog::sql`] (the embedded SQLite catalog in PyIceberg's `SqlCatalog` layout, pointer compare-and-swap) |
//! | [`write`](mod@write) | rows into files: the column list as Iceberg and Arrow schemas ([`write::schema`]), batches fitted to the table ([`write::conform`]), rolling zstd Parquet data files ([`write::data_files`]), S3 or local storage behind `FileIO` ([`write::storage`]) |
//! | [`commit`] | snapshots and their commits: append ([`commit::append`]), row delta ([`commit::row_delta`]), what both share (`snapshot_commit`: manifests, manifest list, snapshot, requirements), the one summary builder both use (`summary`), the table's record of Kafka offsets ([`commit::offsets`]), the schema change that rides along ([`commit::schema_evolution`]) |
//! | [`deletes`] | the delete side of upsert: position delete files (v2, [`deletes::position`]), deletion vectors (v3 Puffin, [`deletes::deletion_vectors`]), equality delete files on `_olake_id` ([`deletes::equality`]), and the choice between them ([`Destination::write_deletes`]) |
//! | [`key_index`] | the upsert key index: `_olake_id` -> (data file, row position) in sorted runs per table (log-structured) |
//! | [`maintain`] | table maintenance: compaction into a `replace` snapshot, snapshot expiry, orphan-file removal |
//! | [`file_sets`] | data files one worker of a job wrote and the table's committer (another worker) commits: published as `metadata/topicberg-pending-*.avro` in the table's location |
//! | [`background`] | the lower priority of the threads that run beside a follower's rounds |
//!
//! At the root: [`Destination`] (the write-path API: connect, ensure a
//! table, write data files, commit with conflict retries and a check for
//! commits whose answer was lost; `destination.rs`), [`TableHandle`] (a loaded
//! table and the schema change it carries to its next commit; `table.rs`),
//! [`table_metadata`] (what a table's metadata says, read only: `main`'s
//! snapshots, a snapshot's manifests, a file's partition spec; below
//! `commit`, `deletes` and `maintain`) and the error kinds (`error.rs`).
//!
//! ```no_run
//! # async fn demo(catalog: topicberg_iceberg::rest::RestCatalogConfig,
//! #               storage: topicberg_iceberg::StorageConfig,
//! #               batch: arrow_array::RecordBatch) -> Result<(), topicberg_iceberg::IcebergError> {
//! use std::collections::BTreeMap;
//! use topicberg_iceberg::{Column, ColumnType, FormatVersion, Destination};
//!
//! let destination = Destination::connect(&catalog, storage).await?;
//! let columns = [Column::optional("id", 1, ColumnType::Long)];
//! let ns = vec!["kafka".to_string()];
//! let mut table = destination.ensure_table(&ns, "orders", &columns, FormatVersion::V2).await?;
//! // build `batch` in table.arrow_schema()
//! let files = destination.write_data_files(&table, [batch]).await?;
//! let offsets = BTreeMap::from([("topicberg.offsets".to_string(), r#"{"orders":{"0":42}}"#.to_string())]);
//! let committed = destination.commit_append(&mut table, files, offsets).await?;
//! println!("snapshot {}", committed.snapshot_id);
//! # Ok(()) }
//! ```

pub mod background;
pub mod catalog;
pub mod commit;
pub mod deletes;
mod destination;
mod error;
pub mod file_sets;
pub mod key_index;
pub mod maintain;
mod newest_rows;
mod rows_at;
mod table;
pub mod table_metadata;
#[cfg(test)]
mod tests;
pub mod write;

pub use catalog::{rest, sql, Catalog};
pub use commit::offsets::{OffsetsAdvance, OffsetsError, TableOffsets, OFFSETS_PROPERTY};
pub use commit::row_delta::{is_stale_deletes, RowDelta};
pub use commit::schema_evolution::SchemaChange;
pub use commit::summary::COMMIT_ID_PROPERTY;
pub use commit::{offsets, row_delta, schema_evolution};
pub use deletes::deletion_vectors::{
    decode_deletion_vector, encode_deletion_vector, read_deletion_vector,
};
pub use deletes::WrittenDeletes;
pub use destination::{CommittedSnapshot, Destination, NewTable, DEFAULT_COMMIT_ATTEMPTS};
pub use error::{CatalogError, CatalogErrorKind, IcebergError, IcebergErrorKind};
pub use file_sets::{FileSet, PendingSet, SetTombstone};
pub use iceberg::spec::{DataFile, FormatVersion};
pub use roaring::RoaringTreemap;
pub use table::{SnapshotInfo, TableHandle};
pub use write::data_files::{DataFileWriter, WriteOptions};
pub use write::schema::{Column, ColumnType};
pub use write::storage::{
    AzureConfig, CredentialPath, GcsConfig, ObjectStorage, S3Config, S3Credentials, S3RetryPolicy,
    StorageConfig, S3_RETRY_ENV,
};
pub use write::{conform, credentials, schema, storage};

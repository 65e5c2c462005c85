//! topicberg's Iceberg side.
//!
//! - [`rest`]: our own Iceberg REST catalog client (the `iceberg` crate's
//!   client cannot commit delete files or refresh OAuth2 tokens; see
//!   REFERENCE.md): authentication, `GET /v1/config`, namespaces, and table
//!   load / create / drop / commit.
//! - [`sql`]: the embedded catalog (`catalog = "sql"`): a SQLite file in
//!   PyIceberg's `SqlCatalog` / Iceberg JDBC layout plus a local warehouse
//!   folder, with the same table operations as [`rest::RestCatalog`].
//! - [`storage`]: S3 or local files behind the `iceberg` crate's `FileIO`.
//! - [`schema`]: the column list -> Iceberg schema and Arrow schema.
//! - [`IcebergTarget`]: the write path for append mode: ensure a table,
//!   write Parquet data files ([`DataFileWriter`]), commit an append snapshot
//!   (manifest, manifest list, summary with the caller's properties), with
//!   conflict retries and a check for commits whose answer was lost.
//! - The delete side of upsert: [`position_deletes`] (v2 Parquet position
//!   delete files), [`deletion_vectors`] (v3 Puffin `deletion-vector-v1`
//!   blobs), [`equality_deletes`] (Parquet equality delete files on
//!   `_olake_id`, v2 and v3), and [`row_delta`]: data and delete files in one snapshot
//!   ([`IcebergTarget::commit_row_delta`]), replacing a data file's DV.
//!
//! ```no_run
//! # async fn demo(catalog: topicberg_iceberg::rest::RestCatalogConfig,
//! #               storage: topicberg_iceberg::StorageConfig,
//! #               batch: arrow_array::RecordBatch) -> Result<(), topicberg_iceberg::IcebergError> {
//! use std::collections::BTreeMap;
//! use topicberg_iceberg::{Column, ColumnType, FormatVersion, IcebergTarget};
//!
//! let target = IcebergTarget::connect(&catalog, storage).await?;
//! let columns = [Column::optional("id", 1, ColumnType::Long)];
//! let ns = vec!["kafka".to_string()];
//! let mut table = target.ensure_table(&ns, "orders", &columns, FormatVersion::V2).await?;
//! // build `batch` in table.arrow_schema()
//! let files = target.write_data_files(&table, [batch]).await?;
//! let offsets = BTreeMap::from([("topicberg.offsets".to_string(), r#"{"orders":{"0":42}}"#.to_string())]);
//! let committed = target.commit_append(&mut table, files, offsets).await?;
//! println!("snapshot {}", committed.snapshot_id);
//! # Ok(()) }
//! ```

mod append;
mod catalog;
pub mod conform;
mod data_files;
#[cfg(test)]
mod delete_local_tests;
mod delete_summary;
mod delete_target;
pub mod deletion_vectors;
pub mod equality_deletes;
mod error;
pub mod key_index;
#[cfg(test)]
mod local_tests;
pub mod offsets;
pub mod position_deletes;
pub mod rest;
pub mod row_delta;
pub mod schema;
pub mod schema_evolution;
mod snapshot_commit;
pub mod sql;
pub mod storage;
mod target;

pub use append::COMMIT_ID_PROPERTY;
pub use catalog::Catalog;
pub use data_files::{DataFileWriter, WriteOptions};
pub use deletion_vectors::{decode_deletion_vector, encode_deletion_vector, read_deletion_vector};
pub use error::{CatalogError, CatalogErrorKind, IcebergError, IcebergErrorKind};
pub use iceberg::spec::{DataFile, FormatVersion};
pub use offsets::{OffsetsAdvance, TableOffsets, OFFSETS_PROPERTY};
pub use roaring::RoaringTreemap;
pub use row_delta::{is_stale_deletes, RowDelta};
pub use schema::{Column, ColumnType};
pub use schema_evolution::SchemaChange;
pub use storage::{ObjectStorage, S3Config, S3RetryPolicy, StorageConfig, S3_RETRY_ENV};
pub use target::{
    CommittedSnapshot, IcebergTarget, SnapshotInfo, TableHandle, DEFAULT_COMMIT_ATTEMPTS,
};

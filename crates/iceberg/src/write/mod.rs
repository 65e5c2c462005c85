//! Writing rows: the column list as Iceberg and Arrow schemas, batches made
//! to fit the table's schema, Parquet data files, and the storage (S3 or a
//! local folder) every file goes to, and partitioning (spec of a new table,
//! batches split per partition), and sorting (sort order of a new table,
//! rows of each file in the table's order).

pub mod clouds;
pub mod conform;
pub mod credentials;
pub mod data_files;
mod dictionary;
mod file_io;
pub mod partition;
mod retry;
pub mod schema;
pub mod signing;
pub mod sort;
pub mod storage;
pub(crate) mod storage_fault;

//! Arrow record batches -> Parquet data files in the table's data folder.
//!
//! Built on the `iceberg` crate's writers: `ParquetWriter` (Parquet with the
//! Iceberg field ids, and the per-column sizes, value/null/NaN counts and
//! lower/upper bounds a manifest entry needs), wrapped in its rolling writer
//! (a new file once the current one passes the target size). Files are named
//! `<table location>/data/<uuid>-<n>.parquet` (or under the table's
//! `write.data.path`). Row groups are flushed to storage as they fill, and
//! storage uploads large files in parts, so a file is never held whole in
//! memory.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef as ArrowSchemaRef;
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, DataFileFormat, PartitionKey, Struct, TableMetadata};
use iceberg::writer::base_writer::data_file_writer::{
    DataFileWriter as InnerWriter, DataFileWriterBuilder,
};
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use topicberg_core::columns::{KAFKA_KEY, KAFKA_OFFSET, KAFKA_TIMESTAMP, OLAKE_ID};

use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};
use crate::write::conform::conform;
use crate::write::schema::arrow_schema;

/// How data files are written.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Start a new file once the current one passes this size (bytes).
    pub target_file_size: usize,
    /// Flush a Parquet row group once its encoded size passes this (bytes);
    /// bounds the memory one open file holds.
    pub row_group_size: usize,
    /// The zstd compression level (1..=22).
    pub zstd_level: i32,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            target_file_size: 128 * 1024 * 1024,
            row_group_size: 32 * 1024 * 1024,
            zstd_level: 3,
        }
    }
}

type Inner = InnerWriter<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

/// Writes record batches into data files of one table; [`finish`] returns
/// the files to commit.
///
/// [`finish`]: DataFileWriter::finish
pub struct DataFileWriter {
    inner: Inner,
    arrow_schema: ArrowSchemaRef,
    table: String,
    rows: u64,
}

impl std::fmt::Debug for DataFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataFileWriter")
            .field("table", &self.table)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl DataFileWriter {
    pub(crate) async fn new(
        file_io: FileIO,
        metadata: &TableMetadata,
        options: &WriteOptions,
    ) -> Result<Self, IcebergError> {
        let table = metadata.location().to_string();
        let step = format!("opening a data file writer for {table}");
        let spec = crate::commit::snapshot_commit::write_spec(metadata)?;
        if spec.spec_id() != metadata.default_partition_spec_id() {
            tracing::warn!(
                table = %table, default_spec = metadata.default_partition_spec_id(), written_spec = spec.spec_id(),
                "another engine made the table's partition spec partitioned; new files are written \
                 under its unpartitioned spec (valid Iceberg, readable by every engine; queries \
                 prune only the partitioned files)"
            );
        }
        let schema = metadata.current_schema().clone();
        let arrow_schema = arrow_schema(&schema)?;
        let level = ZstdLevel::try_new(options.zstd_level).map_err(|e| {
            IcebergError::new(IcebergErrorKind::Config, &step, format!("zstd level: {e}"))
        })?;
        let mut props = WriterProperties::builder();
        // Metadata columns distinct in (nearly) every row: a dictionary
        // only costs time before the writer gives up on it.
        for column in [OLAKE_ID, KAFKA_OFFSET, KAFKA_TIMESTAMP, KAFKA_KEY] {
            props = props.set_column_dictionary_enabled(ColumnPath::from(column), false);
        }
        let props = props
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_bytes(Some(options.row_group_size.max(1)))
            .build();
        let locations = DefaultLocationGenerator::new(metadata)
            .map_err(|e| from_iceberg(&step, &e, IcebergErrorKind::Config))?;
        let names = DefaultFileNameGenerator::new(
            uuid::Uuid::new_v4().to_string(),
            None,
            DataFileFormat::Parquet,
        );
        let rolling = RollingFileWriterBuilder::new(
            ParquetWriterBuilder::new(props, schema.clone()),
            options.target_file_size,
            file_io,
            locations,
            names,
        );
        let key = PartitionKey::new(spec.as_ref().clone(), schema, Struct::empty());
        let inner = DataFileWriterBuilder::new(rolling)
            .build(Some(key))
            .await
            .map_err(|e| from_iceberg(&step, &e, IcebergErrorKind::Config))?;
        Ok(Self {
            inner,
            arrow_schema,
            table,
            rows: 0,
        })
    }

    /// The Arrow schema batches must have (the table's, with field ids).
    pub fn arrow_schema(&self) -> &ArrowSchemaRef {
        &self.arrow_schema
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes one batch, made to fit the table's columns by
    /// [`conform`]: by position, or by field id
    /// for a batch decoded before the table gained columns (missing ones
    /// are null, `int` columns widen to `long`).
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<(), IcebergError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = conform(batch, &self.arrow_schema).map_err(|detail| {
            IcebergError::new(
                IcebergErrorKind::Data,
                format!("writing a batch to {}", self.table),
                detail,
            )
        })?;
        let rows = batch.num_rows() as u64;
        self.inner.write(batch).await.map_err(|e| {
            from_iceberg(
                format!("writing data files of {}", self.table),
                &e,
                IcebergErrorKind::Data,
            )
        })?;
        self.rows += rows;
        Ok(())
    }

    /// Closes the last file and returns every file written (none if no row
    /// was written).
    pub async fn finish(mut self) -> Result<Vec<DataFile>, IcebergError> {
        self.inner.close().await.map_err(|e| {
            from_iceberg(
                format!("closing data files of {}", self.table),
                &e,
                IcebergErrorKind::Data,
            )
        })
    }
}

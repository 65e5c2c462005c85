//! Arrow record batches -> Parquet data files in the table's data folder.
//!
//! Built on the `iceberg` crate's writers: `ParquetWriter` (Parquet with the
//! Iceberg field ids, and the per-column sizes, value/null/NaN counts and
//! lower/upper bounds a manifest entry needs), wrapped in its rolling writer
//! (a new file once the current one passes the target size). Files are named
//! `<table location>/data/[<partition path>/]<uuid>-<n>.parquet` (or under
//! the table's `write.data.path`). Row groups are flushed to storage as they
//! fill, and storage uploads large files in parts, so a file is never held
//! whole in memory.
//!
//! Partitioned tables: files are written under the table's current default
//! spec, one rolling writer per partition value the rows fall in (see
//! [`crate::write::partition`] for the split). At most
//! [`WriteOptions::max_open_files`] writers are open at once: a new
//! partition beyond that closes the least recently written one (a partition
//! that comes back later gets a new file). Each partition writer flushes row
//! groups of at most `row_group_size / PARTITION_ROW_GROUP_DIVISOR` (min
//! 1 MiB), so the row groups held in memory stay under
//! `max_open_files * row_group_size / 8` (32 * 4 MiB = 128 MiB by default).

use std::collections::HashMap;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef as ArrowSchemaRef;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, DataFileFormat, PartitionKey, PartitionSpecRef, SchemaRef, Struct, TableMetadata,
};
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
use crate::write::partition::{write_spec, PartitionSplitter};
use crate::write::schema::arrow_schema;

/// A partition writer's row groups are the unpartitioned ones divided by
/// this (at least [`MIN_PARTITION_ROW_GROUP`]): many may be open at once.
pub const PARTITION_ROW_GROUP_DIVISOR: usize = 8;
/// The smallest row group a partition writer flushes (bytes).
pub const MIN_PARTITION_ROW_GROUP: usize = 1024 * 1024;

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
    /// Partitioned tables: the most files open at once per writer (one per
    /// partition being written); the least recently written is closed to
    /// open another.
    pub max_open_files: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            target_file_size: 128 * 1024 * 1024,
            row_group_size: 32 * 1024 * 1024,
            zstd_level: 3,
            max_open_files: 32,
        }
    }
}

type Inner = InnerWriter<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;
type Builder =
    DataFileWriterBuilder<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

/// One partition's rolling writer and when it last took rows.
struct OpenFile {
    inner: Inner,
    last_write: u64,
}

/// Writes record batches into data files of one table; [`finish`] returns
/// the files to commit.
///
/// [`finish`]: DataFileWriter::finish
pub struct DataFileWriter {
    builder: Builder,
    spec: PartitionSpecRef,
    schema: SchemaRef,
    splitter: Option<PartitionSplitter>,
    /// Every row goes to this partition (a compaction's rewrite of one
    /// partition), not split by value.
    fixed: Option<Struct>,
    open: HashMap<Struct, OpenFile>,
    max_open_files: usize,
    closed: Vec<DataFile>,
    writes: u64,
    arrow_schema: ArrowSchemaRef,
    table: String,
    rows: u64,
}

impl std::fmt::Debug for DataFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataFileWriter")
            .field("table", &self.table)
            .field("spec", &self.spec.spec_id())
            .field("open", &self.open.len())
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
        Self::open(file_io, metadata, options, write_spec(metadata), None).await
    }

    /// A writer whose every row belongs to `partition` of `spec` (one of
    /// the table's specs, not necessarily the default): a compaction
    /// rewriting one partition's files. The files carry that spec id and
    /// those partition values as they are, never recomputed.
    pub(crate) async fn for_partition(
        file_io: FileIO,
        metadata: &TableMetadata,
        options: &WriteOptions,
        spec: PartitionSpecRef,
        partition: Struct,
    ) -> Result<Self, IcebergError> {
        Self::open(file_io, metadata, options, spec, Some(partition)).await
    }

    async fn open(
        file_io: FileIO,
        metadata: &TableMetadata,
        options: &WriteOptions,
        spec: PartitionSpecRef,
        fixed: Option<Struct>,
    ) -> Result<Self, IcebergError> {
        let table = metadata.location().to_string();
        let step = format!("opening a data file writer for {table}");
        let schema = metadata.current_schema().clone();
        let splitter = match fixed {
            Some(_) => None,
            None => PartitionSplitter::new(&spec, &schema)
                .map_err(|e| from_iceberg(&step, &e, IcebergErrorKind::Config))?,
        };
        let arrow_schema = arrow_schema(&schema)?;
        let level = ZstdLevel::try_new(options.zstd_level).map_err(|e| {
            IcebergError::new(IcebergErrorKind::Config, &step, format!("zstd level: {e}"))
        })?;
        let row_group = match splitter {
            None => options.row_group_size,
            Some(_) => {
                (options.row_group_size / PARTITION_ROW_GROUP_DIVISOR).max(MIN_PARTITION_ROW_GROUP)
            }
        };
        let mut props = WriterProperties::builder();
        // Metadata columns distinct in (nearly) every row: a dictionary
        // only costs time before the writer gives up on it.
        for column in [OLAKE_ID, KAFKA_OFFSET, KAFKA_TIMESTAMP, KAFKA_KEY] {
            props = props.set_column_dictionary_enabled(ColumnPath::from(column), false);
        }
        let props = props
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_bytes(Some(row_group.max(1)))
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
        Ok(Self {
            builder: DataFileWriterBuilder::new(rolling),
            spec,
            schema,
            splitter,
            fixed,
            open: HashMap::new(),
            max_open_files: options.max_open_files.max(1),
            closed: Vec::new(),
            writes: 0,
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

    /// The id of the partition spec the files are written under.
    pub fn spec_id(&self) -> i32 {
        self.spec.spec_id()
    }

    /// Writes one batch, made to fit the table's columns by
    /// [`conform`]: by position, or by field id
    /// for a batch decoded before the table gained columns (missing ones
    /// are null, `int` columns widen to `long`); on a partitioned table,
    /// each partition's rows into that partition's file.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<(), IcebergError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let data_err = |detail: String| {
            IcebergError::new(
                IcebergErrorKind::Data,
                format!("writing a batch to {}", self.table),
                detail,
            )
        };
        let batch = conform(batch, &self.arrow_schema).map_err(data_err)?;
        let rows = batch.num_rows() as u64;
        let parts = match (&self.fixed, &self.splitter) {
            (Some(partition), _) => vec![(partition.clone(), batch)],
            (None, None) => vec![(Struct::empty(), batch)],
            (None, Some(splitter)) => splitter.split(&batch).map_err(data_err)?,
        };
        for (partition, rows) in parts {
            self.write_partition(partition, rows).await?;
        }
        self.rows += rows;
        Ok(())
    }

    async fn write_partition(
        &mut self,
        partition: Struct,
        batch: RecordBatch,
    ) -> Result<(), IcebergError> {
        self.writes += 1;
        if !self.open.contains_key(&partition) {
            if self.open.len() >= self.max_open_files {
                self.close_least_recent().await?;
            }
            let key = PartitionKey::new(
                self.spec.as_ref().clone(),
                self.schema.clone(),
                partition.clone(),
            );
            let inner = self.builder.build(Some(key)).await.map_err(|e| {
                from_iceberg(
                    format!("opening a data file of {}", self.table),
                    &e,
                    IcebergErrorKind::Config,
                )
            })?;
            self.open.insert(
                partition.clone(),
                OpenFile {
                    inner,
                    last_write: 0,
                },
            );
        }
        let file = self.open.get_mut(&partition).expect("opened above");
        file.last_write = self.writes;
        file.inner.write(batch).await.map_err(|e| {
            from_iceberg(
                format!("writing data files of {}", self.table),
                &e,
                IcebergErrorKind::Data,
            )
        })
    }

    /// Closes the partition file written least recently (the bound on open
    /// files); its files are committed with the others.
    async fn close_least_recent(&mut self) -> Result<(), IcebergError> {
        let Some(oldest) = self
            .open
            .iter()
            .min_by_key(|(_, f)| f.last_write)
            .map(|(p, _)| p.clone())
        else {
            return Ok(());
        };
        if let Some(mut file) = self.open.remove(&oldest) {
            tracing::debug!(table = %self.table, partition = ?oldest, "closing the least recently written partition file");
            let files = file.inner.close().await.map_err(|e| self.close_err(&e))?;
            self.closed.extend(files);
        }
        Ok(())
    }

    fn close_err(&self, e: &iceberg::Error) -> IcebergError {
        from_iceberg(
            format!("closing data files of {}", self.table),
            e,
            IcebergErrorKind::Data,
        )
    }

    /// Closes the open files and returns every file written (none if no
    /// row was written).
    pub async fn finish(mut self) -> Result<Vec<DataFile>, IcebergError> {
        let mut files = std::mem::take(&mut self.closed);
        for (_, mut file) in std::mem::take(&mut self.open) {
            files.extend(file.inner.close().await.map_err(|e| self.close_err(&e))?);
        }
        Ok(files)
    }
}

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
//!
//! Sorted tables (a default sort order topicberg applies, see
//! [`crate::write::sort`]): rows are held per partition until the held
//! rows pass [`WriteOptions::sort_buffer_size`] (Arrow bytes, all
//! partitions together) or the writer finishes; then the partition holding
//! the most is sorted and written as one sorted run, and its file closed,
//! so every file holds its rows in the table's order. Memory: the held rows
//! (at most the sort buffer plus one batch), a copy of their sort key
//! columns and one chunk of sorted rows; one file open at a time. A sync
//! holding more than the buffer writes more, smaller files, each sorted.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef as ArrowSchemaRef;
use arrow_select::concat::concat_batches;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, DataFileBuilder, DataFileFormat, PartitionKey, PartitionSpecRef, SchemaRef, Struct,
    TableMetadata,
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

use crate::error::{from_iceberg, Cause, IcebergError, IcebergErrorKind};
use crate::table_metadata::spec_id;
use crate::write::conform::conform;
use crate::write::dictionary::distinct_columns;
use crate::write::partition::{write_spec, PartitionSplitter};
use crate::write::schema::arrow_schema;
use crate::write::sort::{RowSorter, SORTED_CHUNK_ROWS};

/// A partition writer's row groups are the unpartitioned ones divided by
/// this (at least [`MIN_PARTITION_ROW_GROUP`]): many may be open at once.
pub const PARTITION_ROW_GROUP_DIVISOR: usize = 8;
/// The smallest row group a partition writer flushes (bytes).
pub const MIN_PARTITION_ROW_GROUP: usize = 1024 * 1024;

/// The default [`WriteOptions::sort_buffer_size`]: 256 MiB.
pub const DEFAULT_SORT_BUFFER: usize = 256 * 1024 * 1024;

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
    /// Sorted tables: the Arrow bytes of rows held for sorting before the
    /// largest partition's rows are sorted and written as a file.
    pub sort_buffer_size: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            target_file_size: 128 * 1024 * 1024,
            row_group_size: 32 * 1024 * 1024,
            zstd_level: 3,
            max_open_files: 32,
            sort_buffer_size: DEFAULT_SORT_BUFFER,
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

/// One partition's rows held for sorting.
#[derive(Default)]
struct Held {
    batches: Vec<RecordBatch>,
    bytes: usize,
}

/// Writes record batches into data files of one table; [`finish`] returns
/// the files to commit.
///
/// [`finish`]: DataFileWriter::finish
pub struct DataFileWriter {
    builder: FileBuilder,
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
    /// Sorted tables: the order rows are written in within each file.
    sorter: Option<RowSorter>,
    held: HashMap<Struct, Held>,
    held_bytes: usize,
    sort_buffer: usize,
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
                .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Config))?,
        };
        let arrow_schema = arrow_schema(&schema)?;
        let sorter = RowSorter::for_table(metadata, &arrow_schema);
        let level = ZstdLevel::try_new(options.zstd_level).map_err(|e| {
            IcebergError::new(IcebergErrorKind::Config, &step, format!("zstd level: {e}"))
                .with_source(e)
        })?;
        let row_group = match splitter {
            None => options.row_group_size,
            Some(_) => {
                (options.row_group_size / PARTITION_ROW_GROUP_DIVISOR).max(MIN_PARTITION_ROW_GROUP)
            }
        };
        let locations = DefaultLocationGenerator::new(metadata)
            .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Config))?;
        let unbuilt = Unbuilt {
            file_io,
            locations,
            schema: schema.clone(),
            level,
            row_group: row_group.max(1),
            target_file_size: options.target_file_size,
        };
        Ok(Self {
            builder: FileBuilder::Unbuilt(unbuilt),
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
            sorter,
            held: HashMap::new(),
            held_bytes: 0,
            sort_buffer: options.sort_buffer_size.max(1),
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

    /// Whether rows are sorted before they are written (the table has a
    /// default sort order the writer applies); else they are written in
    /// the order given.
    pub fn sorts(&self) -> bool {
        self.sorter.is_some()
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
        let data_err = |e: Cause| {
            IcebergError::new(
                IcebergErrorKind::Data,
                format!("writing a batch to {}", self.table),
                e.to_string(),
            )
            .with_source(e)
        };
        let batch = conform(batch, &self.arrow_schema).map_err(|e| data_err(e.into()))?;
        let rows = batch.num_rows() as u64;
        let parts = match (&self.fixed, &self.splitter) {
            (Some(partition), _) => vec![(partition.clone(), batch)],
            (None, None) => vec![(Struct::empty(), batch)],
            (None, Some(splitter)) => splitter.split(&batch).map_err(|e| data_err(e.into()))?,
        };
        let split = parts.len() > 1;
        for (partition, rows) in parts {
            if self.sorter.is_some() {
                self.hold(partition, rows, split).await?;
            } else {
                self.write_partition(partition, rows).await?;
            }
        }
        self.rows += rows;
        Ok(())
    }

    /// Sorted tables: holds a partition's rows (a slice of a split batch
    /// copied, so it does not pin the whole batch), and writes the largest
    /// held partition while the held rows pass the sort buffer.
    async fn hold(
        &mut self,
        partition: Struct,
        batch: RecordBatch,
        copy: bool,
    ) -> Result<(), IcebergError> {
        let batch = if copy {
            concat_batches(&batch.schema(), [&batch]).map_err(|e| self.data_err(e))?
        } else {
            batch
        };
        let bytes = batch.get_array_memory_size();
        let held = self.held.entry(partition).or_default();
        held.bytes += bytes;
        held.batches.push(batch);
        self.held_bytes += bytes;
        while self.held_bytes > self.sort_buffer {
            let Some(largest) = self
                .held
                .iter()
                .max_by_key(|(_, h)| h.bytes)
                .map(|(p, _)| p.clone())
            else {
                break;
            };
            self.write_sorted(largest).await?;
        }
        Ok(())
    }

    /// Sorts a partition's held rows, writes them as one run and closes
    /// its file (a file holds one sorted run).
    async fn write_sorted(&mut self, partition: Struct) -> Result<(), IcebergError> {
        let (Some(held), Some(sorter)) = (self.held.remove(&partition), self.sorter.clone()) else {
            return Ok(());
        };
        self.held_bytes -= held.bytes;
        let order = sorter.order(&held.batches).map_err(|e| self.data_err(e))?;
        for chunk in order.chunks(SORTED_CHUNK_ROWS) {
            let rows = RowSorter::gather(&held.batches, chunk).map_err(|e| self.data_err(e))?;
            self.write_partition(partition.clone(), rows).await?;
        }
        if let Some(mut file) = self.open.remove(&partition) {
            let files = file.inner.close().await.map_err(|e| self.close_err(e))?;
            self.closed.extend(files);
        }
        Ok(())
    }

    fn data_err(&self, e: impl std::error::Error + Send + Sync + 'static) -> IcebergError {
        IcebergError::new(
            IcebergErrorKind::Data,
            format!("sorting rows for {}", self.table),
            e.to_string(),
        )
        .with_source(e)
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
            let inner = self
                .builder
                .built(&batch)
                .build(Some(key))
                .await
                .map_err(|e| {
                    from_iceberg(
                        format!("opening a data file of {}", self.table),
                        e,
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
                e,
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
            let files = file.inner.close().await.map_err(|e| self.close_err(e))?;
            self.closed.extend(files);
        }
        Ok(())
    }

    fn close_err(&self, e: iceberg::Error) -> IcebergError {
        from_iceberg(
            format!("closing data files of {}", self.table),
            e,
            IcebergErrorKind::Data,
        )
    }

    /// Closes the open files and returns every file written (none if no
    /// row was written).
    pub async fn finish(mut self) -> Result<Vec<DataFile>, IcebergError> {
        let held: Vec<Struct> = self.held.keys().cloned().collect();
        for partition in held {
            self.write_sorted(partition).await?;
        }
        let mut files = std::mem::take(&mut self.closed);
        for (_, mut file) in std::mem::take(&mut self.open) {
            files.extend(file.inner.close().await.map_err(|e| self.close_err(e))?);
        }
        match &self.sorter {
            Some(sorter) => files
                .iter()
                .map(|f| with_sort_order(f, sorter.order_id()))
                .collect(),
            None => Ok(files),
        }
    }
}

/// The file writers' builder, made at the first rows, which decide the
/// columns written without a dictionary ([`super::dictionary`]).
enum FileBuilder {
    Unbuilt(Unbuilt),
    Built(Box<Builder>),
}

impl FileBuilder {
    fn built(&mut self, first: &RecordBatch) -> &Builder {
        if let Self::Unbuilt(unbuilt) = self {
            *self = Self::Built(Box::new(unbuilt.build(first)));
        }
        match self {
            Self::Built(builder) => builder,
            Self::Unbuilt(_) => unreachable!("built above"),
        }
    }
}

/// What the file writers are built from, once the first rows are seen.
struct Unbuilt {
    file_io: FileIO,
    locations: DefaultLocationGenerator,
    schema: SchemaRef,
    level: ZstdLevel,
    row_group: usize,
    target_file_size: usize,
}

impl Unbuilt {
    fn build(&self, first: &RecordBatch) -> Builder {
        let mut props = WriterProperties::builder();
        // Metadata columns distinct in (nearly) every row, and the columns
        // whose first rows are: a dictionary only costs time before the
        // writer gives up on it.
        let unique = [OLAKE_ID, KAFKA_OFFSET, KAFKA_TIMESTAMP, KAFKA_KEY].map(String::from);
        for column in unique.into_iter().chain(distinct_columns(first)) {
            props = props.set_column_dictionary_enabled(ColumnPath::from(column), false);
        }
        let props = props
            .set_compression(Compression::ZSTD(self.level))
            .set_max_row_group_bytes(Some(self.row_group))
            .build();
        let names = DefaultFileNameGenerator::new(
            uuid::Uuid::new_v4().to_string(),
            None,
            DataFileFormat::Parquet,
        );
        let rolling = RollingFileWriterBuilder::new(
            ParquetWriterBuilder::new(props, self.schema.clone()),
            self.target_file_size,
            self.file_io.clone(),
            self.locations.clone(),
            names,
        );
        DataFileWriterBuilder::new(rolling)
    }
}

/// A builder holding every field of `file`, to write it out with one
/// changed (`iceberg` 0.10.1 keeps the fields crate-private).
pub(crate) fn copy_of(file: &DataFile) -> DataFileBuilder {
    let mut b = DataFileBuilder::default();
    b.content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(file.first_row_id())
        .partition_spec_id(spec_id(file))
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        b.sort_order_id(order);
    }
    b
}

/// `file` marked as written in sort order `order_id`.
fn with_sort_order(file: &DataFile, order_id: i32) -> Result<DataFile, IcebergError> {
    copy_of(file).sort_order_id(order_id).build().map_err(|e| {
        IcebergError::new(
            IcebergErrorKind::Data,
            format!("marking data file {} as sorted", file.file_path()),
            e.to_string(),
        )
        .with_source(e)
    })
}

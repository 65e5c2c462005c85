//! Stitching a compaction group: when none of its files has deletes and
//! they share one Parquet schema of the table's columns, the new files are
//! made of the old files' row groups copied as they are (each column chunk
//! spliced byte for byte, with its statistics and page index), not decoded
//! and encoded again. A follower at 100,000 msg/s writes a file of about
//! 200,000 rows every round; rewriting them cost more CPU than writing them
//! the first time (bench/README.md, "Stitched compaction").
//!
//! Only row groups worth keeping are stitched: a group's files whose row
//! groups hold fewer than [`MIN_STITCH_ROWS`] rows on average (or that
//! have deletes, or another schema) are rewritten into their own new files
//! as before (small row groups make slow reads), so a file from frequent
//! commits is rewritten once into large row groups and stitched after
//! that ([`split`]). The new file's manifest metrics are its inputs' merged:
//! counts and sizes summed, bounds the smallest lower and largest upper
//! (a bound missing from any input is left out). Bloom filters are not
//! copied (topicberg writes none). Memory: one row group's bytes at a
//! time, handed to storage once copied.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use iceberg::arrow::ArrowFileReader;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, PartitionKey, TableMetadata,
};
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator, FileNameGenerator, LocationGenerator,
};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, RowGroupMetaData};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::writer::SerializedFileWriter;

use super::plan::{table_field_ids, Group, Plan};
use crate::commit::manifest_entries::Entry;
use crate::error::{IcebergError, IcebergErrorKind};

/// The average rows per row group below which a group's files are
/// rewritten rather than stitched.
pub(crate) const MIN_STITCH_ROWS: i64 = 65_536;

fn parquet_err(step: &str, e: parquet::errors::ParquetError) -> IcebergError {
    IcebergError::new(IcebergErrorKind::Data, step, e.to_string()).with_source(e)
}

fn iceberg_err(step: &str, e: iceberg::Error, kind: IcebergErrorKind) -> IcebergError {
    IcebergError::new(kind, step, e.to_string()).with_source(e)
}

/// Whether any of `group`'s files may be stitched, from what the plan
/// knows: files of the table's current spec, no sort order to keep.
pub(crate) fn may_stitch(metadata: &TableMetadata, group: &Group) -> bool {
    !group.repartition && metadata.default_sort_order().is_unsorted()
}

/// A group's files split: those stitched (with their footers), and the rest,
/// rewritten. A file is stitched when it has no deletes to apply, every
/// top-level column is a column of the table, its row groups hold at least
/// [`MIN_STITCH_ROWS`] rows on average, and it shares its Parquet schema
/// with the most such files of the group. Each part keeps the group's order.
#[derive(Default)]
pub(crate) struct Split {
    pub stitched: Vec<(Entry, Arc<ParquetMetaData>)>,
    pub rewritten: Vec<Entry>,
}

pub(crate) async fn split(
    file_io: &FileIO,
    metadata: &TableMetadata,
    plan: &Plan,
    group: &Group,
) -> Result<Split, IcebergError> {
    let table_ids = table_field_ids(metadata);
    let mut candidates = Vec::new();
    let mut split = Split::default();
    for entry in &group.files {
        let clean =
            !plan.positions.contains_key(entry.path()) && plan.equality_for(entry).is_empty();
        if !clean {
            split.rewritten.push(entry.clone());
            continue;
        }
        let footer = read_footer(file_io, entry.path()).await?;
        let schema = footer.file_metadata().schema_descr().root_schema();
        let table_columns = schema.get_fields().iter().all(|f| {
            let info = f.get_basic_info();
            info.has_id() && table_ids.contains(&info.id())
        });
        let groups = footer.num_row_groups() as i64;
        let rows = footer.file_metadata().num_rows();
        if table_columns && groups > 0 && rows / groups >= MIN_STITCH_ROWS {
            candidates.push((entry.clone(), footer));
        } else {
            split.rewritten.push(entry.clone());
        }
    }
    // The schema most large files share; files of another schema are
    // rewritten (into the table's current columns).
    let schema_of =
        |f: &Arc<ParquetMetaData>| f.file_metadata().schema_descr().root_schema().clone();
    let most = candidates
        .iter()
        .map(|(_, f)| schema_of(f))
        .max_by_key(|s| {
            candidates
                .iter()
                .filter(|(_, f)| &schema_of(f) == s)
                .count()
        });
    for (entry, footer) in candidates {
        if most.as_ref() == Some(&schema_of(&footer)) {
            split.stitched.push((entry, footer));
        } else {
            split.rewritten.push(entry);
        }
    }
    let order: HashMap<&str, usize> = group
        .files
        .iter()
        .enumerate()
        .map(|(i, e)| (e.path(), i))
        .collect();
    split.rewritten.sort_by_key(|e| order[e.path()]);
    Ok(split)
}

/// One stitched file being written.
struct Output {
    path: String,
    parquet: SerializedFileWriter<Vec<u8>>,
    storage: Box<dyn iceberg::io::FileWrite>,
    inputs: Vec<DataFile>,
}

impl Output {
    /// Hands what the Parquet writer holds to storage.
    async fn flush(&mut self, step: &str) -> Result<(), IcebergError> {
        self.parquet
            .flush()
            .map_err(|e| IcebergError::new(IcebergErrorKind::Data, step, e.to_string()))?;
        let bytes = std::mem::take(self.parquet.inner_mut());
        if !bytes.is_empty() {
            self.storage
                .write(Bytes::from(bytes))
                .await
                .map_err(|e| iceberg_err(step, e, IcebergErrorKind::Storage))?;
        }
        Ok(())
    }
}

/// Writes `files` (with their `footers`) into new files of about
/// `target_file_size`, each made of whole input files' row groups in order.
/// On an error the files finished so far are returned with it.
pub(crate) async fn stitch(
    file_io: &FileIO,
    metadata: &TableMetadata,
    group: &Group,
    files: &[(Entry, Arc<ParquetMetaData>)],
    target_file_size: u64,
) -> Result<Vec<DataFile>, (IcebergError, Vec<DataFile>)> {
    let mut done = Vec::new();
    let mut output: Option<Output> = None;
    for (entry, footer) in files {
        let written = output
            .as_ref()
            .map_or(0, |o| o.parquet.bytes_written() as u64);
        if written >= target_file_size {
            let full = output.take().expect("an output with bytes");
            match finish(full, group).await {
                Ok(file) => done.push(file),
                Err(e) => return Err((e, done)),
            }
        }
        if output.is_none() {
            match open(file_io, metadata, group, footer).await {
                Ok(o) => output = Some(o),
                Err(e) => return Err((e, done)),
            }
        }
        let out = output.as_mut().expect("an output");
        if let Err(e) = append_file(file_io, entry, footer, out).await {
            return Err((e, done));
        }
    }
    if let Some(last) = output {
        match finish(last, group).await {
            Ok(file) => done.push(file),
            Err(e) => return Err((e, done)),
        }
    }
    Ok(done)
}

/// A new data file of the group's partition, with the inputs' schema and
/// key-value metadata (the Arrow schema readers use).
async fn open(
    file_io: &FileIO,
    metadata: &TableMetadata,
    group: &Group,
    footer: &ParquetMetaData,
) -> Result<Output, IcebergError> {
    let step = "opening a stitched data file";
    let locations = DefaultLocationGenerator::new(metadata)
        .map_err(|e| iceberg_err(step, e, IcebergErrorKind::Config))?;
    let names = DefaultFileNameGenerator::new(
        uuid::Uuid::new_v4().to_string(),
        None,
        DataFileFormat::Parquet,
    );
    let key = PartitionKey::new(
        group.spec.as_ref().clone(),
        metadata.current_schema().clone(),
        group.partition.clone(),
    );
    let partitioned = !group.spec.fields().is_empty();
    let path =
        locations.generate_location(partitioned.then_some(&key), &names.generate_file_name());
    let props = WriterProperties::builder()
        .set_key_value_metadata(footer.file_metadata().key_value_metadata().cloned())
        .build();
    let schema = footer.file_metadata().schema_descr().root_schema_ptr();
    let parquet = SerializedFileWriter::new(Vec::new(), schema, Arc::new(props))
        .map_err(|e| parquet_err(step, e))?;
    let storage = file_io
        .new_output(&path)
        .map_err(|e| iceberg_err(step, e, IcebergErrorKind::Storage))?
        .writer()
        .await
        .map_err(|e| iceberg_err(step, e, IcebergErrorKind::Storage))?;
    Ok(Output {
        path,
        parquet,
        storage,
        inputs: Vec::new(),
    })
}

/// A data file's footer with its page index (kept in the stitched file).
async fn read_footer(file_io: &FileIO, path: &str) -> Result<Arc<ParquetMetaData>, IcebergError> {
    let step = format!("reading the footer of {path}");
    let input = file_io
        .new_input(path)
        .map_err(|e| iceberg_err(&step, e, IcebergErrorKind::Storage))?;
    let meta = input
        .metadata()
        .await
        .map_err(|e| iceberg_err(&step, e, IcebergErrorKind::Storage))?;
    let reader = input
        .reader()
        .await
        .map_err(|e| iceberg_err(&step, e, IcebergErrorKind::Storage))?;
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
    let builder = ParquetRecordBatchStreamBuilder::new_with_options(
        ArrowFileReader::new(meta, reader),
        options,
    )
    .await
    .map_err(|e| parquet_err(&step, e))?;
    Ok(Arc::clone(builder.metadata()))
}

/// Copies every row group of one input file into `out`, reading one row
/// group's bytes at a time (memory: one row group, not the file).
async fn append_file(
    file_io: &FileIO,
    entry: &Entry,
    footer: &ParquetMetaData,
    out: &mut Output,
) -> Result<(), IcebergError> {
    let step = format!("stitching data file {}", entry.path());
    let reader = file_io
        .new_input(entry.path())
        .map_err(|e| iceberg_err(&step, e, IcebergErrorKind::Storage))?
        .reader()
        .await
        .map_err(|e| iceberg_err(&step, e, IcebergErrorKind::Storage))?;
    let mut rows = 0i64;
    for (at, row_group) in footer.row_groups().iter().enumerate() {
        let range = byte_range(row_group);
        let bytes = RowGroupBytes {
            start: range.start,
            bytes: reader
                .read(range)
                .await
                .map_err(|e| iceberg_err(&step, e, IcebergErrorKind::Storage))?,
        };
        let mut writer = out
            .parquet
            .next_row_group()
            .map_err(|e| parquet_err(&step, e))?;
        for (column, chunk) in row_group.columns().iter().enumerate() {
            let close = ColumnCloseResult {
                bytes_written: chunk.compressed_size() as u64,
                rows_written: row_group.num_rows() as u64,
                metadata: chunk.clone(),
                bloom_filter: None,
                column_index: footer.column_index().map(|i| i[at][column].clone()),
                offset_index: footer.offset_index().map(|i| i[at][column].clone()),
            };
            writer
                .append_column(&bytes, close)
                .map_err(|e| parquet_err(&step, e))?;
        }
        writer.close().map_err(|e| parquet_err(&step, e))?;
        rows += row_group.num_rows();
        out.flush(&step).await?;
    }
    if rows as u64 != entry.file.record_count() {
        return Err(IcebergError::new(
            IcebergErrorKind::Data,
            step,
            format!(
                "read {rows} rows, the manifest says {}",
                entry.file.record_count()
            ),
        ));
    }
    out.inputs.push(entry.file.clone());
    Ok(())
}

/// Where a row group's column chunks lie in its file.
fn byte_range(row_group: &RowGroupMetaData) -> Range<u64> {
    let chunks = row_group.columns().iter().map(|c| {
        let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset()) as u64;
        (start, start + c.compressed_size() as u64)
    });
    let (start, end) = chunks.fold((u64::MAX, 0), |(s, e), (cs, ce)| (s.min(cs), e.max(ce)));
    start.min(end)..end
}

/// One row group's bytes, addressed by their offsets in the file.
struct RowGroupBytes {
    start: u64,
    bytes: Bytes,
}

impl RowGroupBytes {
    fn slice(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let from = start
            .checked_sub(self.start)
            .map(|f| f as usize)
            .filter(|f| f + length <= self.bytes.len())
            .ok_or_else(|| {
                ParquetError::General(format!(
                    "bytes {start}+{length} are outside the row group read ({}+{})",
                    self.start,
                    self.bytes.len()
                ))
            })?;
        Ok(self.bytes.slice(from..from + length))
    }
}

impl Length for RowGroupBytes {
    fn len(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

impl ChunkReader for RowGroupBytes {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let rest = (self.len().saturating_sub(start)) as usize;
        Ok(self.slice(start, rest)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, length)
    }
}

/// Writes the footer, closes the upload and describes the file.
async fn finish(mut out: Output, group: &Group) -> Result<DataFile, IcebergError> {
    let step = format!("finishing stitched data file {}", out.path);
    let footer = out.parquet.finish().map_err(|e| parquet_err(&step, e))?;
    out.flush(&step).await?;
    out.storage
        .close()
        .await
        .map_err(|e| iceberg_err(&step, e, IcebergErrorKind::Storage))?;
    let size = out.parquet.bytes_written() as u64;
    let splits: Vec<i64> = footer
        .row_groups()
        .iter()
        .filter_map(|g| g.file_offset())
        .collect();
    let merged = merged_metrics(&out.inputs);
    let mut b = DataFileBuilder::default();
    b.content(DataContentType::Data)
        .file_path(out.path.clone())
        .file_format(DataFileFormat::Parquet)
        .partition(group.partition.clone())
        .partition_spec_id(group.spec.spec_id())
        .record_count(out.inputs.iter().map(DataFile::record_count).sum())
        .file_size_in_bytes(size)
        .column_sizes(merged.column_sizes)
        .value_counts(merged.value_counts)
        .null_value_counts(merged.null_value_counts)
        .nan_value_counts(merged.nan_value_counts)
        .lower_bounds(merged.lower_bounds)
        .upper_bounds(merged.upper_bounds)
        .split_offsets((!splits.is_empty()).then_some(splits));
    b.build()
        .map_err(|e| IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()).with_source(e))
}

/// The manifest metrics of one file made of `inputs`.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Metrics {
    pub column_sizes: HashMap<i32, u64>,
    pub value_counts: HashMap<i32, u64>,
    pub null_value_counts: HashMap<i32, u64>,
    pub nan_value_counts: HashMap<i32, u64>,
    pub lower_bounds: HashMap<i32, Datum>,
    pub upper_bounds: HashMap<i32, Datum>,
}

/// Sums and bounds over `inputs`; a field missing from any input's map is
/// left out (unknown is not zero).
pub(crate) fn merged_metrics(inputs: &[DataFile]) -> Metrics {
    fn summed(
        inputs: &[DataFile],
        of: impl Fn(&DataFile) -> &HashMap<i32, u64>,
    ) -> HashMap<i32, u64> {
        let Some(first) = inputs.first() else {
            return HashMap::new();
        };
        of(first)
            .keys()
            .filter_map(|id| {
                let values: Option<Vec<u64>> =
                    inputs.iter().map(|f| of(f).get(id).copied()).collect();
                values.map(|v| (*id, v.iter().sum()))
            })
            .collect()
    }
    fn bound(
        inputs: &[DataFile],
        of: impl Fn(&DataFile) -> &HashMap<i32, Datum>,
        pick: impl Fn(&Datum, &Datum) -> bool,
    ) -> HashMap<i32, Datum> {
        let Some(first) = inputs.first() else {
            return HashMap::new();
        };
        of(first)
            .iter()
            .filter_map(|(id, start)| {
                let mut best = start;
                for f in &inputs[1..] {
                    let d = of(f).get(id)?;
                    // Bounds of one field share a type; a pair that does not
                    // compare leaves the field out.
                    d.partial_cmp(best)?;
                    if pick(d, best) {
                        best = d;
                    }
                }
                Some((*id, best.clone()))
            })
            .collect()
    }
    Metrics {
        column_sizes: summed(inputs, DataFile::column_sizes),
        value_counts: summed(inputs, DataFile::value_counts),
        null_value_counts: summed(inputs, DataFile::null_value_counts),
        nan_value_counts: summed(inputs, DataFile::nan_value_counts),
        lower_bounds: bound(inputs, DataFile::lower_bounds, |d, best| d < best),
        upper_bounds: bound(inputs, DataFile::upper_bounds, |d, best| d > best),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::Struct;

    fn file(path: &str, counts: &[(i32, u64)], bounds: &[(i32, i64, i64)]) -> DataFile {
        let counts: HashMap<i32, u64> = counts.iter().copied().collect();
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(10)
            .file_size_in_bytes(100)
            .column_sizes(counts.clone())
            .value_counts(counts.clone())
            .null_value_counts(counts)
            .lower_bounds(
                bounds
                    .iter()
                    .map(|(id, lo, _)| (*id, Datum::long(*lo)))
                    .collect(),
            )
            .upper_bounds(
                bounds
                    .iter()
                    .map(|(id, _, hi)| (*id, Datum::long(*hi)))
                    .collect(),
            )
            .build()
            .unwrap()
    }

    #[test]
    fn merged_metrics_sum_counts_widen_bounds_and_leave_out_what_one_file_lacks() {
        let a = file("a", &[(1, 10), (2, 4)], &[(1, 5, 9), (2, 0, 1)]);
        let b = file("b", &[(1, 7)], &[(1, -3, 6)]);
        let merged = merged_metrics(&[a, b]);
        assert_eq!(merged.value_counts, HashMap::from([(1, 17)]));
        assert_eq!(merged.column_sizes, HashMap::from([(1, 17)]));
        assert_eq!(merged.lower_bounds, HashMap::from([(1, Datum::long(-3))]));
        assert_eq!(merged.upper_bounds, HashMap::from([(1, Datum::long(9))]));
        assert!(merged.nan_value_counts.is_empty());
    }
}

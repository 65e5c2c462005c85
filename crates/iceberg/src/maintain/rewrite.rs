//! Rewriting a compaction's data files: each file's rows streamed a batch
//! at a time (the table's columns only, by field id), the rows its deletes
//! remove left out, the rest written into new target-size data files that
//! carry no deletes; then the plan's merged deletes of the files left
//! (`leftover.rs`), one position delete file per data file.

use arrow_array::{BooleanArray, RecordBatch};
use futures::TryStreamExt;
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, TableMetadata};
use parquet::arrow::ProjectionMask;

use super::plan::{table_field_ids, CompactionOptions, Group, Plan};
use super::rebase::RowMap;
use super::stitch;
use crate::commit::manifest_entries::Entry;
use crate::deletes::position::write_position_delete_file;
use crate::error::{IcebergError, IcebergErrorKind};
use crate::key_index::parse_key;
use crate::key_index::scan::open_parquet;
use crate::write::data_files::{DataFileWriter, WriteOptions};
use crate::write::schema::PARQUET_FIELD_ID_META_KEY;
use topicberg_core::columns::str_values;

/// Rows per decoded batch.
const BATCH_ROWS: usize = 8192;

/// What rewriting wrote.
#[derive(Debug, Default)]
pub(crate) struct Rewritten {
    pub files: Vec<DataFile>,
    pub rows: u64,
    pub rows_dropped: u64,
    /// Input files stitched rather than rewritten.
    pub stitched: usize,
    /// Where the rows went, for the groups written in read order (one
    /// partition, no sort order).
    pub row_map: RowMap,
    /// The position delete files of the plan's merged deletes.
    pub merged_deletes: Vec<DataFile>,
}

impl Rewritten {
    /// Every file written: what to delete when the compaction does not
    /// land.
    pub fn all_files(&self) -> Vec<DataFile> {
        self.files
            .iter()
            .chain(&self.merged_deletes)
            .cloned()
            .collect()
    }
}

fn storage_err(step: &str, e: impl std::error::Error + Send + Sync + 'static) -> IcebergError {
    IcebergError::new(IcebergErrorKind::Storage, step, e.to_string()).with_source(e)
}

/// Writes every group of the plan into new data files. On an error the
/// files written so far are returned with it, for the caller to delete.
pub(crate) async fn rewrite(
    file_io: &FileIO,
    metadata: &TableMetadata,
    plan: &Plan,
    options: &CompactionOptions,
) -> Result<Rewritten, (IcebergError, Vec<DataFile>)> {
    let mut out = Rewritten::default();
    let write = WriteOptions {
        target_file_size: options.target_file_size as usize,
        zstd_level: options.zstd_level,
        // Sorted tables: a sorted run fills about one target-size file
        // (Parquet encodes Arrow rows several times smaller).
        sort_buffer_size: (options.target_file_size as usize).saturating_mul(4),
        ..WriteOptions::default()
    };
    for group in &plan.groups {
        let files = if stitch::may_stitch(metadata, group) {
            let split = match stitch::split(file_io, metadata, plan, group).await {
                Ok(split) => split,
                Err(e) => return Err((e, out.files)),
            };
            if let Err(e) =
                stitched(file_io, metadata, group, &split.stitched, options, &mut out).await
            {
                return Err((e, out.files));
            }
            split.rewritten
        } else {
            group.files.clone()
        };
        if files.is_empty() {
            continue;
        }
        if let Err(e) = rewritten(file_io, metadata, plan, group, &files, &write, &mut out).await {
            return Err((e, out.files));
        }
    }
    for (partition, path) in &plan.merged {
        let positions = plan.positions.get(path).map(|p| p.iter().collect());
        let deletes = [(path.clone(), positions.unwrap_or_default())];
        let level = options.zstd_level;
        match write_position_delete_file(file_io, metadata, &deletes, partition, level).await {
            Ok(file) => out.merged_deletes.extend(file),
            Err(e) => return Err((e, out.all_files())),
        }
    }
    Ok(out)
}

/// Rewrites `files` of `group`: their live rows decoded and written into
/// new files. The files it finished before an error are in `out.files`.
async fn rewritten(
    file_io: &FileIO,
    metadata: &TableMetadata,
    plan: &Plan,
    group: &Group,
    files: &[Entry],
    write: &WriteOptions,
    out: &mut Rewritten,
) -> Result<(), IcebergError> {
    let mut writer = if group.repartition {
        // Older-spec rows, split by the table's current spec.
        DataFileWriter::new(file_io.clone(), metadata, write).await?
    } else {
        DataFileWriter::for_partition(
            file_io.clone(),
            metadata,
            write,
            group.spec.clone(),
            group.partition.clone(),
        )
        .await?
    };
    let in_order = !group.repartition && !writer.sorts();
    let mut starts = Vec::with_capacity(files.len());
    for entry in files {
        starts.push((entry.path().to_string(), writer.rows()));
        // On an error the open writer's files are not known; they become
        // orphans, removed by a later orphan cleanup.
        copy_live_rows(file_io, metadata, plan, entry, &mut writer, out).await?;
    }
    let rows = writer.rows();
    let written = writer.finish().await?;
    if in_order {
        out.row_map.add_group(&starts, rows, &written);
    }
    out.files.extend(written);
    out.rows += rows;
    Ok(())
}

/// Stitches `files` of `group` (see [`stitch`]). The files it finished
/// before an error are in `out.files`.
async fn stitched(
    file_io: &FileIO,
    metadata: &TableMetadata,
    group: &Group,
    files: &[(
        Entry,
        std::sync::Arc<parquet::file::metadata::ParquetMetaData>,
    )],
    options: &CompactionOptions,
    out: &mut Rewritten,
) -> Result<(), IcebergError> {
    if files.is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let target = options.target_file_size;
    let written = match stitch::stitch(file_io, metadata, group, files, target).await {
        Ok(written) => written,
        Err((e, written)) => {
            out.files.extend(written);
            return Err(e);
        }
    };
    let mut starts = Vec::with_capacity(files.len());
    let mut rows = 0;
    for (entry, _) in files {
        starts.push((entry.path().to_string(), rows));
        rows += entry.file.record_count();
    }
    out.row_map.add_group(&starts, rows, &written);
    tracing::info!(
        files = files.len(),
        written = written.len(),
        rows,
        bytes = written
            .iter()
            .map(DataFile::file_size_in_bytes)
            .sum::<u64>(),
        ms = started.elapsed().as_millis() as u64,
        "stitched a compaction group's row groups"
    );
    out.files.extend(written);
    out.rows += rows;
    out.stitched += files.len();
    Ok(())
}

/// Streams one data file's live rows into `writer`.
async fn copy_live_rows(
    file_io: &FileIO,
    metadata: &TableMetadata,
    plan: &Plan,
    entry: &Entry,
    writer: &mut DataFileWriter,
    out: &mut Rewritten,
) -> Result<(), IcebergError> {
    let path = entry.path();
    let step = format!("rewriting data file {path}");
    let builder = open_parquet(file_io, path, &step).await?;
    // The table's columns only (a column another engine dropped stays out).
    let table_ids = table_field_ids(metadata);
    let field_id = |field: &arrow_schema::Field| -> Option<i32> {
        field
            .metadata()
            .get(PARQUET_FIELD_ID_META_KEY)
            .and_then(|v| v.parse().ok())
    };
    let roots: Vec<usize> = builder
        .schema()
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| field_id(f).is_some_and(|id| table_ids.contains(&id)))
        .map(|(i, _)| i)
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let mut stream = builder
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| storage_err(&step, e))?;

    let deleted = plan.positions.get(path);
    let equality = plan.equality_for(entry);
    let mut pos = 0u64;
    while let Some(batch) = stream.try_next().await.map_err(|e| storage_err(&step, e))? {
        let rows = batch.num_rows();
        let start = pos;
        pos += rows as u64;
        let batch = if deleted.is_none() && equality.is_empty() {
            batch
        } else {
            let keys = if equality.is_empty() {
                None
            } else {
                Some(key_column(&batch, plan.key_field, &step)?)
            };
            let keep: BooleanArray = (0..rows)
                .map(|i| {
                    let gone = deleted.is_some_and(|d| d.contains(start + i as u64))
                        || keys.as_ref().is_some_and(|keys| {
                            keys[i].is_some_and(|k| equality.iter().any(|set| set.contains(&k)))
                        });
                    Some(!gone)
                })
                .collect();
            let kept = arrow_select::filter::filter_record_batch(&batch, &keep).map_err(|e| {
                IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()).with_source(e)
            })?;
            out.rows_dropped += (rows - kept.num_rows()) as u64;
            kept
        };
        writer.write(&batch).await?;
    }
    if pos != entry.file.record_count() {
        return Err(IcebergError::new(
            IcebergErrorKind::Data,
            step,
            format!(
                "read {pos} rows, the manifest says {}",
                entry.file.record_count()
            ),
        ));
    }
    Ok(())
}

/// The parsed `_olake_id` of each row.
fn key_column(
    batch: &RecordBatch,
    key_field: Option<i32>,
    step: &str,
) -> Result<Vec<Option<[u8; 16]>>, IcebergError> {
    let schema = batch.schema();
    let index = schema
        .fields()
        .iter()
        .position(|f| {
            f.metadata()
                .get(PARQUET_FIELD_ID_META_KEY)
                .and_then(|v| v.parse::<i32>().ok())
                == key_field
        })
        .filter(|_| key_field.is_some())
        .ok_or_else(|| {
            IcebergError::new(
                IcebergErrorKind::Data,
                step,
                "equality deletes apply, but the file has no _olake_id column",
            )
        })?;
    let column = batch.column(index);
    let strings = str_values(column.as_ref()).ok_or_else(|| {
        IcebergError::new(IcebergErrorKind::Data, step, "_olake_id is not a string")
    })?;
    Ok(strings.into_iter().map(|v| v.and_then(parse_key)).collect())
}

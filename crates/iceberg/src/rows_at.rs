//! Some rows of a table's data file: the values of a few columns at given
//! positions (an upsert fills a change event's unsent value from the
//! key's row in the table with it). Only those columns are read, and of
//! them only the selected rows are decoded.

use arrow_array::{ArrayRef, RecordBatch};
use futures::TryStreamExt;
use iceberg::io::FileIO;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use parquet::arrow::ProjectionMask;

use crate::error::{IcebergError, IcebergErrorKind};
use crate::key_index::scan::{open_parquet, parquet_err, BATCH_ROWS};

/// The Arrow field metadata key of a Parquet column's field id.
const FIELD_ID_KEY: &str = "PARQUET:field_id";

/// The values of the top-level columns `field_ids` at `positions`
/// (ascending, distinct) of the Parquet data file `path`: per field id, an
/// array with one value per position, or `None` when the file has no such
/// column (it was added to the table later: its values are null).
pub(crate) async fn rows_at(
    file_io: &FileIO,
    path: &str,
    positions: &[u64],
    field_ids: &[i32],
) -> Result<Vec<Option<ArrayRef>>, IcebergError> {
    let step = format!("reading rows of {path}");
    let builder = open_parquet(file_io, path, &step).await?;
    let id_of = |i: usize| {
        builder.schema().fields()[i]
            .metadata()
            .get(FIELD_ID_KEY)
            .and_then(|v| v.parse::<i32>().ok())
    };
    let roots: Vec<usize> = (0..builder.schema().fields().len())
        .filter(|i| id_of(*i).is_some_and(|id| field_ids.contains(&id)))
        .collect();
    if (0..builder.schema().fields().len()).all(|i| id_of(i).is_none()) {
        // Its columns cannot be told by id (a file added from another
        // table format without them): no value can be said to be absent.
        let detail = "the file's columns have no field ids".to_owned();
        return Err(IcebergError::new(IcebergErrorKind::Data, step, detail));
    }
    if roots.is_empty() || positions.is_empty() {
        return Ok(vec![None; field_ids.len()]);
    }
    let total = u64::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
    let mut selectors = Vec::with_capacity(positions.len() * 2);
    let mut next = 0u64;
    for &pos in positions {
        if pos >= total || pos < next {
            let detail = format!("position {pos} is not a row of the file ({total} rows)");
            return Err(IcebergError::new(IcebergErrorKind::Data, step, detail));
        }
        if pos > next {
            selectors.push(RowSelector::skip((pos - next) as usize));
        }
        selectors.push(RowSelector::select(1));
        next = pos + 1;
    }
    let ids: Vec<Option<i32>> = roots.iter().map(|i| id_of(*i)).collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let stream = builder
        .with_projection(mask)
        .with_row_selection(RowSelection::from(selectors))
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| parquet_err(&step, e))?;
    let schema = stream.schema().clone();
    let batches: Vec<RecordBatch> = stream
        .try_collect()
        .await
        .map_err(|e| parquet_err(&step, e))?;
    let batch = arrow_select::concat::concat_batches(&schema, &batches)
        .map_err(|e| IcebergError::new(IcebergErrorKind::Data, step.clone(), e.to_string()))?;
    if batch.num_rows() != positions.len() {
        let detail = format!(
            "{} rows read for {} positions",
            batch.num_rows(),
            positions.len()
        );
        return Err(IcebergError::new(IcebergErrorKind::Data, step, detail));
    }
    Ok(field_ids
        .iter()
        .map(|id| {
            ids.iter()
                .position(|found| *found == Some(*id))
                .map(|i| batch.column(i).clone())
        })
        .collect())
}

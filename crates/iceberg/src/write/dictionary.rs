//! Which columns a data file writes without a dictionary. Parquet's writer
//! builds a dictionary for every column until the dictionary page passes its
//! limit (1 MiB: 131,072 `long` values), and only then writes plain values:
//! for a column of (nearly) unique values that is hashing and interning the
//! first hundred thousand values of every row group for nothing. A file
//! writer decides from the first rows it gets: a column whose sampled values
//! are nearly all distinct gets none.

use std::collections::HashSet;
use std::hash::Hash;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use arrow_array::{Array, ArrowPrimitiveType, RecordBatch};
use arrow_schema::{DataType, TimeUnit};

/// Rows sampled from the start of the first batch.
const SAMPLE_ROWS: usize = 4_096;
/// Fewer rows than this say too little: every column keeps its dictionary.
const MIN_SAMPLE_ROWS: usize = 512;
/// A column whose sampled non-null values are at least this share distinct
/// gets no dictionary (a column of 20,000 values or fewer, repeated, stays
/// under it in a sample of 4,096 rows, and keeps one).
const DISTINCT_SHARE: f64 = 0.9;

/// The top-level primitive columns of `batch` whose first rows are nearly
/// all distinct, by name.
pub(crate) fn distinct_columns(batch: &RecordBatch) -> Vec<String> {
    let rows = batch.num_rows().min(SAMPLE_ROWS);
    if rows < MIN_SAMPLE_ROWS {
        return Vec::new();
    }
    batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(_, column)| {
            let sample = column.slice(0, rows);
            distinct_share(sample.as_ref()).is_some_and(|share| share >= DISTINCT_SHARE)
        })
        .map(|(field, _)| field.name().clone())
        .collect()
}

/// The share of a column's non-null values that are distinct; `None` for
/// types left to the writer (nested, boolean, decimal) and for a column
/// with too few values.
fn distinct_share(column: &dyn Array) -> Option<f64> {
    let values = column.len() - column.null_count();
    if values < MIN_SAMPLE_ROWS {
        return None;
    }
    let distinct = match column.data_type() {
        DataType::Int64 => distinct_bits::<Int64Type>(column, |v| v as u64),
        DataType::Int32 => distinct_bits::<Int32Type>(column, |v| v as u64),
        DataType::Date32 => distinct_bits::<Date32Type>(column, |v| v as u64),
        DataType::Float64 => distinct_bits::<Float64Type>(column, f64::to_bits),
        DataType::Float32 => distinct_bits::<Float32Type>(column, |v| u64::from(v.to_bits())),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            distinct_bits::<TimestampMicrosecondType>(column, |v| v as u64)
        }
        DataType::Utf8 => distinct(column.as_string::<i32>().iter().flatten()),
        DataType::LargeBinary => distinct(column.as_binary::<i64>().iter().flatten()),
        DataType::FixedSizeBinary(_) => distinct(column.as_fixed_size_binary().iter().flatten()),
        _ => return None,
    };
    Some(distinct as f64 / values as f64)
}

fn distinct_bits<T: ArrowPrimitiveType>(column: &dyn Array, bits: fn(T::Native) -> u64) -> usize {
    distinct(column.as_primitive::<T>().iter().flatten().map(bits))
}

fn distinct<V: Hash + Eq>(values: impl Iterator<Item = V>) -> usize {
    let mut seen = HashSet::with_capacity(SAMPLE_ROWS);
    for value in values {
        seen.insert(value);
    }
    seen.len()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;

    fn batch(ids: Vec<i64>, names: Vec<String>) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(names)),
            ],
        )
        .unwrap()
    }

    #[test]
    fn unique_columns_get_no_dictionary_and_repeated_ones_keep_it() {
        let ids = (0..5_000).collect();
        let names = (0..5_000)
            .map(|i| format!("customer-{}", i % 300))
            .collect();
        assert_eq!(distinct_columns(&batch(ids, names)), ["id"]);
        let ids = (0..5_000).map(|i| i % 1_000).collect();
        let names = (0..5_000).map(|i| format!("order-{i}")).collect();
        assert_eq!(distinct_columns(&batch(ids, names)), ["name"]);
    }

    #[test]
    fn a_small_first_batch_keeps_every_dictionary() {
        let ids = (0..100).collect();
        let names = (0..100).map(|i| format!("order-{i}")).collect();
        assert!(distinct_columns(&batch(ids, names)).is_empty());
    }
}

//! Partitioning: a stream's `partition_by` -> the partition spec a new
//! table is created with, and a batch -> its rows per partition of the
//! spec new files are written under.
//!
//! Transforms and partition types are the `iceberg` crate's (`Transform`,
//! `PartitionSpec`, `PartitionValueCalculator`, which applies the
//! transforms to whole Arrow columns). Splitting a batch allocates per
//! batch and per partition, never per row: the partition values are
//! computed column-wise, rows already grouped (e.g. one day of
//! `_kafka_timestamp`) are cut into zero-copy slices, and only a batch
//! whose partitions interleave is sorted by them (`lexsort_to_indices`,
//! `take`) before it is cut.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_ord::partition::partition;
use arrow_ord::sort::{lexsort_to_indices, SortColumn};
use arrow_select::take::take_record_batch;
use iceberg::arrow::{arrow_struct_to_literal, PartitionValueCalculator};
use iceberg::spec::{
    Literal, PartitionSpec, PartitionSpecRef, SchemaRef, Struct, StructType, Transform,
    UnboundPartitionField, UnboundPartitionSpec,
};
use topicberg_core::config::{PartitionField, PartitionTransform};

use crate::error::{IcebergError, IcebergErrorKind};
use crate::write::schema::Column;

/// The first partition field id (the spec's, as Java assigns them).
pub const FIRST_PARTITION_FIELD_ID: i32 = 1000;

/// The `iceberg` crate's transform for a `partition_by` transform.
pub fn iceberg_transform(transform: PartitionTransform) -> Transform {
    match transform {
        PartitionTransform::Identity => Transform::Identity,
        PartitionTransform::Bucket(n) => Transform::Bucket(n),
        PartitionTransform::Truncate(w) => Transform::Truncate(w),
        PartitionTransform::Year => Transform::Year,
        PartitionTransform::Month => Transform::Month,
        PartitionTransform::Day => Transform::Day,
        PartitionTransform::Hour => Transform::Hour,
    }
}

/// The partition spec (id 0, field ids from 1000) of a new table with
/// `columns` (schema `schema`), partitioned by `fields`; unpartitioned when
/// `fields` is empty. A column the table does not have, or whose type the
/// transform does not take, is an error naming the column and the fix.
pub fn partition_spec(
    table: &str,
    schema: &SchemaRef,
    columns: &[Column],
    fields: &[PartitionField],
) -> Result<UnboundPartitionSpec, IcebergError> {
    let step = format!("building the partition spec of table {table}");
    let problem = |detail: String| IcebergError::new(IcebergErrorKind::Config, &step, detail);
    let mut builder = PartitionSpec::builder(schema.clone()).with_spec_id(0);
    for (i, field) in fields.iter().enumerate() {
        let column = columns
            .iter()
            .find(|c| c.name == field.column)
            .ok_or_else(|| {
                problem(format!(
                    "partition_by {field}: the table has no column \"{}\" (its first messages \
                     have no such field); name a field the messages have, or a metadata column \
                     such as _kafka_timestamp",
                    field.column
                ))
            })?;
        if let Some(detail) = field.type_problem(&column.column_type) {
            return Err(problem(format!("partition_by {detail}")));
        }
        builder = builder
            .add_unbound_field(UnboundPartitionField {
                source_id: column.field_id,
                field_id: Some(FIRST_PARTITION_FIELD_ID + i as i32),
                name: field.field_name(),
                transform: iceberg_transform(field.transform),
            })
            .map_err(|e| {
                problem(format!("partition_by {field}: {}", e.message())).with_source(e)
            })?;
    }
    let spec = builder
        .build()
        .map_err(|e| problem(e.message().to_string()).with_source(e))?;
    Ok(spec.into_unbound())
}

/// Why a batch could not be cut into its partitions (always
/// [`IcebergErrorKind::Data`] when written).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SplitError {
    /// The transforms could not be applied to the batch.
    #[error("computing partition values: {}", .0.message())]
    Compute(#[source] iceberg::Error),
    /// A row's partition value could not be read.
    #[error("reading a partition value: {}", .0.message())]
    Read(#[source] iceberg::Error),
    /// The partition value of a row is not a struct.
    #[error("unexpected partition value {0}")]
    NotAStruct(String),
    /// The computed values are not a struct array.
    #[error("partition values are not a struct")]
    NotAStructArray,
    /// Sorting or cutting the rows failed.
    #[error("{0}")]
    Arrow(#[source] arrow_schema::ArrowError),
}

/// Cuts batches into their rows per partition of one partitioned spec.
pub(crate) struct PartitionSplitter {
    calculator: PartitionValueCalculator,
    partition_type: StructType,
}

impl PartitionSplitter {
    /// A splitter for `spec` on the table schema `schema`; `None` when the
    /// spec is unpartitioned (every row in the one empty partition).
    pub(crate) fn new(
        spec: &PartitionSpecRef,
        schema: &SchemaRef,
    ) -> Result<Option<Self>, iceberg::Error> {
        if spec.is_unpartitioned() {
            return Ok(None);
        }
        let calculator = PartitionValueCalculator::try_new(spec, schema)?;
        let partition_type = calculator.partition_type().clone();
        Ok(Some(Self {
            calculator,
            partition_type,
        }))
    }

    /// The batch's rows per partition value, each partition once (rows in
    /// their order within a partition).
    pub(crate) fn split(
        &self,
        batch: &RecordBatch,
    ) -> Result<Vec<(Struct, RecordBatch)>, SplitError> {
        let values = self
            .calculator
            .calculate(batch)
            .map_err(SplitError::Compute)?;
        let columns = struct_columns(&values)?;
        if runs(&columns)?.len() <= 1 {
            let key = self.key_at(&values, 0)?;
            return Ok(vec![(key, batch.clone())]);
        }
        // Interleaved partitions: sort the rows by partition value, then
        // cut the sorted batch into one slice per value.
        let sort: Vec<SortColumn> = columns
            .iter()
            .map(|c| SortColumn {
                values: c.clone(),
                options: None,
            })
            .collect();
        let order = lexsort_to_indices(&sort, None).map_err(SplitError::Arrow)?;
        let sorted = take_record_batch(batch, &order).map_err(SplitError::Arrow)?;
        let sorted_values: ArrayRef =
            arrow_select::take::take(values.as_ref(), &order, None).map_err(SplitError::Arrow)?;
        let sorted_columns = struct_columns(&sorted_values)?;
        runs(&sorted_columns)?
            .into_iter()
            .map(|run| {
                let key = self.key_at(&sorted_values, run.start)?;
                Ok((key, sorted.slice(run.start, run.len())))
            })
            .collect()
    }

    /// The partition value of row `row` of the computed values.
    fn key_at(&self, values: &ArrayRef, row: usize) -> Result<Struct, SplitError> {
        let one = values.slice(row, 1);
        match arrow_struct_to_literal(&one, &self.partition_type)
            .map_err(SplitError::Read)?
            .pop()
        {
            Some(Some(Literal::Struct(value))) => Ok(value),
            other => Err(SplitError::NotAStruct(format!("{other:?}"))),
        }
    }
}

fn struct_columns(values: &ArrayRef) -> Result<Vec<ArrayRef>, SplitError> {
    values
        .as_any()
        .downcast_ref::<StructArray>()
        .map(|s| s.columns().to_vec())
        .ok_or(SplitError::NotAStructArray)
}

/// Runs of equal partition values in row order (one per partition when
/// the rows are grouped already).
fn runs(columns: &[ArrayRef]) -> Result<Vec<Range<usize>>, SplitError> {
    if columns.first().is_none_or(|c| c.is_empty()) {
        let rows = columns.first().map_or(0, |c| c.len());
        return Ok(std::iter::once(0..rows).collect());
    }
    Ok(partition(columns).map_err(SplitError::Arrow)?.ranges())
}

/// The partition spec files are written under: the table's current
/// default spec, whatever engine set it (Spark `ALTER TABLE ... ADD
/// PARTITION FIELD` makes new files partitioned from the next sync on).
pub(crate) fn write_spec(metadata: &iceberg::spec::TableMetadata) -> PartitionSpecRef {
    Arc::clone(metadata.default_partition_spec())
}

#[cfg(test)]
mod tests;

//! Sorting: a stream's `sort_by` -> the sort order a new table is created
//! with, and the rows of each data file put in the table's default sort
//! order before they are encoded.
//!
//! The writer follows the table's metadata, not the job file: a table's
//! default sort order (whoever set it, e.g. Spark's `ALTER TABLE ... WRITE
//! ORDERED BY`) is the order files are written in, when every field of it
//! is an `identity` of a top-level column of the current schema. Any other
//! order (a `bucket`/`truncate`/time transform, a nested column) is not
//! applied: files are written unsorted and carry no sort order id, which
//! the spec allows.
//!
//! Only the sort keys are concatenated (`lexsort_to_indices` over them);
//! the rows are then gathered from the buffered batches in chunks of
//! [`SORTED_CHUNK_ROWS`] (`interleave_record_batch`), so sorting holds the
//! buffered rows, a copy of the key columns and one chunk, never a second
//! copy of all rows.

use arrow_array::{ArrayRef, RecordBatch};
use arrow_ord::sort::{lexsort_to_indices, SortColumn, SortOptions};
use arrow_schema::{ArrowError, SchemaRef as ArrowSchemaRef};
use arrow_select::concat::concat;
use arrow_select::interleave::interleave_record_batch;
use iceberg::spec::{
    NullOrder, SchemaRef, SortDirection, SortField, SortOrder, TableMetadata, Transform,
};
use topicberg_core::config::SortKey;

use crate::error::{IcebergError, IcebergErrorKind};
use crate::write::schema::{Column, PARQUET_FIELD_ID_META_KEY};

/// Rows per batch handed to the file writer after sorting.
pub const SORTED_CHUNK_ROWS: usize = 8192;

/// The sort order id a new table's order gets (0 is "unsorted").
pub const FIRST_SORT_ORDER_ID: i64 = 1;

/// The sort order (id 1) of a new table with `columns` (schema `schema`),
/// sorted by `keys`; unsorted when `keys` is empty. A column the table
/// does not have, or of a type that cannot be sorted, is an error naming
/// the column and the fix.
pub fn sort_order(
    table: &str,
    schema: &SchemaRef,
    columns: &[Column],
    keys: &[SortKey],
) -> Result<SortOrder, IcebergError> {
    let step = format!("building the sort order of table {table}");
    let problem = |detail: String| IcebergError::new(IcebergErrorKind::Config, &step, detail);
    if keys.is_empty() {
        return Ok(SortOrder::unsorted_order());
    }
    let mut builder = SortOrder::builder();
    builder.with_order_id(FIRST_SORT_ORDER_ID);
    for key in keys {
        let column = columns
            .iter()
            .find(|c| c.name == key.column)
            .ok_or_else(|| {
                problem(format!(
                    "sort_by \"{key}\": the table has no column \"{}\" (its first messages have \
                     no such field); name a field the messages have, or a metadata column such \
                     as _kafka_timestamp",
                    key.column
                ))
            })?;
        if let Some(detail) = key.type_problem(&column.column_type) {
            return Err(problem(format!("sort_by {detail}")));
        }
        builder.with_sort_field(SortField {
            source_id: column.field_id,
            transform: Transform::Identity,
            direction: if key.descending {
                SortDirection::Descending
            } else {
                SortDirection::Ascending
            },
            null_order: if key.nulls_first {
                NullOrder::First
            } else {
                NullOrder::Last
            },
        });
    }
    builder
        .build(schema)
        .map_err(|e| problem(e.message().to_string()).with_source(e))
}

/// Puts rows in the order of a table's default sort order.
#[derive(Debug, Clone)]
pub(crate) struct RowSorter {
    /// The Arrow column index of each sort field, and its options.
    keys: Vec<(usize, SortOptions)>,
    order_id: i32,
}

impl RowSorter {
    /// The sorter for the table's default sort order over batches of
    /// `arrow` (the table's Arrow schema); `None` when the table is
    /// unsorted or its order is not one topicberg applies (see the module
    /// docs), in which case files are written as the rows come.
    pub(crate) fn for_table(metadata: &TableMetadata, arrow: &ArrowSchemaRef) -> Option<Self> {
        let order = metadata.default_sort_order();
        if order.is_unsorted() {
            return None;
        }
        let mut keys = Vec::with_capacity(order.fields.len());
        for field in &order.fields {
            let index = arrow.fields().iter().position(|f| {
                f.metadata().get(PARQUET_FIELD_ID_META_KEY) == Some(&field.source_id.to_string())
            });
            let applicable = field.transform == Transform::Identity
                && index.is_some_and(|i| !arrow.field(i).data_type().is_nested());
            if !applicable {
                tracing::warn!(
                    table = %metadata.location(),
                    order = %order.order_id,
                    field = %field,
                    "the table's sort order is not one topicberg applies (identity of a \
                     top-level column); its files are written unsorted"
                );
                return None;
            }
            let options = SortOptions {
                descending: field.direction == SortDirection::Descending,
                nulls_first: field.null_order == NullOrder::First,
            };
            keys.push((index.expect("checked above"), options));
        }
        Some(Self {
            keys,
            order_id: i32::try_from(order.order_id).ok()?,
        })
    }

    /// The sort order id the files written in this order carry.
    pub(crate) fn order_id(&self) -> i32 {
        self.order_id
    }

    /// Every row of `batches` as (batch, row), in the sort order (stable:
    /// equal keys keep their arrival order).
    pub(crate) fn order(&self, batches: &[RecordBatch]) -> Result<Vec<(usize, usize)>, ArrowError> {
        let mut places = Vec::new();
        for (b, batch) in batches.iter().enumerate() {
            places.extend((0..batch.num_rows()).map(|row| (b, row)));
        }
        let mut columns: Vec<SortColumn> = Vec::with_capacity(self.keys.len() + 1);
        for (index, options) in &self.keys {
            let parts: Vec<&dyn arrow_array::Array> =
                batches.iter().map(|b| b.column(*index).as_ref()).collect();
            columns.push(SortColumn {
                values: concat(&parts)?,
                options: Some(*options),
            });
        }
        // The arrival order breaks ties, so the sort is stable.
        let arrival: ArrayRef = std::sync::Arc::new(arrow_array::UInt32Array::from_iter_values(
            0..places.len() as u32,
        ));
        columns.push(SortColumn {
            values: arrival,
            options: None,
        });
        let indices = lexsort_to_indices(&columns, None)?;
        Ok(indices
            .values()
            .iter()
            .map(|&i| places[i as usize])
            .collect())
    }

    /// The rows at `places` of `batches`, in that order, as one batch.
    pub(crate) fn gather(
        batches: &[RecordBatch],
        places: &[(usize, usize)],
    ) -> Result<RecordBatch, ArrowError> {
        let refs: Vec<&RecordBatch> = batches.iter().collect();
        interleave_record_batch(&refs, places)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use iceberg::spec::{NestedField, PrimitiveType, Schema as IcebergSchema, Type};

    use super::*;

    fn arrow() -> ArrowSchemaRef {
        let field = |name: &str, ty: DataType, id: i32| {
            Field::new(name, ty, true)
                .with_metadata([(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())].into())
        };
        Arc::new(Schema::new(vec![
            field("id", DataType::Int64, 1),
            field("name", DataType::Utf8, 2),
        ]))
    }

    fn batch(ids: &[Option<i64>], names: &[&str]) -> RecordBatch {
        RecordBatch::try_new(
            arrow(),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(names.to_vec())),
            ],
        )
        .unwrap()
    }

    fn sorter(keys: Vec<(usize, SortOptions)>) -> RowSorter {
        RowSorter { keys, order_id: 1 }
    }

    fn sorted(sorter: &RowSorter, batches: &[RecordBatch]) -> (Vec<Option<i64>>, Vec<String>) {
        let order = sorter.order(batches).unwrap();
        let out = RowSorter::gather(batches, &order).unwrap();
        let ids = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let names = out
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        (
            (0..out.num_rows())
                .map(|i| ids.is_valid(i).then(|| ids.value(i)))
                .collect(),
            (0..out.num_rows())
                .map(|i| names.value(i).to_string())
                .collect(),
        )
    }

    #[test]
    fn rows_of_several_batches_come_out_in_order_ties_in_arrival_order() {
        let batches = [
            batch(&[Some(3), None, Some(1)], &["c", "n", "a1"]),
            batch(&[Some(1), Some(2)], &["a2", "b"]),
        ];
        let asc = sorter(vec![(
            0,
            SortOptions {
                descending: false,
                nulls_first: true,
            },
        )]);
        let (ids, names) = sorted(&asc, &batches);
        assert_eq!(ids, [None, Some(1), Some(1), Some(2), Some(3)]);
        assert_eq!(names, ["n", "a1", "a2", "b", "c"]);
        let desc = sorter(vec![(
            0,
            SortOptions {
                descending: true,
                nulls_first: false,
            },
        )]);
        let (ids, names) = sorted(&desc, &batches);
        assert_eq!(ids, [Some(3), Some(2), Some(1), Some(1), None]);
        assert_eq!(names, ["c", "b", "a1", "a2", "n"]);
    }

    #[test]
    fn the_table_order_is_built_from_the_keys_and_read_back_by_the_writer() {
        let schema = Arc::new(
            IcebergSchema::builder()
                .with_fields(vec![
                    NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                    NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
                ])
                .build()
                .unwrap(),
        );
        let columns = crate::write::schema::columns_of(&schema).unwrap();
        let keys: Vec<SortKey> = ["name desc", "id"]
            .iter()
            .map(|k| k.parse().unwrap())
            .collect();
        let order = sort_order("t", &schema, &columns, &keys).unwrap();
        assert_eq!(order.order_id, 1);
        assert_eq!(order.fields[0].source_id, 2);
        assert_eq!(order.fields[0].direction, SortDirection::Descending);
        assert_eq!(order.fields[0].null_order, NullOrder::Last);
        assert_eq!(order.fields[1].null_order, NullOrder::First);
        let missing: Vec<SortKey> = vec!["region".parse().unwrap()];
        let e = sort_order("t", &schema, &columns, &missing).unwrap_err();
        assert!(e.to_string().contains("no column \"region\""), "{e}");
        assert!(sort_order("t", &schema, &columns, &[])
            .unwrap()
            .is_unsorted());
    }
}

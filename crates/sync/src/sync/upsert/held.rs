//! How an upsert's decoded batch is held on local disk: in fewer bytes
//! than it has in memory, and restored exactly (same schema, field ids,
//! values) when its winning rows are written. Every held byte is written
//! to the page cache and read back once, which was about a tenth of an
//! upsert's CPU (`bench/README.md`).
//!
//! - `_olake_id` (32 hex digits, 36 bytes with its offset) is held as its
//!   16 bytes, a `FixedSizeBinary(16)` column, and written back as hex;
//! - `_op_type` is not held: every decoded row says "c", and the commit
//!   gives each winning row its own ("c" or "u");
//! - `_cdc_timestamp` is not held when the batch's equals its
//!   `_kafka_timestamp` (the decoder writes both from the message
//!   timestamp): the restored batch takes that column twice;
//! - `_olake_timestamp` is not held when it is one value in every row (a
//!   sync gives all its rows the same): the shape keeps that value.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampMicrosecondType;
use arrow_array::{Array, ArrayRef, FixedSizeBinaryArray, RecordBatch, StringArray, UInt32Array};
use arrow_buffer::{Buffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use topicberg_core::columns::{CDC_TIMESTAMP, KAFKA_TIMESTAMP, OLAKE_ID, OLAKE_TIMESTAMP, OP_TYPE};

use super::{KeyHash, SpillError};

/// Bytes of an `_olake_id` held.
const ID_BYTES: i32 = 16;

/// Where one of the decoded batch's columns is in the held batch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// The held column at this position, as it is.
    Held(usize),
    /// `_olake_id`: the held 16-byte column at this position, as hex.
    Id(usize),
    /// `_op_type`: given when restoring.
    OpType,
    /// A copy of the held column at this position (another column's).
    Copy(usize),
    /// The shape's one value (`HeldShape::constant`) in every row.
    Constant,
}

/// A decoded batch's schema, the schema it is held in, and how one
/// becomes the other.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldShape {
    /// The decoded batch's schema, restored exactly.
    schema: SchemaRef,
    /// The schema of the held batch.
    held: SchemaRef,
    /// Per column of `schema`, where it comes from.
    sources: Vec<Source>,
    /// The value of the [`Source::Constant`] column: one row of it.
    constant: Option<ArrayRef>,
}

impl HeldShape {
    /// The shape `batch` is held in.
    pub fn of(batch: &RecordBatch) -> Result<Self, SpillError> {
        let schema = batch.schema();
        let index = |name: &str| schema.index_of(name).ok();
        let id = index(OLAKE_ID).ok_or(SpillError::MissingColumn(OLAKE_ID))?;
        let op_type = index(OP_TYPE).ok_or(SpillError::MissingColumn(OP_TYPE))?;
        let cdc = index(CDC_TIMESTAMP)
            .zip(index(KAFKA_TIMESTAMP))
            .filter(|(cdc, kafka)| batch.column(*cdc) == batch.column(*kafka));
        let constant = index(OLAKE_TIMESTAMP).filter(|i| one_value(batch.column(*i)));
        // The held position of a held column: the columns before it, less
        // those not held (`_cdc_timestamp` when it repeats `_kafka_timestamp`,
        // which is always held).
        let not_held =
            |i: usize| i == op_type || Some(i) == constant || cdc.is_some_and(|c| c.0 == i);
        let held_at = |i: usize| (0..i).filter(|j| !not_held(*j)).count();
        let mut fields = Vec::with_capacity(schema.fields().len());
        let mut sources = Vec::with_capacity(schema.fields().len());
        for (i, field) in schema.fields().iter().enumerate() {
            let source = match cdc {
                _ if i == op_type => Source::OpType,
                _ if Some(i) == constant => Source::Constant,
                Some((cdc, kafka)) if i == cdc => Source::Copy(held_at(kafka)),
                _ if i == id => {
                    let held = Field::new(
                        field.name(),
                        DataType::FixedSizeBinary(ID_BYTES),
                        field.is_nullable(),
                    );
                    fields.push(Arc::new(held));
                    Source::Id(fields.len() - 1)
                }
                _ => {
                    fields.push(Arc::clone(field));
                    Source::Held(fields.len() - 1)
                }
            };
            sources.push(source);
        }
        let held = Schema::new(fields).with_metadata(schema.metadata().clone());
        Ok(HeldShape {
            held: Arc::new(held),
            // A copy of the one row (`take` copies; a slice, and `concat`
            // of one array, would keep the batch's whole column alive for
            // as long as the shape: 512 KiB per held file at 65,536 rows).
            constant: constant
                .map(|i| {
                    arrow_select::take::take(batch.column(i), &UInt32Array::from(vec![0]), None)
                })
                .transpose()
                .map_err(SpillError::arrow(Some("holding _olake_timestamp")))?,
            schema,
            sources,
        })
    }

    /// The schema of the held batches.
    pub fn held_schema(&self) -> &SchemaRef {
        &self.held
    }

    /// `batch` (of this shape) as held, with `ids` its rows' `_olake_id`
    /// bytes (16 per row, in row order).
    pub fn hold(&self, batch: &RecordBatch, ids: &[u8]) -> Result<RecordBatch, SpillError> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.held.fields().len());
        for (i, source) in self.sources.iter().enumerate() {
            match source {
                Source::Held(_) => columns.push(Arc::clone(batch.column(i))),
                Source::Id(_) => {
                    let ids = FixedSizeBinaryArray::try_new(
                        ID_BYTES,
                        Buffer::from(ids),
                        batch.column(i).nulls().cloned(),
                    )
                    .map_err(SpillError::arrow(Some("holding _olake_id")))?;
                    columns.push(Arc::new(ids));
                }
                Source::OpType | Source::Copy(_) | Source::Constant => {}
            }
        }
        RecordBatch::try_new(Arc::clone(&self.held), columns).map_err(SpillError::arrow(None))
    }

    /// The decoded batch back from `held` (a held batch of this shape, or
    /// some of its rows), with `op_types` as its `_op_type`.
    pub fn restore(
        &self,
        held: &RecordBatch,
        op_types: ArrayRef,
    ) -> Result<RecordBatch, SpillError> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.sources.len());
        for source in &self.sources {
            columns.push(match source {
                Source::Held(j) | Source::Copy(j) => Arc::clone(held.column(*j)),
                Source::Id(j) => Arc::new(hex_ids(held.column(*j))?),
                Source::OpType => Arc::clone(&op_types),
                Source::Constant => self.repeat_constant(held.num_rows())?,
            });
        }
        RecordBatch::try_new(Arc::clone(&self.schema), columns).map_err(SpillError::arrow(None))
    }

    /// The constant column's value in `rows` rows.
    fn repeat_constant(&self, rows: usize) -> Result<ArrayRef, SpillError> {
        let one = self.constant.as_ref().ok_or(SpillError::BrokenHeldBatch(
            "a held shape lost its constant",
        ))?;
        let indices = UInt32Array::from(vec![0u32; rows]);
        arrow_select::take::take(one, &indices, None).map_err(SpillError::arrow(None))
    }
}

/// Whether `column` is a microsecond timestamp column with one value in
/// every row (and at least one row, no null).
fn one_value(column: &ArrayRef) -> bool {
    let Some(values) = column.as_primitive_opt::<TimestampMicrosecondType>() else {
        return false;
    };
    let values = values.values();
    values
        .first()
        .is_some_and(|first| values.iter().all(|v| v == first))
        && column.null_count() == 0
}

/// A held `_olake_id` column as its hex digits.
fn hex_ids(column: &ArrayRef) -> Result<StringArray, SpillError> {
    let ids = column
        .as_any()
        .downcast_ref::<FixedSizeBinaryArray>()
        .ok_or(SpillError::BrokenHeldBatch(
            "the held _olake_id column is not 16-byte binary",
        ))?;
    let mut digits = Vec::with_capacity(ids.len() * 32);
    for row in 0..ids.len() {
        let id: &KeyHash = ids
            .value(row)
            .try_into()
            .map_err(|_| SpillError::BrokenHeldBatch("short _olake_id"))?;
        digits.extend_from_slice(&topicberg_core::olake_id_hex(id));
    }
    let offsets = OffsetBuffer::from_lengths(std::iter::repeat_n(32, ids.len()));
    StringArray::try_new(offsets, Buffer::from_vec(digits), ids.nulls().cloned())
        .map_err(SpillError::arrow(Some("restoring _olake_id")))
}

#[cfg(test)]
mod tests {
    use arrow_array::{Int64Array, TimestampMicrosecondArray};
    use arrow_schema::TimeUnit;
    use std::collections::HashMap;

    use super::*;

    fn decoded(cdc: [Option<i64>; 2]) -> RecordBatch {
        decoded_at(cdc, [Some(7), Some(7)])
    }

    fn decoded_at(cdc: [Option<i64>; 2], olake: [Option<i64>; 2]) -> RecordBatch {
        let ts = || DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()));
        let id_field = Field::new(OLAKE_ID, DataType::Utf8, true).with_metadata(HashMap::from([(
            "PARQUET:field_id".to_string(),
            "7".to_string(),
        )]));
        let schema = Schema::new(vec![
            Field::new(CDC_TIMESTAMP, ts(), true),
            Field::new("id", DataType::Int64, true),
            id_field,
            Field::new(OP_TYPE, DataType::Utf8, true),
            Field::new(KAFKA_TIMESTAMP, ts(), true),
            Field::new(OLAKE_TIMESTAMP, ts(), true),
        ]);
        let ts_values = [Some(5), None];
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(TimestampMicrosecondArray::from(cdc.to_vec()).with_timezone("+00:00")),
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![
                    "000102030405060708090a0b0c0d0e0f",
                    "ffeeddccbbaa99887766554433221100",
                ])),
                Arc::new(StringArray::from(vec!["c", "c"])),
                Arc::new(
                    TimestampMicrosecondArray::from(ts_values.to_vec()).with_timezone("+00:00"),
                ),
                Arc::new(TimestampMicrosecondArray::from(olake.to_vec()).with_timezone("+00:00")),
            ],
        )
        .unwrap()
    }

    fn ids(batch: &RecordBatch) -> Vec<u8> {
        let column = batch.column_by_name(OLAKE_ID).unwrap();
        let hex = column.as_any().downcast_ref::<StringArray>().unwrap();
        hex.iter()
            .flat_map(|h| topicberg_core::olake_id_bytes(h.unwrap().as_bytes()).unwrap())
            .collect()
    }

    fn round_trip(batch: &RecordBatch) -> (HeldShape, RecordBatch) {
        let shape = HeldShape::of(batch).unwrap();
        let held = shape.hold(batch, &ids(batch)).unwrap();
        assert_eq!(held.schema(), *shape.held_schema());
        let ops: ArrayRef = Arc::clone(batch.column_by_name(OP_TYPE).unwrap());
        (shape.clone(), shape.restore(&held, ops).unwrap())
    }

    #[test]
    fn a_held_batch_is_restored_exactly_with_its_field_metadata() {
        let batch = decoded([Some(5), None]);
        let (shape, restored) = round_trip(&batch);
        assert_eq!(restored, batch);
        let held: Vec<&str> = shape
            .held
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(
            held,
            ["id", OLAKE_ID, KAFKA_TIMESTAMP],
            "op type, cdc and the constant olake timestamp not held"
        );
        assert_eq!(
            shape.held.field(1).data_type(),
            &DataType::FixedSizeBinary(16)
        );
    }

    #[test]
    fn a_cdc_timestamp_unlike_the_kafka_timestamp_is_held_as_it_is() {
        let batch = decoded([Some(5), Some(9)]);
        let (shape, restored) = round_trip(&batch);
        assert_eq!(restored, batch);
        assert!(shape.held.field_with_name(CDC_TIMESTAMP).is_ok());
        assert_ne!(shape, HeldShape::of(&decoded([Some(5), None])).unwrap());
    }

    #[test]
    fn an_olake_timestamp_of_several_values_or_a_null_is_held_and_its_value_is_part_of_the_shape() {
        for olake in [[Some(7), Some(8)], [Some(7), None]] {
            let batch = decoded_at([Some(5), None], olake);
            let (shape, restored) = round_trip(&batch);
            assert_eq!(restored, batch);
            assert!(shape.held.field_with_name(OLAKE_TIMESTAMP).is_ok());
        }
        let at = |v| HeldShape::of(&decoded_at([Some(5), None], [Some(v), Some(v)])).unwrap();
        assert_ne!(
            at(7),
            at(8),
            "a batch of another constant starts a new file"
        );
        let batch = decoded_at([Some(5), None], [Some(8), Some(8)]);
        assert_eq!(round_trip(&batch).1, batch);
    }

    #[test]
    fn the_shape_keeps_a_copy_of_the_constant_not_its_batch_column() {
        // 10,000 rows of the first: an `_olake_timestamp` column of 80,000 bytes.
        let batch = arrow_select::take::take_record_batch(
            &decoded_at([Some(5), None], [Some(7), Some(7)]),
            &UInt32Array::from(vec![0; 10_000]),
        )
        .unwrap();
        let shape = HeldShape::of(&batch).unwrap();
        let constant = shape.constant.as_ref().expect("a constant");
        assert_eq!(constant.len(), 1);
        assert!(
            constant.get_buffer_memory_size() < 1024,
            "the shape holds {} bytes of the batch's column",
            constant.get_buffer_memory_size()
        );
    }

    #[test]
    fn restoring_some_rows_gives_them_their_own_op_types() {
        let batch = decoded([Some(5), None]);
        let shape = HeldShape::of(&batch).unwrap();
        let held = shape.hold(&batch, &ids(&batch)).unwrap().slice(1, 1);
        let restored = shape
            .restore(&held, Arc::new(StringArray::from(vec!["u"])))
            .unwrap();
        assert_eq!(restored.num_rows(), 1);
        let column = |name: &str| restored.column_by_name(name).unwrap().clone();
        let text = |a: ArrayRef| {
            a.as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(0)
                .to_string()
        };
        assert_eq!(text(column(OLAKE_ID)), "ffeeddccbbaa99887766554433221100");
        assert_eq!(text(column(OP_TYPE)), "u");
        assert!(column(CDC_TIMESTAMP).is_null(0));
        assert_eq!(column(OLAKE_TIMESTAMP).len(), 1);
    }
}

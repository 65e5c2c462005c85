//! One column's values while a batch is being decoded.
//!
//! Plain vectors plus Arrow's null and boolean buffer builders, rather than
//! arrow-array's typed builders, because a failed record must be undone:
//! every part here can be truncated back to a row count, and the finished
//! vectors become Arrow buffers without a copy.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray, Float32Array,
    Float64Array, Int32Array, Int64Array, LargeBinaryArray, ListArray, MapArray, StringArray,
    StructArray, Time64MicrosecondArray, TimestampMicrosecondArray,
};
use arrow_buffer::{BooleanBufferBuilder, Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::DataType;
use base64::Engine as _;

use crate::columns::{ColumnType, UTC};
use crate::olake_id::KeyValue;

/// The string bytes of one batch column would pass `i32::MAX`.
#[derive(Debug)]
pub(crate) struct Overflow;

enum Values {
    /// `long`, `timestamptz`, `timestamp` (microseconds), `time`
    /// (microseconds since midnight).
    I64(Vec<i64>),
    /// `int`, `date` (days).
    I32(Vec<i32>),
    F64(Vec<f64>),
    F32(Vec<f32>),
    Bool(BooleanBufferBuilder),
    /// `string` and `json`: Arrow `Utf8` offsets (always one more than rows)
    /// and bytes; only ever appended from `&str`, so always UTF-8.
    Utf8 {
        offsets: Vec<i32>,
        bytes: Vec<u8>,
    },
    /// `binary`: Arrow `LargeBinary` offsets and bytes.
    Binary {
        offsets: Vec<i64>,
        bytes: Vec<u8>,
    },
    /// `uuid`: 16 bytes per row.
    Uuid(Vec<u8>),
    /// `decimal`: unscaled values.
    I128(Vec<i128>),
    /// `struct`: one buffer per field, each one value per row.
    Struct(Vec<ColumnBuffer>),
    /// `list`: offsets into the element buffer.
    List {
        offsets: Vec<i32>,
        element: Box<ColumnBuffer>,
    },
    /// `map`: offsets into the key and value buffers.
    Map {
        offsets: Vec<i32>,
        keys: Box<ColumnBuffer>,
        values: Box<ColumnBuffer>,
    },
}

pub(crate) struct ColumnBuffer {
    pub(crate) ty: ColumnType,
    nulls: NullBufferBuilder,
    values: Values,
}

impl ColumnBuffer {
    pub(crate) fn new(ty: ColumnType) -> Self {
        let values = match &ty {
            ColumnType::Long
            | ColumnType::TimestampTz
            | ColumnType::Timestamp
            | ColumnType::Time => Values::I64(Vec::new()),
            ColumnType::Int | ColumnType::Date => Values::I32(Vec::new()),
            ColumnType::Double => Values::F64(Vec::new()),
            ColumnType::Float => Values::F32(Vec::new()),
            ColumnType::Boolean => Values::Bool(BooleanBufferBuilder::new(0)),
            ColumnType::String | ColumnType::Json => Values::Utf8 {
                offsets: vec![0],
                bytes: Vec::new(),
            },
            ColumnType::Binary => Values::Binary {
                offsets: vec![0],
                bytes: Vec::new(),
            },
            ColumnType::Uuid => Values::Uuid(Vec::new()),
            ColumnType::Decimal { .. } => Values::I128(Vec::new()),
            ColumnType::Struct(fields) => Values::Struct(
                fields
                    .iter()
                    .map(|f| ColumnBuffer::new(f.ty.clone()))
                    .collect(),
            ),
            ColumnType::List(element) => Values::List {
                offsets: vec![0],
                element: Box::new(ColumnBuffer::new(element.ty.clone())),
            },
            ColumnType::Map(kv) => Values::Map {
                offsets: vec![0],
                keys: Box::new(ColumnBuffer::new(kv.key.ty.clone())),
                values: Box::new(ColumnBuffer::new(kv.value.ty.clone())),
            },
        };
        Self {
            ty,
            nulls: NullBufferBuilder::new(0),
            values,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.nulls.len()
    }

    #[inline]
    pub(crate) fn push_null(&mut self) {
        self.nulls.append_null();
        match &mut self.values {
            Values::I64(v) => v.push(0),
            Values::I32(v) => v.push(0),
            Values::F64(v) => v.push(0.0),
            Values::F32(v) => v.push(0.0),
            Values::Bool(v) => v.append(false),
            Values::Utf8 { offsets, bytes } => offsets.push(bytes.len() as i32),
            Values::Binary { offsets, bytes } => offsets.push(bytes.len() as i64),
            Values::Uuid(v) => v.extend_from_slice(&[0; 16]),
            Values::I128(v) => v.push(0),
            Values::Struct(children) => children.iter_mut().for_each(ColumnBuffer::push_null),
            Values::List { offsets, .. } | Values::Map { offsets, .. } => {
                let end = *offsets.last().expect("one offset per row and one more");
                offsets.push(end);
            }
        }
    }

    /// A `long`, `timestamptz`, `timestamp` or `time` value.
    #[inline]
    pub(crate) fn push_i64(&mut self, value: i64) {
        match &mut self.values {
            Values::I64(v) => v.push(value),
            _ => unreachable!("push_i64 on a {} column", self.ty),
        }
        self.nulls.append_non_null();
    }

    /// An `int` or `date` value.
    #[inline]
    pub(crate) fn push_i32(&mut self, value: i32) {
        match &mut self.values {
            Values::I32(v) => v.push(value),
            _ => unreachable!("push_i32 on a {} column", self.ty),
        }
        self.nulls.append_non_null();
    }

    /// A `decimal` value (unscaled).
    #[inline]
    pub(crate) fn push_i128(&mut self, value: i128) {
        match &mut self.values {
            Values::I128(v) => v.push(value),
            _ => unreachable!("push_i128 on a {} column", self.ty),
        }
        self.nulls.append_non_null();
    }

    #[inline]
    pub(crate) fn push_f64(&mut self, value: f64) {
        match &mut self.values {
            Values::F64(v) => v.push(value),
            _ => unreachable!("push_f64 on a {} column", self.ty),
        }
        self.nulls.append_non_null();
    }

    #[inline]
    pub(crate) fn push_f32(&mut self, value: f32) {
        match &mut self.values {
            Values::F32(v) => v.push(value),
            _ => unreachable!("push_f32 on a {} column", self.ty),
        }
        self.nulls.append_non_null();
    }

    #[inline]
    pub(crate) fn push_bool(&mut self, value: bool) {
        match &mut self.values {
            Values::Bool(v) => v.append(value),
            _ => unreachable!("push_bool on a {} column", self.ty),
        }
        self.nulls.append_non_null();
    }

    #[inline]
    pub(crate) fn push_str(&mut self, value: &str) -> Result<(), Overflow> {
        self.push_utf8(value.as_bytes())
    }

    /// A string value from bytes the caller has checked are UTF-8 (the
    /// Arrow array checks them again when the batch is finished).
    #[inline]
    pub(crate) fn push_utf8(&mut self, value: &[u8]) -> Result<(), Overflow> {
        debug_assert!(std::str::from_utf8(value).is_ok());
        let (offsets, bytes) = self.utf8();
        let end = i32::try_from(bytes.len() + value.len()).map_err(|_| Overflow)?;
        bytes.extend_from_slice(value);
        offsets.push(end);
        self.nulls.append_non_null();
        Ok(())
    }

    /// A `binary` value.
    #[inline]
    pub(crate) fn push_bytes(&mut self, value: &[u8]) {
        match &mut self.values {
            Values::Binary { offsets, bytes } => {
                bytes.extend_from_slice(value);
                offsets.push(bytes.len() as i64);
            }
            _ => unreachable!("push_bytes on a {} column", self.ty),
        }
        self.nulls.append_non_null();
    }

    /// A `uuid` value.
    #[inline]
    pub(crate) fn push_uuid(&mut self, value: [u8; 16]) {
        match &mut self.values {
            Values::Uuid(v) => v.extend_from_slice(&value),
            _ => unreachable!("push_uuid on a {} column", self.ty),
        }
        self.nulls.append_non_null();
    }

    /// A struct's field buffers: append one value (or null) to each, then
    /// [`ColumnBuffer::close_row`].
    pub(crate) fn struct_fields(&mut self) -> &mut [ColumnBuffer] {
        match &mut self.values {
            Values::Struct(children) => children,
            _ => unreachable!("struct_fields on a {} column", self.ty),
        }
    }

    /// A list's element buffer: append the elements, then
    /// [`ColumnBuffer::close_row`].
    pub(crate) fn list_element(&mut self) -> &mut ColumnBuffer {
        match &mut self.values {
            Values::List { element, .. } => element,
            _ => unreachable!("list_element on a {} column", self.ty),
        }
    }

    /// A map's key and value buffers: append the entries, then
    /// [`ColumnBuffer::close_row`].
    pub(crate) fn map_entries(&mut self) -> (&mut ColumnBuffer, &mut ColumnBuffer) {
        match &mut self.values {
            Values::Map { keys, values, .. } => (keys, values),
            _ => unreachable!("map_entries on a {} column", self.ty),
        }
    }

    /// Ends a non-null struct, list or map row whose parts were appended.
    pub(crate) fn close_row(&mut self) -> Result<(), Overflow> {
        match &mut self.values {
            Values::Struct(_) => {}
            Values::List { offsets, element } => {
                offsets.push(i32::try_from(element.len()).map_err(|_| Overflow)?)
            }
            Values::Map { offsets, keys, .. } => {
                offsets.push(i32::try_from(keys.len()).map_err(|_| Overflow)?)
            }
            _ => unreachable!("close_row on a {} column", self.ty),
        }
        self.nulls.append_non_null();
        Ok(())
    }

    /// `key` as standard base64 with padding, written straight into the bytes.
    pub(crate) fn push_base64(&mut self, key: &[u8]) -> Result<(), Overflow> {
        let (offsets, bytes) = self.utf8();
        let start = bytes.len();
        let encoded = base64::encoded_len(key.len(), true).ok_or(Overflow)?;
        let end = i32::try_from(start + encoded).map_err(|_| Overflow)?;
        bytes.resize(start + encoded, 0);
        base64::engine::general_purpose::STANDARD
            .encode_slice(key, &mut bytes[start..])
            .expect("buffer sized by encoded_len");
        offsets.push(end);
        self.nulls.append_non_null();
        Ok(())
    }

    fn utf8(&mut self) -> (&mut Vec<i32>, &mut Vec<u8>) {
        match &mut self.values {
            Values::Utf8 { offsets, bytes } => (offsets, bytes),
            _ => unreachable!("string value on a {} column", self.ty),
        }
    }

    /// Drops every row from `rows` on.
    ///
    /// A struct, list or map also drops the parts of a row that was being
    /// read but not closed (children or elements beyond its rows).
    pub(crate) fn truncate(&mut self, rows: usize) {
        if rows > self.len() {
            return;
        }
        self.nulls.truncate(rows);
        match &mut self.values {
            Values::I64(v) => v.truncate(rows),
            Values::I32(v) => v.truncate(rows),
            Values::F64(v) => v.truncate(rows),
            Values::F32(v) => v.truncate(rows),
            Values::Bool(v) => v.truncate(rows),
            Values::Utf8 { offsets, bytes } => {
                bytes.truncate(offsets[rows] as usize);
                offsets.truncate(rows + 1);
            }
            Values::Binary { offsets, bytes } => {
                bytes.truncate(offsets[rows] as usize);
                offsets.truncate(rows + 1);
            }
            Values::Uuid(v) => v.truncate(rows * 16),
            Values::I128(v) => v.truncate(rows),
            Values::Struct(children) => children.iter_mut().for_each(|c| c.truncate(rows)),
            Values::List { offsets, element } => {
                element.truncate(offsets[rows] as usize);
                offsets.truncate(rows + 1);
            }
            Values::Map {
                offsets,
                keys,
                values,
            } => {
                keys.truncate(offsets[rows] as usize);
                values.truncate(offsets[rows] as usize);
                offsets.truncate(rows + 1);
            }
        }
    }

    /// Drops the last row (a duplicate key's earlier value).
    pub(crate) fn pop(&mut self) {
        self.truncate(self.len().saturating_sub(1));
    }

    /// The value at `row`, for hashing a dedup key; `None` for a nested
    /// column (never a key column).
    pub(crate) fn key_value(&self, row: usize) -> KeyValue<'_> {
        if !self.nulls.is_valid(row) {
            return KeyValue::Null;
        }
        match (&self.values, &self.ty) {
            (Values::I64(v), ColumnType::TimestampTz) => KeyValue::TimestampMicros(v[row]),
            (Values::I64(v), ColumnType::Timestamp) => KeyValue::Timestamp(v[row]),
            (Values::I64(v), ColumnType::Time) => KeyValue::Time(v[row]),
            (Values::I64(v), _) => KeyValue::Long(v[row]),
            (Values::I32(v), ColumnType::Date) => KeyValue::Date(v[row]),
            (Values::I32(v), _) => KeyValue::Int(v[row]),
            (Values::F64(v), _) => KeyValue::Double(v[row]),
            (Values::F32(v), _) => KeyValue::Double(f64::from(v[row])),
            (Values::Bool(v), _) => KeyValue::Boolean(v.get_bit(row)),
            (Values::Utf8 { offsets, bytes }, _) => {
                let text = &bytes[offsets[row] as usize..offsets[row + 1] as usize];
                KeyValue::String(std::str::from_utf8(text).expect("appended from &str"))
            }
            (Values::Binary { offsets, bytes }, _) => {
                KeyValue::Bytes(&bytes[offsets[row] as usize..offsets[row + 1] as usize])
            }
            (Values::Uuid(v), _) => KeyValue::Bytes(&v[row * 16..row * 16 + 16]),
            (Values::I128(v), ColumnType::Decimal { scale, .. }) => {
                KeyValue::Decimal(v[row], *scale)
            }
            (Values::I128(v), _) => KeyValue::Decimal(v[row], 0),
            (Values::Struct(_) | Values::List { .. } | Values::Map { .. }, _) => {
                unreachable!("a {} column is never a key column", self.ty)
            }
        }
    }

    /// Room for `rows` values in all, without growing on the way: values
    /// of a fixed width exactly, bytes and nested values projected from
    /// the ones held (nothing projected while the column is empty).
    pub(crate) fn reserve(&mut self, rows: usize) {
        let held = self.len();
        let more = rows.saturating_sub(held);
        if more == 0 {
            return;
        }
        // Bytes or nested values for `rows`, at the rate seen so far, with
        // an eighth more for the spread.
        let projected = |len: usize| {
            let rate = len as f64 / held.max(1) as f64;
            ((rows as f64 * rate) * 1.125) as usize
        };
        match &mut self.values {
            Values::I64(v) => v.reserve(more),
            Values::I32(v) => v.reserve(more),
            Values::F64(v) => v.reserve(more),
            Values::F32(v) => v.reserve(more),
            Values::Bool(v) => v.reserve(more),
            Values::I128(v) => v.reserve(more),
            Values::Uuid(v) => v.reserve(more * 16),
            Values::Utf8 { offsets, bytes } => {
                offsets.reserve(more);
                reserve_to(bytes, projected(bytes.len()));
            }
            Values::Binary { offsets, bytes } => {
                offsets.reserve(more);
                reserve_to(bytes, projected(bytes.len()));
            }
            Values::Struct(children) => children.iter_mut().for_each(|c| c.reserve(rows)),
            Values::List { offsets, element } => {
                offsets.reserve(more);
                let elements = projected(element.len());
                element.reserve(elements);
            }
            Values::Map {
                offsets,
                keys,
                values,
            } => {
                offsets.reserve(more);
                let entries = projected(keys.len());
                keys.reserve(entries);
                values.reserve(entries);
            }
        }
    }

    /// Roughly the bytes the column holds.
    pub(crate) fn approx_bytes(&self) -> usize {
        let rows = self.len();
        let values = match &self.values {
            Values::I64(_) | Values::F64(_) => rows * 8,
            Values::I32(_) | Values::F32(_) => rows * 4,
            Values::Bool(_) => rows.div_ceil(8),
            Values::Utf8 { bytes, .. } => rows * 4 + bytes.len(),
            Values::Binary { bytes, .. } => rows * 8 + bytes.len(),
            Values::Uuid(v) => v.len(),
            Values::I128(_) => rows * 16,
            Values::Struct(children) => children.iter().map(ColumnBuffer::approx_bytes).sum(),
            Values::List { element, .. } => rows * 4 + element.approx_bytes(),
            Values::Map { keys, values, .. } => {
                rows * 4 + keys.approx_bytes() + values.approx_bytes()
            }
        };
        values + self.nulls.as_slice().map_or(0, <[u8]>::len)
    }

    /// The column as an Arrow array; the buffer starts over, empty, with
    /// room for as many rows as this batch had.
    pub(crate) fn finish(&mut self) -> ArrayRef {
        let nulls = self.nulls.finish();
        let ty = &self.ty;
        match &mut self.values {
            Values::I64(v) => {
                let values = ScalarBuffer::from(take(v));
                match ty {
                    ColumnType::TimestampTz => {
                        Arc::new(TimestampMicrosecondArray::new(values, nulls).with_timezone(UTC))
                    }
                    ColumnType::Timestamp => {
                        Arc::new(TimestampMicrosecondArray::new(values, nulls))
                    }
                    ColumnType::Time => Arc::new(Time64MicrosecondArray::new(values, nulls)),
                    _ => Arc::new(Int64Array::new(values, nulls)),
                }
            }
            Values::I32(v) => {
                let values = ScalarBuffer::from(take(v));
                if *ty == ColumnType::Date {
                    Arc::new(Date32Array::new(values, nulls))
                } else {
                    Arc::new(Int32Array::new(values, nulls))
                }
            }
            Values::F64(v) => Arc::new(Float64Array::new(ScalarBuffer::from(take(v)), nulls)),
            Values::F32(v) => Arc::new(Float32Array::new(ScalarBuffer::from(take(v)), nulls)),
            Values::Bool(v) => Arc::new(BooleanArray::new(v.finish(), nulls)),
            Values::Utf8 { offsets, bytes } => {
                let finished = take(offsets);
                offsets.push(0);
                let offsets = OffsetBuffer::new(ScalarBuffer::from(finished));
                Arc::new(StringArray::new(
                    offsets,
                    Buffer::from_vec(take(bytes)),
                    nulls,
                ))
            }
            Values::Binary { offsets, bytes } => {
                let finished = take(offsets);
                offsets.push(0);
                let offsets = OffsetBuffer::new(ScalarBuffer::from(finished));
                Arc::new(LargeBinaryArray::new(
                    offsets,
                    Buffer::from_vec(take(bytes)),
                    nulls,
                ))
            }
            Values::Uuid(v) => Arc::new(FixedSizeBinaryArray::new(
                16,
                Buffer::from_vec(take(v)),
                nulls,
            )),
            Values::I128(v) => {
                let array = Decimal128Array::new(ScalarBuffer::from(take(v)), nulls);
                match ty {
                    ColumnType::Decimal { precision, scale } => Arc::new(
                        array
                            .with_precision_and_scale(*precision, *scale as i8)
                            .expect("precision and scale checked when the column was made"),
                    ),
                    _ => Arc::new(array),
                }
            }
            Values::Struct(children) => {
                let DataType::Struct(fields) = ty.arrow_type() else {
                    unreachable!("a struct column's type is a struct")
                };
                let arrays = children.iter_mut().map(ColumnBuffer::finish).collect();
                Arc::new(StructArray::new(fields, arrays, nulls))
            }
            Values::List { offsets, element } => {
                let DataType::List(field) = ty.arrow_type() else {
                    unreachable!("a list column's type is a list")
                };
                let finished = take(offsets);
                offsets.push(0);
                let offsets = OffsetBuffer::new(ScalarBuffer::from(finished));
                Arc::new(ListArray::new(field, offsets, element.finish(), nulls))
            }
            Values::Map {
                offsets,
                keys,
                values,
            } => {
                let DataType::Map(field, sorted) = ty.arrow_type() else {
                    unreachable!("a map column's type is a map")
                };
                let DataType::Struct(kv) = field.data_type() else {
                    unreachable!("a map's entries are a struct")
                };
                let entries =
                    StructArray::new(kv.clone(), vec![keys.finish(), values.finish()], None);
                let finished = take(offsets);
                offsets.push(0);
                let offsets = OffsetBuffer::new(ScalarBuffer::from(finished));
                Arc::new(MapArray::new(field, offsets, entries, nulls, sorted))
            }
        }
    }
}

/// Capacity for `len` items in all (no more than asked: a reservation
/// below the held length does nothing).
fn reserve_to<T>(v: &mut Vec<T>, len: usize) {
    v.reserve(len.saturating_sub(v.len()));
}

/// Takes the vector, leaving an empty one with the same capacity.
fn take<T>(v: &mut Vec<T>) -> Vec<T> {
    let capacity = v.capacity();
    std::mem::replace(v, Vec::with_capacity(capacity))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::NestedField;

    fn capacities(buffer: &ColumnBuffer) -> Vec<usize> {
        match &buffer.values {
            Values::I64(v) => vec![v.capacity()],
            Values::Utf8 { offsets, bytes } => vec![offsets.capacity(), bytes.capacity()],
            Values::Struct(children) => children.iter().flat_map(capacities).collect(),
            _ => unreachable!("only the types of this test"),
        }
    }

    #[test]
    fn reserve_makes_room_for_the_batch_so_that_filling_it_does_not_grow_the_buffers() {
        let nested =
            ColumnType::Struct(Arc::from([NestedField::optional(1, "n", ColumnType::Long)]));
        let mut columns = [
            ColumnBuffer::new(ColumnType::Long),
            ColumnBuffer::new(ColumnType::String),
            ColumnBuffer::new(nested),
        ];
        let fill = |columns: &mut [ColumnBuffer], rows: std::ops::Range<i64>| {
            for row in rows {
                columns[0].push_i64(row);
                columns[1].push_utf8(b"ten bytes!").unwrap();
                columns[2].push_null();
            }
        };
        fill(&mut columns, 0..1_024);
        columns.iter_mut().for_each(|c| c.reserve(10_000));
        let reserved: Vec<Vec<usize>> = columns.iter().map(capacities).collect();
        assert!(reserved[0][0] >= 10_000, "{reserved:?}");
        assert!(
            reserved[1][0] >= 10_001 && reserved[1][1] >= 100_000,
            "{reserved:?}"
        );
        assert!(reserved[2][0] >= 10_000, "{reserved:?}");
        fill(&mut columns, 1_024..10_000);
        let after: Vec<Vec<usize>> = columns.iter().map(capacities).collect();
        assert_eq!(after, reserved, "filling the batch grew a buffer");
        // The finished column holds every value, in order.
        let strings = columns[1].finish();
        assert_eq!(strings.len(), 10_000);
        let longs = columns[0].finish();
        let longs = longs.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(longs.value(9_999), 9_999);
    }

    #[test]
    fn reserve_on_an_empty_column_projects_no_bytes() {
        let mut column = ColumnBuffer::new(ColumnType::String);
        column.reserve(1_000);
        let held = capacities(&column);
        assert!(held[0] >= 1_000, "{held:?}");
        assert_eq!(held[1], 0, "bytes reserved before any value was seen");
    }
}

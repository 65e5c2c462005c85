//! One column's values while a batch is being decoded.
//!
//! Plain vectors plus Arrow's null and boolean buffer builders, rather than
//! arrow-array's typed builders, because a failed record must be undone:
//! every part here can be truncated back to a row count, and the finished
//! vectors become Arrow buffers without a copy.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float32Array, Float64Array, Int32Array, Int64Array, StringArray,
    TimestampMicrosecondArray,
};
use arrow_buffer::{BooleanBufferBuilder, Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use base64::Engine as _;

use crate::columns::{ColumnType, UTC};
use crate::olake_id::KeyValue;

/// The string bytes of one batch column would pass `i32::MAX`.
#[derive(Debug)]
pub(crate) struct Overflow;

enum Values {
    /// `long` and `timestamptz` (microseconds).
    I64(Vec<i64>),
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
}

pub(crate) struct ColumnBuffer {
    pub(crate) ty: ColumnType,
    nulls: NullBufferBuilder,
    values: Values,
}

impl ColumnBuffer {
    pub(crate) fn new(ty: ColumnType) -> Self {
        let values = match ty {
            ColumnType::Long | ColumnType::TimestampTz => Values::I64(Vec::new()),
            ColumnType::Int => Values::I32(Vec::new()),
            ColumnType::Double => Values::F64(Vec::new()),
            ColumnType::Float => Values::F32(Vec::new()),
            ColumnType::Boolean => Values::Bool(BooleanBufferBuilder::new(0)),
            ColumnType::String | ColumnType::Json => Values::Utf8 {
                offsets: vec![0],
                bytes: Vec::new(),
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
        }
    }

    /// A `long` or `timestamptz` value.
    #[inline]
    pub(crate) fn push_i64(&mut self, value: i64) {
        match &mut self.values {
            Values::I64(v) => v.push(value),
            _ => unreachable!("push_i64 on a {} column", self.ty),
        }
        self.nulls.append_non_null();
    }

    #[inline]
    pub(crate) fn push_i32(&mut self, value: i32) {
        match &mut self.values {
            Values::I32(v) => v.push(value),
            _ => unreachable!("push_i32 on a {} column", self.ty),
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
        let (offsets, bytes) = self.utf8();
        let end = i32::try_from(bytes.len() + value.len()).map_err(|_| Overflow)?;
        bytes.extend_from_slice(value.as_bytes());
        offsets.push(end);
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
    pub(crate) fn truncate(&mut self, rows: usize) {
        if rows >= self.len() {
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
        }
    }

    /// Drops the last row (a duplicate key's earlier value).
    pub(crate) fn pop(&mut self) {
        self.truncate(self.len().saturating_sub(1));
    }

    /// The value at `row`, for hashing a dedup key.
    pub(crate) fn key_value(&self, row: usize) -> KeyValue<'_> {
        if !self.nulls.is_valid(row) {
            return KeyValue::Null;
        }
        match (&self.values, self.ty) {
            (Values::I64(v), ColumnType::TimestampTz) => KeyValue::TimestampMicros(v[row]),
            (Values::I64(v), _) => KeyValue::Long(v[row]),
            (Values::I32(v), _) => KeyValue::Int(v[row]),
            (Values::F64(v), _) => KeyValue::Double(v[row]),
            (Values::F32(v), _) => KeyValue::Double(f64::from(v[row])),
            (Values::Bool(v), _) => KeyValue::Boolean(v.get_bit(row)),
            (Values::Utf8 { offsets, bytes }, _) => {
                let text = &bytes[offsets[row] as usize..offsets[row + 1] as usize];
                KeyValue::String(std::str::from_utf8(text).expect("appended from &str"))
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
        };
        values + self.nulls.as_slice().map_or(0, <[u8]>::len)
    }

    /// The column as an Arrow array; the buffer starts over, empty, with
    /// room for as many rows as this batch had.
    pub(crate) fn finish(&mut self) -> ArrayRef {
        let nulls = self.nulls.finish();
        match &mut self.values {
            Values::I64(v) => {
                let values = ScalarBuffer::from(take(v));
                if self.ty == ColumnType::TimestampTz {
                    Arc::new(TimestampMicrosecondArray::new(values, nulls).with_timezone(UTC))
                } else {
                    Arc::new(Int64Array::new(values, nulls))
                }
            }
            Values::I32(v) => Arc::new(Int32Array::new(ScalarBuffer::from(take(v)), nulls)),
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
        }
    }
}

/// Takes the vector, leaving an empty one with the same capacity.
fn take<T>(v: &mut Vec<T>) -> Vec<T> {
    let capacity = v.capacity();
    std::mem::replace(v, Vec::with_capacity(capacity))
}

//! A writer schema compiled against the table's columns: for each value,
//! how to read it and how to store it ([`Op`]). Compiled once per schema
//! id and column set; the reader then only follows the plan.

use std::sync::Arc;

use super::schema::AvroType;
use crate::columns::ColumnType;
use crate::decode::schema_error::SchemaError;

/// How one value is read and stored. The column is known to hold it (see
/// [`crate::decode::fit`]): compiling never widens or guesses.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Avro `null`: a null.
    Null,
    Boolean,
    /// `int` into an `int` column.
    Int,
    /// `int` into a `long` column.
    IntToLong,
    /// `long` into a `long` column.
    Long,
    Float,
    FloatToDouble,
    Double,
    String,
    Bytes,
    Fixed(usize),
    /// An enum, stored as its symbol.
    Enum(Arc<[String]>),
    /// A decimal (bytes, or fixed of that size) checked against the
    /// column's precision.
    Decimal {
        fixed: Option<usize>,
        precision: u8,
    },
    UuidText,
    UuidFixed,
    /// Days (`date`).
    Date,
    /// `time-millis`, stored in microseconds.
    TimeMillis,
    /// A `long` of microseconds (`time-micros`, `timestamp-micros`, ...).
    Micros,
    /// A `long` of milliseconds stored in microseconds.
    Millis,
    /// `[null, T]`: the null branch's index (0 or 1) and `T`.
    Optional {
        null_index: i64,
        inner: Box<Op>,
    },
    /// Another union, into `struct<tag, field0, ...>`: per writer branch,
    /// `None` (null) or the struct child and op.
    Union(Vec<Option<(usize, Op)>>),
    /// A record into a struct column.
    Record {
        fields: Vec<FieldOp>,
        absent: Vec<usize>,
    },
    Array(Box<Op>),
    Map(Box<Op>),
}

/// One writer field: how to read it and which buffer takes it (`None`:
/// read past it).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldOp {
    pub op: Op,
    pub target: Option<usize>,
}

/// How to read `writer` values into a `column` that holds them. `Err`
/// only when the column does not (a caller bug or a stale plan).
pub fn compile(writer: &AvroType, column: &ColumnType) -> Result<Op, SchemaError> {
    use AvroType as A;
    use ColumnType as C;
    if let Some(inner) = writer.optional_branch() {
        let A::Union(branches) = writer else {
            unreachable!("optional_branch is a union's")
        };
        let null_index = if branches[0] == A::Null { 0 } else { 1 };
        return Ok(Op::Optional {
            null_index,
            inner: Box::new(compile(inner, column)?),
        });
    }
    Ok(match (writer, column) {
        (A::Null, _) => Op::Null,
        (A::Boolean, C::Boolean) => Op::Boolean,
        (A::Int, C::Int) => Op::Int,
        (A::Int, C::Long) => Op::IntToLong,
        (A::Long, C::Long) => Op::Long,
        (A::Float, C::Float) => Op::Float,
        (A::Float, C::Double) => Op::FloatToDouble,
        (A::Double, C::Double) => Op::Double,
        (A::String, C::String) => Op::String,
        (A::Enum(symbols), C::String) => Op::Enum(symbols.clone()),
        (A::Bytes, C::Binary) => Op::Bytes,
        (A::Fixed(n), C::Binary) => Op::Fixed(*n),
        (
            A::Decimal {
                fixed, scale: ws, ..
            },
            C::Decimal { precision, scale },
        ) if ws == scale => Op::Decimal {
            fixed: *fixed,
            precision: *precision,
        },
        (A::Uuid { fixed: false }, C::Uuid) => Op::UuidText,
        (A::Uuid { fixed: true }, C::Uuid) => Op::UuidFixed,
        (A::Date, C::Date) => Op::Date,
        (A::Time { millis: true }, C::Time) => Op::TimeMillis,
        (A::Time { millis: false }, C::Time) => Op::Micros,
        (A::Timestamp { millis, local }, C::TimestampTz | C::Timestamp)
            if *local == (*column == C::Timestamp) =>
        {
            if *millis {
                Op::Millis
            } else {
                Op::Micros
            }
        }
        (A::Record(record), C::Struct(children)) => {
            let mut fields = Vec::with_capacity(record.fields.len());
            for (name, ty) in &record.fields {
                let (target, child) = children
                    .iter()
                    .enumerate()
                    .find(|(_, c)| c.name == *name)
                    .ok_or_else(|| SchemaError::NoStructField { name: name.clone() })?;
                fields.push(FieldOp {
                    op: compile(ty, &child.ty)?,
                    target: Some(target),
                });
            }
            let absent = (0..children.len())
                .filter(|i| !fields.iter().any(|f| f.target == Some(*i)))
                .collect();
            Op::Record { fields, absent }
        }
        (A::Array(items), C::List(element)) => Op::Array(Box::new(compile(items, &element.ty)?)),
        (A::Map(values), C::Map(kv)) if kv.key.ty == C::String => {
            Op::Map(Box::new(compile(values, &kv.value.ty)?))
        }
        (A::Union(branches), C::Struct(children)) => {
            let mut ops = Vec::with_capacity(branches.len());
            let mut k = 0;
            for b in branches {
                if *b == A::Null {
                    ops.push(None);
                    continue;
                }
                let name = format!("field{k}");
                k += 1;
                let (i, child) = children
                    .iter()
                    .enumerate()
                    .find(|(_, c)| c.name == name)
                    .ok_or_else(|| SchemaError::NoUnionBranch { name: name.clone() })?;
                ops.push(Some((i, compile(b, &child.ty)?)));
            }
            Op::Union(ops)
        }
        _ => {
            return Err(SchemaError::CannotHold {
                column: column.clone(),
                writer: format!("Avro {}", writer.describe()),
            })
        }
    })
}

/// How to read past a `writer` value (a field no column takes).
pub fn skipper(writer: &AvroType) -> Op {
    use AvroType as A;
    match writer {
        A::Null => Op::Null,
        A::Boolean => Op::Boolean,
        A::Int | A::Long | A::Date | A::Time { .. } | A::Timestamp { .. } => Op::Long,
        A::Enum(s) => Op::Enum(s.clone()),
        A::Float => Op::Float,
        A::Double => Op::Double,
        A::String | A::Bytes | A::Uuid { fixed: false } => Op::Bytes,
        A::Fixed(n) => Op::Fixed(*n),
        A::Uuid { fixed: true } => Op::Fixed(16),
        A::Decimal { fixed, .. } => match fixed {
            Some(n) => Op::Fixed(*n),
            None => Op::Bytes,
        },
        A::Record(r) => Op::Record {
            fields: r
                .fields
                .iter()
                .map(|(_, t)| FieldOp {
                    op: skipper(t),
                    target: None,
                })
                .collect(),
            absent: Vec::new(),
        },
        A::Array(items) => Op::Array(Box::new(skipper(items))),
        A::Map(values) => Op::Map(Box::new(skipper(values))),
        A::Union(branches) => Op::Union(
            branches
                .iter()
                .map(|b| (*b != A::Null).then(|| (0, skipper(b))))
                .collect(),
        ),
    }
}

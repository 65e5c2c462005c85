//! A writer message compiled against the table's columns: per field its
//! number, how many values it holds, how each is read and which buffer
//! takes it ([`MessageOp`]). Compiled once per schema id, message and
//! column set; the reader then only follows the plan.

use std::sync::Arc;

use super::schema::{Label, ProtoEnum, ProtoField, ProtoMessage, ProtoType, Scalar};
use crate::columns::{ColumnType, NestedField};
use crate::decode::schema_error::SchemaError;

/// Wire types (Protobuf encoding, "Message Structure").
pub const VARINT: u8 = 0;
pub const I64: u8 = 1;
pub const LEN: u8 = 2;
pub const SGROUP: u8 = 3;
pub const EGROUP: u8 = 4;
pub const I32: u8 = 5;

/// How one value is read and stored. The column is known to hold it (see
/// [`crate::decode::fit`]): compiling never widens or guesses.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A scalar; `widen`: an `int32`-like value into a `long` column, a
    /// `float` into a `double` one.
    Scalar { scalar: Scalar, widen: bool },
    /// An enum, stored as its value's name (or its number as text).
    Enum(Arc<ProtoEnum>),
    /// `google.protobuf.Timestamp`, stored in microseconds.
    Timestamp,
    /// A wrapper message: its field 1, a scalar.
    Wrapper { scalar: Scalar, widen: bool },
    /// A message into a struct column.
    Message(Box<MessageOp>),
    /// A map entry message (`key` = field 1, `value` = field 2), into a
    /// map column's key and value buffers.
    MapEntry(Box<MessageOp>),
}

impl Op {
    /// The wire type a single value is encoded with.
    pub fn wire_type(&self) -> u8 {
        match self {
            Op::Scalar { scalar, .. } => scalar_wire_type(*scalar),
            Op::Enum(_) => VARINT,
            Op::Timestamp | Op::Wrapper { .. } | Op::Message(_) | Op::MapEntry(_) => LEN,
        }
    }

    /// Whether repeated values can come packed (one length-delimited run).
    pub fn packable(&self) -> bool {
        match self {
            Op::Scalar { scalar, .. } => scalar_wire_type(*scalar) != LEN,
            Op::Enum(_) => true,
            _ => false,
        }
    }
}

/// The wire type of a scalar.
pub fn scalar_wire_type(scalar: Scalar) -> u8 {
    use Scalar::*;
    match scalar {
        Int32 | Sint32 | Int64 | Sint64 | Uint32 | Uint64 | Bool => VARINT,
        Sfixed32 | Fixed32 | Float => I32,
        Sfixed64 | Fixed64 | Double => I64,
        String | Bytes => LEN,
    }
}

/// How many values a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// At most one (the last one sent wins; messages merge); absent: null
    /// with presence, else the default value.
    Singular { presence: bool },
    /// A list (packed runs and single values, in wire order).
    Repeated,
    /// A map: each value is an [`Op::MapEntry`].
    Map,
}

/// One field read into a buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldOp {
    /// The field name (for errors).
    pub name: String,
    pub number: u32,
    pub shape: Shape,
    pub op: Op,
    /// The buffer (a column, or a struct's child) that takes it.
    pub target: usize,
    /// The oneof it belongs to: only the member sent last is read.
    pub oneof: Option<usize>,
}

impl FieldOp {
    /// Whether a value of this field may come with `wire` type.
    pub fn accepts(&self, wire: u8) -> bool {
        match self.shape {
            Shape::Repeated if wire == LEN => self.op.packable() || self.op.wire_type() == LEN,
            Shape::Map => wire == LEN,
            _ => wire == self.op.wire_type(),
        }
    }
}

/// A message: the fields read (others, and unknown numbers, are read
/// past), which field each number is, and the buffers left null.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageOp {
    pub fields: Vec<FieldOp>,
    pub numbers: FieldNumbers,
    /// How many oneofs the fields form.
    pub oneofs: usize,
    /// Buffers no writer field fills (columns, or struct children).
    pub absent: Vec<usize>,
}

impl MessageOp {
    fn new(fields: Vec<FieldOp>, oneofs: usize, absent: Vec<usize>) -> Self {
        let numbers = FieldNumbers::new(fields.iter().map(|f| f.number));
        Self {
            fields,
            numbers,
            oneofs,
            absent,
        }
    }
}

/// Field number -> index among a message's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldNumbers {
    /// `index + 1` by number (0: no such field), for small numbers.
    Dense(Vec<u32>),
    /// `(number, index)` sorted by number.
    Sparse(Vec<(u32, u32)>),
}

/// Numbers up to this are looked up in a table.
const DENSE_LIMIT: u32 = 1024;

impl FieldNumbers {
    fn new(numbers: impl Iterator<Item = u32> + Clone) -> Self {
        let max = numbers.clone().max().unwrap_or(0);
        if max <= DENSE_LIMIT {
            let mut table = vec![0; max as usize + 1];
            for (i, n) in numbers.enumerate() {
                table[n as usize] = i as u32 + 1;
            }
            return FieldNumbers::Dense(table);
        }
        let mut pairs: Vec<(u32, u32)> = numbers.zip(0..).collect();
        pairs.sort_unstable();
        FieldNumbers::Sparse(pairs)
    }

    /// The index of field `number`, if the plan reads it.
    #[inline]
    pub fn get(&self, number: u64) -> Option<usize> {
        match self {
            FieldNumbers::Dense(table) => match table.get(usize::try_from(number).ok()?) {
                Some(&i) if i > 0 => Some(i as usize - 1),
                _ => None,
            },
            FieldNumbers::Sparse(pairs) => {
                let number = u32::try_from(number).ok()?;
                let i = pairs.binary_search_by_key(&number, |p| p.0).ok()?;
                Some(pairs[i].1 as usize)
            }
        }
    }
}

/// The top-level message: writer field `i` into column `targets[i]`
/// (`None`: read past), `absent` columns null. `Err` when a column cannot
/// hold its field (a caller bug or a stale plan).
pub fn compile_top(
    message: &ProtoMessage,
    targets: &[Option<usize>],
    types: &[&ColumnType],
    absent: Vec<usize>,
) -> Result<MessageOp, (String, SchemaError)> {
    let mut fields = Vec::with_capacity(message.fields.len());
    for (field, target) in message.fields.iter().zip(targets) {
        if let Some(t) = *target {
            let op = compile_field(field, types[t], t).map_err(|e| (field.name.clone(), e))?;
            fields.push(op);
        }
    }
    Ok(MessageOp::new(fields, message.oneofs, absent))
}

/// How to read `field`'s values into a `column` (buffer `target`).
fn compile_field(
    field: &ProtoField,
    column: &ColumnType,
    target: usize,
) -> Result<FieldOp, SchemaError> {
    let (shape, op) = match (&field.label, column) {
        (Label::Singular { presence }, _) => (
            Shape::Singular {
                presence: *presence,
            },
            compile(&field.ty, column)?,
        ),
        (Label::Repeated, ColumnType::List(element)) => {
            (Shape::Repeated, compile(&field.ty, &element.ty)?)
        }
        (Label::Map(key), ColumnType::Map(kv)) if kv.key.ty == key.column_type() => {
            (Shape::Map, map_entry(*key, &field.ty, &kv.value.ty)?)
        }
        _ => {
            return Err(SchemaError::CannotHold {
                column: column.clone(),
                writer: format!("the field's {}", field.ty.describe()),
            })
        }
    };
    Ok(FieldOp {
        name: field.name.clone(),
        number: field.number,
        shape,
        op,
        target,
        oneof: field.oneof,
    })
}

/// A map entry: key (field 1) into buffer 0, value (field 2) into buffer
/// 1; both read their default when absent.
fn map_entry(key: Scalar, value: &ProtoType, column: &ColumnType) -> Result<Op, SchemaError> {
    let singular = Shape::Singular { presence: false };
    let key = FieldOp {
        name: "key".into(),
        number: 1,
        shape: singular,
        op: Op::Scalar {
            scalar: key,
            widen: false,
        },
        target: 0,
        oneof: None,
    };
    let value = FieldOp {
        name: "value".into(),
        number: 2,
        shape: singular,
        op: compile(value, column)?,
        target: 1,
        oneof: None,
    };
    Ok(Op::MapEntry(Box::new(MessageOp::new(
        vec![key, value],
        0,
        Vec::new(),
    ))))
}

/// How to read `writer` values into a `column` that holds them.
pub fn compile(writer: &ProtoType, column: &ColumnType) -> Result<Op, SchemaError> {
    Ok(match (writer, column) {
        (ProtoType::Scalar(s), _) => Op::Scalar {
            scalar: *s,
            widen: widens(*s, column)?,
        },
        (ProtoType::Wrapper(s), _) => Op::Wrapper {
            scalar: *s,
            widen: widens(*s, column)?,
        },
        (ProtoType::Enum(e), ColumnType::String) => Op::Enum(e.clone()),
        (ProtoType::Timestamp, ColumnType::TimestampTz) => Op::Timestamp,
        (ProtoType::Message(m), ColumnType::Struct(children)) => {
            Op::Message(Box::new(message(m, children)?))
        }
        _ => {
            return Err(SchemaError::CannotHold {
                column: column.clone(),
                writer: format!("Protobuf {}", writer.describe()),
            })
        }
    })
}

/// A nested message into a struct with `children`.
fn message(m: &ProtoMessage, children: &[NestedField]) -> Result<MessageOp, SchemaError> {
    let mut fields = Vec::with_capacity(m.fields.len());
    for f in &m.fields {
        if f.column_type().is_none() {
            continue;
        }
        let (target, child) = children
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == f.name)
            .ok_or_else(|| SchemaError::NoStructField {
                name: f.name.clone(),
            })?;
        fields.push(
            compile_field(f, &child.ty, target).map_err(|e| SchemaError::InNested {
                field: f.name.clone(),
                source: Box::new(e),
            })?,
        );
    }
    let absent = (0..children.len())
        .filter(|i| !fields.iter().any(|f| f.target == *i))
        .collect();
    Ok(MessageOp::new(fields, m.oneofs, absent))
}

/// Whether `scalar` values are widened into `column` (`int32` into
/// `long`, `float` into `double`); `Err` if the column cannot hold them.
fn widens(scalar: Scalar, column: &ColumnType) -> Result<bool, SchemaError> {
    match (scalar.column_type(), column) {
        (a, b) if a == *b => Ok(false),
        (ColumnType::Int, ColumnType::Long) | (ColumnType::Float, ColumnType::Double) => Ok(true),
        // uint64 is decimal(20,0): any wider precision at scale 0 holds it.
        (
            ColumnType::Decimal { .. },
            ColumnType::Decimal {
                precision,
                scale: 0,
            },
        ) if *precision >= 20 => Ok(false),
        _ => Err(SchemaError::CannotHold {
            column: column.clone(),
            writer: format!("Protobuf {}", scalar.name()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_numbers_are_found_dense_or_sparse() {
        let dense = FieldNumbers::new([3, 1, 7].into_iter());
        assert_eq!(dense.get(7), Some(2));
        assert_eq!(dense.get(1), Some(1));
        assert_eq!(dense.get(2), None);
        assert_eq!(dense.get(u64::MAX), None);
        let sparse = FieldNumbers::new([5, 100_000, 2].into_iter());
        assert!(matches!(sparse, FieldNumbers::Sparse(_)));
        assert_eq!(sparse.get(100_000), Some(1));
        assert_eq!(sparse.get(2), Some(2));
        assert_eq!(sparse.get(6), None);
        assert_eq!(sparse.get(u64::MAX), None);
    }

    #[test]
    fn scalars_widen_only_where_iceberg_does() {
        assert_eq!(widens(Scalar::Int32, &ColumnType::Int), Ok(false));
        assert_eq!(widens(Scalar::Sint32, &ColumnType::Long), Ok(true));
        assert_eq!(widens(Scalar::Float, &ColumnType::Double), Ok(true));
        let wide = ColumnType::Decimal {
            precision: 30,
            scale: 0,
        };
        assert_eq!(widens(Scalar::Uint64, &wide), Ok(false));
        assert!(widens(Scalar::Int64, &ColumnType::Int).is_err());
        assert!(widens(Scalar::String, &ColumnType::Binary).is_err());
    }

    #[test]
    fn packed_and_wire_types_accepted_per_shape() {
        let field = |shape, scalar| FieldOp {
            name: "f".into(),
            number: 1,
            shape,
            op: Op::Scalar {
                scalar,
                widen: false,
            },
            target: 0,
            oneof: None,
        };
        let repeated = field(Shape::Repeated, Scalar::Int64);
        assert!(repeated.accepts(VARINT) && repeated.accepts(LEN));
        assert!(!repeated.accepts(I64));
        let single = field(Shape::Singular { presence: false }, Scalar::Int64);
        assert!(single.accepts(VARINT) && !single.accepts(LEN));
        let strings = field(Shape::Repeated, Scalar::String);
        assert!(strings.accepts(LEN) && !strings.accepts(VARINT));
    }
}

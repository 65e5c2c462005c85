//! Why a record did not become a row.

use std::fmt;

use crate::columns::ColumnType;
use crate::names::NameError;
use crate::registry::{RegistryError, ValueFormat};

use super::schema_error::SchemaError;

/// A field of a message that the table has no column for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// The field name, as in the message.
    pub name: String,
    /// Its type inferred from the values seen ([`crate::infer`] rules);
    /// `None` while it has only been null.
    pub ty: Option<ColumnType>,
    /// Partition of the first record it was seen in.
    pub partition: i32,
    /// Offset of the first record it was seen in.
    pub offset: i64,
}

impl UnknownField {
    /// The type a new column for it should have (`string` if only null).
    pub fn column_type(&self) -> ColumnType {
        self.ty.clone().unwrap_or(ColumnType::String)
    }
}

/// A record that was not appended; the batch is exactly as before the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The record's topic.
    pub topic: String,
    /// The record's partition.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
    /// The field at fault, when one is.
    pub field: Option<String>,
    /// What went wrong.
    pub kind: DecodeErrorKind,
}

/// What went wrong with a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The value is null (a Kafka tombstone). In append mode there is no row
    /// to write; upsert mode will turn it into a delete. The caller decides.
    Tombstone,
    /// A change event that truncates the source table (`op` t): no row;
    /// the caller empties the table or fails (`on_truncate`).
    Truncate,
    /// A delete event of a change stream keyed by payload fields: the row
    /// whose `_olake_id` this is (read from the event's `before`) is deleted.
    DeleteKey { olake_id: String },
    /// The value is not JSON (the reason names line and column).
    NotJson { reason: String },
    /// The value is JSON but not an object: `array`, `string`, `number`,
    /// `boolean` or `null`.
    NotAnObject { found: &'static str },
    /// The field's value does not fit its column type.
    TypeMismatch { expected: ColumnType, found: String },
    /// An integer too large for its `long` or `int` column, or one a
    /// `double` column cannot hold exactly (beyond 2^53).
    OutOfRange { expected: ColumnType, found: String },
    /// A new field cannot get a column name (see [`crate::names`]).
    ColumnName(NameError),
    /// The message's new fields would take the table past
    /// `sync.max_columns`.
    TooManyColumns { columns: usize, limit: usize },
    /// The message has fields the table has no column for (with
    /// [`crate::UnknownFieldPolicy::Reject`]). Add the columns, rebuild the
    /// decoder and append the record again: nothing is lost.
    UnknownFields(Vec<UnknownField>),
    /// Upsert mode: a dedup key field is null or missing.
    NullKey,
    /// A string column of this batch would pass 2 GiB: finish the batch and
    /// append the record again.
    BatchFull,
    /// The stream reads registry-framed values (`value_format` avro or
    /// protobuf) and this value does not start with the magic byte 0 and a
    /// schema id.
    NotFramed { format: ValueFormat },
    /// The registry has no schema with the value's id.
    UnknownSchema { schema_id: u32, reason: String },
    /// The writer schema cannot be read into a table (not parseable, a
    /// recursive type, a decimal beyond 38 digits, ...).
    UnsupportedSchema {
        schema_id: u32,
        reason: Box<SchemaError>,
    },
    /// The writer schema gives a field a type its column cannot take, and
    /// Iceberg cannot widen the column to it. `previous` is the schema id
    /// the table's columns were last read with in this sync, if any.
    SchemaMismatch {
        schema_id: u32,
        previous: Option<u32>,
        reason: String,
    },
    /// The body does not follow its writer schema (truncated, a bad union
    /// or enum index, invalid UTF-8, ...).
    BadBody { schema_id: u32, reason: String },
    /// The registry could not be asked (unavailable after retries, or it
    /// refused the credentials): not the message's fault; the table fails
    /// and nothing is committed.
    Registry(Box<RegistryError>),
    /// Columns must widen to hold the writer schema's fields (`int` ->
    /// `long`, decimal precision, new struct fields): `(field, new type)`.
    /// Change the columns, rebuild the decoder and append the record again.
    Widen(Vec<(String, ColumnType)>),
    /// A stream of change events (`change_events`): the value is not an
    /// event, or not one that is a row change, or a field's value does not
    /// have the form its schema says.
    ChangeEvent { reason: String },
    /// The message's headers cannot be stored in `_kafka_headers`: they
    /// are malformed, or a key is not UTF-8.
    BadHeaders { reason: &'static str },
}

impl DecodeError {
    /// The expected column type, for a type mismatch or out-of-range value.
    pub fn expected(&self) -> Option<ColumnType> {
        match &self.kind {
            DecodeErrorKind::TypeMismatch { expected, .. }
            | DecodeErrorKind::OutOfRange { expected, .. } => Some(expected.clone()),
            _ => None,
        }
    }

    /// What was found instead, e.g. `string "abc"`, `array`.
    pub fn found(&self) -> Option<&str> {
        match &self.kind {
            DecodeErrorKind::TypeMismatch { found, .. }
            | DecodeErrorKind::OutOfRange { found, .. } => Some(found),
            DecodeErrorKind::NotAnObject { found } => Some(found),
            _ => None,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]@{}: ", self.topic, self.partition, self.offset)?;
        if let Some(field) = &self.field {
            if !matches!(
                self.kind,
                DecodeErrorKind::UnknownFields(_) | DecodeErrorKind::ColumnName(_)
            ) {
                write!(f, "field {field:?}: ")?;
            }
        }
        match &self.kind {
            DecodeErrorKind::Tombstone => f.write_str("null value (tombstone)"),
            DecodeErrorKind::DeleteKey { olake_id } => {
                write!(f, "a delete of the row with _olake_id {olake_id}")
            }
            DecodeErrorKind::Truncate => f.write_str(
                "a truncate of the source table (change event `op` t), which on_truncate = \"fail\" refuses; \
                 set on_truncate = \"empty_table\" to delete the table's rows from before it",
            ),
            DecodeErrorKind::NotJson { reason } => write!(f, "value is not JSON: {reason}"),
            DecodeErrorKind::NotAnObject { found } => {
                write!(f, "value is not a JSON object, found {found}")
            }
            DecodeErrorKind::TypeMismatch { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            DecodeErrorKind::OutOfRange { expected, found } => {
                write!(f, "expected {expected}, found {found}, which is out of range")
            }
            DecodeErrorKind::UnknownFields(fields) => {
                let plural = fields.len() > 1;
                f.write_str(if plural { "fields " } else { "field " })?;
                for (i, u) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match &u.ty {
                        Some(ty) => write!(f, "{:?} ({ty})", u.name)?,
                        None => write!(f, "{:?} (null)", u.name)?,
                    }
                }
                f.write_str(if plural {
                    " are not columns of the table"
                } else {
                    " is not a column of the table"
                })
            }
            DecodeErrorKind::ColumnName(e) => write!(f, "{e}"),
            DecodeErrorKind::TooManyColumns { columns, limit } => {
                f.write_str(&crate::infer::too_many_columns(*columns, *limit))
            }
            DecodeErrorKind::NullKey => f.write_str("dedup key value is null"),
            DecodeErrorKind::BadHeaders { reason } => {
                write!(f, "the message's headers cannot be stored: {reason}")
            }
            DecodeErrorKind::BatchFull => f.write_str(
                "string data would pass 2 GiB in one batch; finish the batch and append the record again",
            ),
            DecodeErrorKind::NotFramed { format } => write!(
                f,
                "value is not schema-registry framed (magic byte 0 and a 4-byte schema id), \
                 but the stream's value_format is {format}"
            ),
            DecodeErrorKind::UnknownSchema { schema_id, reason } => {
                write!(f, "schema id {schema_id} is unknown to the registry: {reason}")
            }
            DecodeErrorKind::UnsupportedSchema { schema_id, reason } => {
                write!(f, "schema id {schema_id} cannot be read into a table: {reason}")
            }
            DecodeErrorKind::SchemaMismatch {
                schema_id,
                previous,
                reason,
            } => {
                write!(f, "schema id {schema_id} does not fit the table")?;
                if let Some(p) = previous {
                    write!(f, " (its columns were read with schema id {p})")?;
                }
                write!(f, ": {reason}")
            }
            DecodeErrorKind::BadBody { schema_id, reason } => {
                write!(f, "value does not follow its schema id {schema_id}: {reason}")
            }
            DecodeErrorKind::Registry(e) => write!(f, "{e}"),
            DecodeErrorKind::ChangeEvent { reason } => write!(f, "change event: {reason}"),
            DecodeErrorKind::Widen(fields) => {
                for (i, (name, ty)) in fields.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}column {name:?} must become {ty}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Headers that are not in Kafka's record format (`_kafka_headers`, the
/// `__op` header).
impl From<crate::record::MalformedHeaders> for DecodeErrorKind {
    fn from(_: crate::record::MalformedHeaders) -> Self {
        DecodeErrorKind::BadHeaders {
            reason: "they are not in Kafka's record format",
        }
    }
}

//! Kafka Connect schemas (the `schema` half of a JSON message written with
//! `schemas.enable=true`) as column types, and how each field's JSON value
//! is read into its column.
//!
//! | Connect type (semantic name) | column | JSON value |
//! |---|---|---|
//! | `int8`, `int16`, `int32` | `int` | number |
//! | `int64` | `long` | number |
//! | `float`, `float32` | `float` | number |
//! | `double`, `float64` | `double` | number |
//! | `boolean` | `boolean` | `true` / `false` |
//! | `string` | `string` | text |
//! | `bytes` | `binary` | base64 |
//! | `bytes` `org.apache.kafka.connect.data.Decimal` | `decimal(p,s)`: `p` from `connect.decimal.precision` (38 when absent), `s` from `scale` | base64 of the unscaled big-endian two's complement |
//! | `struct` `io.debezium.data.VariableScaleDecimal` | `string`: the exact decimal text (Iceberg has no decimal of varying scale) | `{"scale": s, "value": base64}` |
//! | `int32` `io.debezium.time.Date`, `org.apache.kafka.connect.data.Date` | `date` | days since 1970-01-01 |
//! | `int32` `io.debezium.time.Time`, `org.apache.kafka.connect.data.Time` | `time` | milliseconds since midnight |
//! | `int64` `io.debezium.time.MicroTime` | `time` | microseconds since midnight |
//! | `int64` `io.debezium.time.NanoTime` | `time` | nanoseconds since midnight (whole microseconds only) |
//! | `int64` `io.debezium.time.Timestamp`, `org.apache.kafka.connect.data.Timestamp` | `timestamp` | milliseconds since the epoch |
//! | `int64` `io.debezium.time.MicroTimestamp` | `timestamp` | microseconds since the epoch |
//! | `int64` `io.debezium.time.NanoTimestamp` | `timestamp` | nanoseconds since the epoch (whole microseconds only) |
//! | `string` `io.debezium.time.ZonedTimestamp` | `timestamptz` | ISO 8601 with offset |
//! | `string` `io.debezium.data.Uuid` | `uuid` | text |
//! | `string` `io.debezium.data.Json`, `io.debezium.data.Enum`, `io.debezium.time.ZonedTime`, others | `string` | text |
//! | `array` | `list` of the items' column | array |
//! | other `struct`, `map` | `string`: the value's JSON text | object |

use std::sync::Arc;

use serde::Deserialize;

use crate::columns::{ColumnType, NestedField};

/// A Connect schema as JSON (`{"type": .., "name": .., "fields": ..}`).
#[derive(Debug, Deserialize)]
pub(crate) struct ConnectSchema {
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub fields: Vec<ConnectSchema>,
    #[serde(default)]
    pub items: Option<Box<ConnectSchema>>,
    #[serde(default)]
    pub parameters: Option<serde_json::Map<String, serde_json::Value>>,
}

/// How one field's JSON value is read into its column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Read {
    Int,
    Long,
    Float,
    Double,
    Boolean,
    String,
    /// Base64 bytes.
    Binary,
    /// Base64 unscaled bytes; the column's precision bounds it.
    Decimal {
        precision: u8,
    },
    /// `{"scale", "value"}` as decimal text.
    VariableDecimal,
    /// Days.
    Date,
    /// Time of day in units of `1 / per_second` s.
    Time {
        per_second: i64,
    },
    /// Since the epoch in units of `1 / per_second` s.
    Timestamp {
        per_second: i64,
    },
    /// ISO 8601 text with an offset.
    ZonedTimestamp,
    Uuid,
    /// The value's JSON text (nested structs, maps).
    JsonText,
    List(Box<Read>),
}

/// Why a Connect schema cannot become columns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConnectSchemaError {
    #[error("the Connect schema is not a struct")]
    NotAStruct,
    #[error("field {field}: Connect type {ty:?} is not known")]
    UnknownType { field: String, ty: String },
    #[error("field {field}: a decimal of {precision} digits is wider than Iceberg's 38")]
    DecimalTooWide { field: String, precision: u64 },
    #[error("field {field}: array without items")]
    NoItems { field: String },
}

/// The row's fields of an event's schema as `(name, column type, read)`,
/// in order: an envelope's (fields `op` and a struct `after`) `after`
/// struct, or a flattened record's own struct (Debezium's
/// `ExtractNewRecordState`).
pub(crate) fn after_fields(
    schema: &ConnectSchema,
) -> Result<Vec<(String, ColumnType, Read)>, ConnectSchemaError> {
    if schema.ty != "struct" {
        return Err(ConnectSchemaError::NotAStruct);
    }
    let field = |name: &str| {
        schema
            .fields
            .iter()
            .find(|f| f.field.as_deref() == Some(name))
    };
    let row = match (field("op"), field("after")) {
        (Some(_), Some(after)) if after.ty == "struct" => after,
        _ => schema,
    };
    row.fields
        .iter()
        .map(|f| {
            let name = f.field.clone().unwrap_or_default();
            let (ty, read) = column_of(f, &name)?;
            Ok((name, ty, read))
        })
        .collect()
}

/// The column type and read of one Connect schema.
fn column_of(s: &ConnectSchema, field: &str) -> Result<(ColumnType, Read), ConnectSchemaError> {
    if let Some(named) = named(s, field)? {
        return Ok(named);
    }
    Ok(match s.ty.as_str() {
        "int8" | "int16" | "int32" => (ColumnType::Int, Read::Int),
        "int64" => (ColumnType::Long, Read::Long),
        "float" | "float32" => (ColumnType::Float, Read::Float),
        "double" | "float64" => (ColumnType::Double, Read::Double),
        "boolean" => (ColumnType::Boolean, Read::Boolean),
        "string" => (ColumnType::String, Read::String),
        "bytes" => (ColumnType::Binary, Read::Binary),
        "array" => {
            let items = s
                .items
                .as_deref()
                .ok_or_else(|| ConnectSchemaError::NoItems {
                    field: field.to_owned(),
                })?;
            let (ty, read) = column_of(items, field)?;
            (
                ColumnType::List(Arc::new(NestedField::optional(0, "element", ty))),
                Read::List(Box::new(read)),
            )
        }
        "struct" | "map" => (ColumnType::String, Read::JsonText),
        other => {
            return Err(ConnectSchemaError::UnknownType {
                field: field.to_owned(),
                ty: other.to_owned(),
            })
        }
    })
}

/// Semantic types by their schema name.
fn named(s: &ConnectSchema, field: &str) -> Result<Option<(ColumnType, Read)>, ConnectSchemaError> {
    let Some(name) = s.name.as_deref() else {
        return Ok(None);
    };
    let timestamp = |per_second| (ColumnType::Timestamp, Read::Timestamp { per_second });
    let time = |per_second| (ColumnType::Time, Read::Time { per_second });
    Ok(Some(match (name, s.ty.as_str()) {
        ("org.apache.kafka.connect.data.Decimal", "bytes") => decimal(s, field)?,
        ("io.debezium.data.VariableScaleDecimal", "struct") => {
            (ColumnType::String, Read::VariableDecimal)
        }
        ("io.debezium.time.Date" | "org.apache.kafka.connect.data.Date", "int32") => {
            (ColumnType::Date, Read::Date)
        }
        ("io.debezium.time.Time" | "org.apache.kafka.connect.data.Time", "int32") => time(1_000),
        ("io.debezium.time.MicroTime", "int64") => time(1_000_000),
        ("io.debezium.time.NanoTime", "int64") => time(1_000_000_000),
        ("io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp", "int64") => {
            timestamp(1_000)
        }
        ("io.debezium.time.MicroTimestamp", "int64") => timestamp(1_000_000),
        ("io.debezium.time.NanoTimestamp", "int64") => timestamp(1_000_000_000),
        ("io.debezium.time.ZonedTimestamp", "string") => {
            (ColumnType::TimestampTz, Read::ZonedTimestamp)
        }
        ("io.debezium.data.Uuid", "string") => (ColumnType::Uuid, Read::Uuid),
        _ => return Ok(None),
    }))
}

fn decimal(s: &ConnectSchema, field: &str) -> Result<(ColumnType, Read), ConnectSchemaError> {
    let parameter = |key: &str| {
        s.parameters
            .as_ref()
            .and_then(|p| p.get(key))
            .and_then(|v| match v {
                serde_json::Value::String(t) => t.parse::<u64>().ok(),
                other => other.as_u64(),
            })
    };
    let precision = parameter("connect.decimal.precision").unwrap_or(38);
    if precision > 38 {
        return Err(ConnectSchemaError::DecimalTooWide {
            field: field.to_owned(),
            precision,
        });
    }
    let scale = parameter("scale").unwrap_or(0).min(precision);
    let precision = precision.max(1) as u8;
    Ok((
        ColumnType::Decimal {
            precision,
            scale: scale as u8,
        },
        Read::Decimal { precision },
    ))
}

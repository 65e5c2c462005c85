//! Why a writer schema (Avro or Protobuf, from the registry) cannot be
//! read into a table, or into the table's columns as they are.

use std::sync::Arc;

use crate::columns::ColumnType;

/// What kind of failure a [`SchemaError`] is. None is retryable: the same
/// schema fails the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaErrorKind {
    /// The text is not a schema at all (not JSON, not a `.proto` file).
    NotParseable,
    /// The schema breaks its format's rules (a missing attribute, an
    /// unknown type name).
    Invalid,
    /// A valid schema an Iceberg table cannot hold (a type that contains
    /// itself, a decimal beyond 38 digits, a proto2 group, ...).
    Unsupported,
    /// A column (or a struct field of one) cannot hold the writer's type.
    Mismatch,
    /// A `_kafka_key.<field>` dedup key cannot be read from the key schema.
    Key,
}

/// Why a writer schema cannot be read into a table; the message says what
/// and where (the field, the type).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    /// An Avro schema's text is not JSON.
    #[error("not JSON: {source}")]
    NotJson {
        #[source]
        source: Arc<serde_json::Error>,
    },
    /// A Protobuf schema's text (with its references) does not compile.
    #[error("not a Protobuf schema: {source}")]
    NotProtobuf {
        #[source]
        source: Arc<protox::Error>,
    },
    /// The schema breaks the Avro specification; `reason` says where.
    #[error("{reason}")]
    Invalid { reason: String },
    /// A type name that is neither primitive nor defined before.
    #[error("unknown type {name:?}")]
    UnknownType { name: String },
    /// A record or message that contains itself.
    #[error("{what} {name} contains itself, which an Iceberg table cannot hold")]
    ContainsItself {
        /// `record` or `message`.
        what: &'static str,
        name: String,
    },
    /// An Avro decimal wider than Iceberg's.
    #[error("decimal with precision {precision} is more than Iceberg's 38 digits")]
    DecimalTooWide { precision: u8 },
    /// A proto2 group field.
    #[error("field {field} is a proto2 group, which is not read")]
    Group { field: String },
    /// A Protobuf map whose key is a message or an enum.
    #[error("map field {field} has a key that is not scalar")]
    MapKeyNotScalar { field: String },
    /// A Protobuf schema without any message.
    #[error("the schema defines no message")]
    NoMessage,
    /// Confluent message indexes that name no message of the schema.
    #[error("message indexes {path:?} name no message of the schema")]
    NoMessageAt { path: Vec<i32> },
    /// The error is in this field.
    #[error("field {field}: {source}")]
    InField {
        field: String,
        #[source]
        source: Box<SchemaError>,
    },
    /// The error is in this field of a nested message.
    #[error("{field}: {source}")]
    InNested {
        field: String,
        #[source]
        source: Box<SchemaError>,
    },
    /// A column whose type cannot hold the writer's type (`writer` names
    /// it: `Avro long`, `Protobuf string`, `the field's int32`).
    #[error("a {column} column cannot hold {writer}")]
    CannotHold { column: ColumnType, writer: String },
    /// A writer record or message field the struct column lacks.
    #[error("the struct has no field {name}")]
    NoStructField { name: String },
    /// A union branch the union's struct column lacks.
    #[error("the union's struct has no {name}")]
    NoUnionBranch { name: String },
    /// A `_kafka_key.<field>` dedup key on a key that is neither Avro nor
    /// Protobuf.
    #[error("only Avro and Protobuf keys can be read for a _kafka_key.<field> dedup key")]
    KeyFormat,
    /// The Avro key schema has no such top-level field.
    #[error("the key schema has no field {name:?}")]
    NoKeyField { name: String },
    /// The Protobuf key message has no such top-level field.
    #[error("the key message {message} has no field {name:?}")]
    NoKeyMessageField { message: String, name: String },
    /// The key field is a struct, list or map (`column` when known).
    #[error("key field {name:?} is {}not a single value", a_column(.column))]
    KeyNotSingle {
        name: String,
        column: Option<ColumnType>,
    },
}

fn a_column(column: &Option<ColumnType>) -> String {
    match column {
        Some(c) => format!("a {c}, "),
        None => String::new(),
    }
}

impl SchemaError {
    /// What kind of failure this is.
    pub fn kind(&self) -> SchemaErrorKind {
        use SchemaError::*;
        match self {
            NotJson { .. } | NotProtobuf { .. } => SchemaErrorKind::NotParseable,
            Invalid { .. } | UnknownType { .. } | NoMessageAt { .. } => SchemaErrorKind::Invalid,
            ContainsItself { .. }
            | DecimalTooWide { .. }
            | Group { .. }
            | MapKeyNotScalar { .. }
            | NoMessage => SchemaErrorKind::Unsupported,
            InField { source, .. } | InNested { source, .. } => source.kind(),
            CannotHold { .. } | NoStructField { .. } | NoUnionBranch { .. } => {
                SchemaErrorKind::Mismatch
            }
            KeyFormat | NoKeyField { .. } | NoKeyMessageField { .. } | KeyNotSingle { .. } => {
                SchemaErrorKind::Key
            }
        }
    }

    /// An Avro spec violation, e.g. `record shop.Order without "fields"`.
    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        Self::Invalid {
            reason: reason.into(),
        }
    }

    /// This error, found in field `field`.
    pub(crate) fn in_field(self, field: impl Into<String>) -> Self {
        Self::InField {
            field: field.into(),
            source: Box::new(self),
        }
    }
}

/// Equal when the kind and the message are: the causes (JSON and Protobuf
/// compiler errors) have no equality of their own.
impl PartialEq for SchemaError {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.to_string() == other.to_string()
    }
}

impl Eq for SchemaError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_of_an_unparseable_schema_is_kept() {
        let json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let text = json.to_string();
        let e = SchemaError::NotJson {
            source: Arc::new(json),
        }
        .in_field("id");
        assert_eq!(e.to_string(), format!("field id: not JSON: {text}"));
        assert_eq!(e.kind(), SchemaErrorKind::NotParseable);
        let cause = std::error::Error::source(&e).and_then(std::error::Error::source);
        assert_eq!(cause.map(ToString::to_string), Some(text));
    }
}

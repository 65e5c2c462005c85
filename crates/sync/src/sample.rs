//! Why a sample of a topic's messages could not give its columns
//! (`discover`, and a new table's columns in a sync): reading the sample,
//! a sampled message that fails it, or the columns the sample implies.

use topicberg_core::{DecodeErrorKind, InferError, NameError, RegistryError, ValueFormat};
use topicberg_kafka::DrainError;

use crate::error::SyncErrorKind;

/// Why a sample of a topic's messages could not give its columns.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// Reading the sample failed, or a sampled message failed it.
    #[error("sampling messages: {0}")]
    Read(#[source] DrainError<SampledMessage>),
    /// Two sampled writer schemas give a field types that do not fit.
    #[error("schema id {schema_id}: field {field}: {reason}")]
    Incompatible {
        /// The later schema.
        schema_id: u32,
        /// The field.
        field: String,
        /// Why the types do not fit.
        reason: String,
    },
    /// A sampled field cannot be named as a column.
    #[error("field {field}: {source}")]
    ColumnName {
        /// The field.
        field: String,
        /// Why it cannot be named.
        #[source]
        source: NameError,
    },
}

impl SampleError {
    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::Read(DrainError::Kafka(_)) => SyncErrorKind::Kafka,
            Self::Read(DrainError::Sink(SampledMessage::Registry(_))) => SyncErrorKind::Registry,
            Self::Read(DrainError::Sink(_)) => SyncErrorKind::InvalidMessage,
            Self::Incompatible { .. } | Self::ColumnName { .. } => SyncErrorKind::Schema,
        }
    }

    /// Whether sampling again may succeed without a change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Read(DrainError::Kafka(e)) => e.retryable(),
            Self::Read(DrainError::Sink(SampledMessage::Registry(e))) => e.is_retryable(),
            _ => false,
        }
    }
}

/// A sampled message that fails the sample.
#[derive(Debug, thiserror::Error)]
pub enum SampledMessage {
    /// The registry could not give the message's writer schema.
    #[error(transparent)]
    Registry(Box<RegistryError>),
    /// The message's writer schema cannot become columns.
    #[error("{at}: {}", schema_problem(.kind))]
    Unreadable {
        /// The message.
        at: MessageAt,
        /// Why its schema cannot be read.
        kind: DecodeErrorKind,
    },
    /// The value cannot add its fields (not JSON, not an object, a field
    /// that cannot be named, too many columns).
    #[error("{at}: {source}")]
    Invalid {
        /// The message.
        at: MessageAt,
        /// Why.
        #[source]
        source: InferError,
    },
    /// The value is not registry-framed but the stream reads Avro or
    /// Protobuf.
    #[error(
        "{at}: value is not schema-registry framed, but the stream's value_format is {format}"
    )]
    NotFramed {
        /// The message.
        at: MessageAt,
        /// The stream's value format.
        format: ValueFormat,
    },
}

/// A message's place: `topic[partition]@offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageAt {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
}

impl MessageAt {
    /// Where `record` is.
    pub fn of(record: &topicberg_core::SourceRecord<'_>) -> Self {
        Self {
            topic: record.topic.to_string(),
            partition: record.partition,
            offset: record.offset,
        }
    }
}

impl std::fmt::Display for MessageAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]@{}", self.topic, self.partition, self.offset)
    }
}

/// A decode error kind's text without the message position.
fn schema_problem(kind: &DecodeErrorKind) -> String {
    let e = topicberg_core::DecodeError {
        topic: String::new(),
        partition: 0,
        offset: 0,
        field: None,
        kind: kind.clone(),
    };
    let text = e.to_string();
    text.split_once(": ")
        .map_or(text.clone(), |(_, rest)| rest.to_owned())
}

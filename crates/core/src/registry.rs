//! Schema-registry framed messages: the Confluent wire format, the schemas
//! a registry returns, and where a decoder gets them ([`SchemaSource`]).
//!
//! The HTTP client that talks to a registry lives in `topicberg-kafka`
//! (`registry`); the decoder only sees [`SchemaSource`], so it can be
//! tested with schemas held in memory.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The first byte of every Confluent-framed key or value.
pub const MAGIC_BYTE: u8 = 0;

/// How a stream's values (or keys) are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueFormat {
    /// Plain JSON objects (no registry).
    Json,
    /// Avro, framed with a registry schema id.
    Avro,
    /// Protobuf, framed with a registry schema id and message indexes.
    Protobuf,
    /// Registry-framed messages by their schema's kind, plain JSON otherwise.
    Auto,
}

impl ValueFormat {
    /// Every format, for listings.
    pub const ALL: [ValueFormat; 4] = [Self::Json, Self::Avro, Self::Protobuf, Self::Auto];

    /// The name the job file and reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Avro => "avro",
            Self::Protobuf => "protobuf",
            Self::Auto => "auto",
        }
    }

    /// Whether messages of this format are registry-framed (or may be).
    pub fn uses_registry(self) -> bool {
        !matches!(self, Self::Json)
    }
}

impl fmt::Display for ValueFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ValueFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| format!("unknown format {s:?} (expected json, avro, protobuf or auto)"))
    }
}

/// The kind of a registered schema (the registry's `schemaType`; absent
/// means Avro).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaKind {
    /// `AVRO`.
    Avro,
    /// `PROTOBUF`.
    Protobuf,
    /// `JSON` (JSON Schema: the values are plain JSON after the framing).
    Json,
}

impl SchemaKind {
    /// The registry's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Avro => "AVRO",
            Self::Protobuf => "PROTOBUF",
            Self::Json => "JSON",
        }
    }

    /// The stream format that reads it.
    pub fn value_format(self) -> ValueFormat {
        match self {
            Self::Avro => ValueFormat::Avro,
            Self::Protobuf => ValueFormat::Protobuf,
            Self::Json => ValueFormat::Json,
        }
    }
}

/// A schema another one refers to (Avro named types kept in their own
/// subject, Protobuf imports), with its own references resolved too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaReference {
    /// The reference's name: an Avro full name, or a Protobuf import path.
    pub name: String,
    /// The subject and version it was read from.
    pub subject: String,
    /// The version of that subject.
    pub version: i32,
    /// The referenced schema's text.
    pub schema: String,
}

/// A schema as the registry returns it for an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchema {
    /// The registry's global schema id.
    pub id: u32,
    /// Its kind.
    pub kind: SchemaKind,
    /// Its text (Avro JSON, Protobuf `.proto` source, or JSON Schema).
    pub schema: String,
    /// Every schema it refers to, transitively, dependencies first.
    pub references: Vec<SchemaReference>,
}

impl RegisteredSchema {
    /// The texts of the schemas it refers to, dependencies first.
    pub fn reference_texts(&self) -> Vec<&str> {
        self.references.iter().map(|r| r.schema.as_str()).collect()
    }
}

/// Why a schema could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryErrorKind {
    /// The registry has no schema with that id (or no such subject).
    NotFound,
    /// The registry could not be reached or answered 5xx, after retries.
    Unavailable,
    /// The registry refused the credentials (401/403).
    Unauthorized,
    /// Any other answer the client cannot use.
    Invalid,
}

/// A registry request that failed; the URL never carries a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema registry {registry}: {what}: {message}")]
pub struct RegistryError {
    /// What kind of failure.
    pub kind: RegistryErrorKind,
    /// The registry's URL, safe to print.
    pub registry: String,
    /// What was asked: `schema id 7`, `subject orders-value`, ...
    pub what: String,
    /// The reason, safe to print.
    pub message: String,
}

impl RegistryError {
    /// Whether asking again later may help (the registry was unavailable).
    pub fn is_retryable(&self) -> bool {
        self.kind == RegistryErrorKind::Unavailable
    }
}

/// Where a decoder gets the writer schema of a framed message.
///
/// Implementations cache: the same id is asked of the registry once per
/// process. Called from drain threads (never inside an async runtime).
pub trait SchemaSource: Send + Sync + fmt::Debug {
    /// The schema with this global id.
    fn schema_by_id(&self, id: u32) -> Result<Arc<RegisteredSchema>, RegistryError>;
}

/// The framing of a registry-encoded key or value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// The schema id after the magic byte.
    pub schema_id: u32,
    /// Where the body (after the id) starts.
    pub body_start: usize,
}

/// The magic byte and schema id at the start of `bytes`, or `None` when
/// they are not there (too short, or another first byte).
pub fn framing(bytes: &[u8]) -> Option<Framing> {
    match bytes {
        [MAGIC_BYTE, a, b, c, d, ..] => Some(Framing {
            schema_id: u32::from_be_bytes([*a, *b, *c, *d]),
            body_start: 5,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_reads_magic_byte_and_big_endian_id() {
        assert_eq!(
            framing(&[0, 0, 0, 1, 2, 9, 9]),
            Some(Framing {
                schema_id: 258,
                body_start: 5
            })
        );
        assert_eq!(framing(b"{\"a\":1}"), None);
        assert_eq!(framing(&[0, 0, 0]), None);
    }

    #[test]
    fn formats_round_trip() {
        for f in ValueFormat::ALL {
            assert_eq!(f.as_str().parse::<ValueFormat>(), Ok(f));
        }
        assert!("xml".parse::<ValueFormat>().is_err());
    }
}

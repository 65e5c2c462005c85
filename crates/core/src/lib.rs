//! The model shared by every part of topicberg.
//!
//! Today this holds [`Secret`], the type every password, client secret and
//! token travels in so that none of them can reach a log line, an error
//! message or a report by accident. Configuration, the record model and
//! decoding land here as they get a second user.
//!
//! The record path: a Kafka message as a borrowed [`SourceRecord`], the
//! table's [`TableColumns`] (payload columns from [`SchemaInference`], then
//! the metadata columns), and [`BatchDecoder`], which decodes JSON values
//! straight into Arrow record batches.

pub mod columns;
pub mod config;
pub mod decode;
pub mod infer;
pub mod job;
pub mod names;
mod olake_id;
mod record;
mod redact;
mod secret;
mod timestamp;

pub use columns::{Column, ColumnType, ColumnsError, TableColumns};
pub use config::{ConfigError, JobConfig};
pub use decode::{
    BatchDecoder, DecodeError, DecodeErrorKind, DecoderConfigError, DecoderOptions, IdMode,
    UnknownField, UnknownFieldPolicy,
};
pub use infer::{merge_types, InferError, SchemaInference};
pub use job::{DedupKeys, Job, TableMode, TableSettings, Tuning, Upsert};
pub use names::{ColumnNames, NameError};
pub use olake_id::{append_olake_id, kafka_key_olake_id, upsert_olake_id, KeyValue};
pub use record::SourceRecord;
pub use redact::redact_urls;
pub use secret::{Secret, SECRET_FIELDS};
pub use timestamp::parse_timestamp_micros;

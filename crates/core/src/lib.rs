//! The model shared by every part of topicberg: the job and its settings,
//! the record and column model, and decoding.
//!
//! Layout:
//! - [`config`]: the job file (`JobConfig`): fields, defaults, `${VAR}`,
//!   validation that reports every problem at once;
//! - [`job`]: the job resolved once into the settings a sync runs on
//!   ([`Job`]: per table its mode, keys, delete format, format version);
//! - [`columns`], [`names`]: the table's columns (payload, then metadata)
//!   and how a field's name becomes a column's;
//! - [`infer`]: columns inferred from sampled messages;
//! - [`decode`]: JSON values straight into Arrow record batches
//!   ([`BatchDecoder`]), errors naming topic, partition, offset and field;
//! - `record`, `olake_id`, `timestamp`: a message as a borrowed
//!   [`SourceRecord`], the `_olake_id` hash, RFC 3339 timestamps;
//! - [`registry`]: the Confluent wire format, registered schemas and
//!   where the decoder gets them ([`SchemaSource`]);
//! - `secret`, `redact`: [`Secret`] (never printed) and URL redaction.

pub mod columns;
pub mod config;
pub mod decode;
pub mod human;
pub mod infer;
pub mod job;
pub mod names;
pub mod near;
mod olake_id;
pub mod record;
mod redact;
pub mod registry;
pub mod route;
mod secret;
pub mod shared_table;
mod timestamp;

pub use columns::{Column, ColumnType, ColumnsError, TableColumns};
pub use config::{ConfigError, JobConfig};
pub use decode::{
    change_columns, change_columns_in, BatchDecoder, ChangeColumns, DecodeError, DecodeErrorKind,
    DecoderConfigError, DecoderOptions, IdMode, RegistryValues, UnknownField, UnknownFieldPolicy,
    UnsentValue,
};
pub use infer::{merge_types, InferError, SchemaInference};
pub use job::{
    DedupKeys, Job, MaintainSettings, RegistryCredentials, RegistrySettings, TableMode,
    TableSettings, Tuning, Upsert,
};
pub use names::{ColumnNames, NameError};
pub use olake_id::{
    append_olake_id, kafka_key_olake_id, olake_id_bytes, olake_id_hex, upsert_olake_id, KeyValue,
};
pub use record::{Header, Headers, SourceRecord};
pub use redact::redact_urls;
pub use registry::{
    RegisteredSchema, RegistryError, RegistryErrorKind, SchemaKind, SchemaReference, SchemaSource,
    ValueFormat,
};
pub use secret::{Secret, SECRET_FIELDS};
pub use timestamp::parse_timestamp_micros;

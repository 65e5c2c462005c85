//! The hot path: Kafka JSON values straight into Arrow columns.
//!
//! [`BatchDecoder::append`] reads the usual message (a flat object of
//! known fields and scalar values) with its own reader (`flat.rs`: one pass
//! over the bytes, the same type rules), and any other message with
//! serde_json, driving our own serde visitors: the object's keys are looked up in a prebuilt
//! name -> column index (with a positional hint, so a topic whose messages
//! keep one field order pays one string comparison per field), and each
//! value is appended directly into its column's buffer. There is no
//! intermediate `serde_json::Value`, strings are copied once (from the
//! message, or from serde_json's reused scratch when they had escapes), and
//! nested values are captured as raw JSON text. Per row, the only heap work
//! is the column buffers growing (and serde_json's scratch buffer, for a
//! message with escaped strings).
//!
//! Rules, decided once here:
//!
//! - **Failed record**: the batch is left exactly as before the call (every
//!   column is truncated back; collected unknown fields keep their list and
//!   types), and the error names topic, partition, offset and field:
//!   `orders[2]@1234: field "amount": expected double, found string "abc"`.
//! - **Types**: `long` takes a JSON integer in i64 range; `int` an integer in
//!   i32 range; `double` an integer or a number; `float` (tables made
//!   elsewhere) an integer or a number within f32 range, rounded to 32
//!   bits, and beyond that range `OutOfRange` (the column can widen); `boolean` true/false;
//!   `timestamptz` a string [`crate::parse_timestamp_micros`] accepts;
//!   `string` a string (a number is an error, not text); `json` any value,
//!   as its JSON text. `null` or a missing field is null, in every column.
//! - **Duplicate keys** in one object: the last value wins (as in
//!   JavaScript, Python, PostgreSQL `jsonb` and `serde_json::Value`).
//! - **Tombstones** (null value): [`DecodeErrorKind::Tombstone`], nothing
//!   appended; the caller decides (append mode skips and counts them, upsert
//!   mode deletes).
//! - **Unknown fields** (not in the table): with
//!   [`UnknownFieldPolicy::Reject`] the record fails with
//!   [`DecodeErrorKind::UnknownFields`], listing every such field with its
//!   inferred type, so the caller can add the columns and append the same
//!   record to a new decoder; with [`UnknownFieldPolicy::Collect`] the row is
//!   appended without them and [`BatchDecoder::unknown_fields`] lists each
//!   name once (first partition/offset, merged type).
//!   With [`DecoderOptions::payload_fields`] set (the stream's `columns`),
//!   fields outside that list are ignored. With `Reject`, a field whose
//!   value is null is not reported (it reads null without a column).
//! - **Column names**: a column holds the message field [`ColumnNames::of`]
//!   reads from its name (a field named like a metadata column sits in
//!   `<field>_payload`, a case variant of an earlier name in
//!   `<field>__<n>`; see [`crate::names`]); the lookup table is built once
//!   per column set in [`BatchDecoder::new`]. A metadata column always
//!   holds the Kafka value; a message field of that name is payload.
//! - **`double` columns** take integers a double holds exactly (|v| <=
//!   2^53, or any that converts without change); another integer is
//!   `OutOfRange`, never rounded. An integer literal beyond 64 bits reaches
//!   the decoder as a float (serde_json), so it is checked against `long`
//!   and `int` columns (a mismatch) but stored rounded in a `double` column.

mod avro;
mod buffer;
mod debezium;
mod error;
pub mod fit;
mod flat;
mod framed;
mod key_field;
mod metadata;
mod protobuf;
mod schema_error;
mod seed;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::SchemaRef;
use serde::de::{Deserializer as _, IgnoredAny};

pub use avro::{parse_uuid, AvroType};
pub use debezium::{change_columns, change_columns_in, ChangeColumns};
pub use error::{DecodeError, DecodeErrorKind, UnknownField};
pub use framed::RegistryValues;
use key_field::KeyField;
pub use key_field::{ALL_KEY_FIELDS, KEY_FIELD_PREFIX};
pub use protobuf::{ProtoField, ProtoMessage, ProtoSchema};
pub use schema_error::{SchemaError, SchemaErrorKind};

use crate::columns::{self, metadata_column_type, TableColumns};
use crate::infer::non_object_kind;
use crate::names::ColumnNames;
use crate::olake_id::{encode_append, hash_hex};
use crate::record::SourceRecord;
use buffer::ColumnBuffer;
use framed::Plan;
use metadata::MetadataColumns;
use seed::{Failure, FieldIndex, Row};

/// How `_olake_id` is computed (see [`crate::append_olake_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdMode {
    /// From topic, partition and offset.
    Append,
    /// From these columns' values in this row, in this order.
    Upsert { key_columns: Vec<String> },
}

/// What to do with a message field the table has no column for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnknownFieldPolicy {
    /// Fail the record with [`DecodeErrorKind::UnknownFields`].
    #[default]
    Reject,
    /// Append the row without the field; list it in
    /// [`BatchDecoder::unknown_fields`].
    Collect,
}

/// How a [`BatchDecoder`] fills the metadata columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoderOptions {
    /// How `_olake_id` is computed.
    pub id_mode: IdMode,
    /// `_olake_timestamp` of every row (microseconds since the epoch): when
    /// the batch is written. [`BatchDecoder::set_olake_timestamp`] changes it.
    pub olake_timestamp_micros: i64,
    /// What to do with fields the table has no column for.
    pub unknown_fields: UnknownFieldPolicy,
    /// The stream's `columns` setting: when set, a field that is not a
    /// column and not in this list is ignored (never unknown, never a new
    /// column). `None`: every field counts.
    pub payload_fields: Option<Arc<HashSet<String>>>,
    /// Registry-framed values (`value_format` avro, protobuf or auto), or
    /// `None`: every value is a JSON object.
    pub registry: Option<Arc<RegistryValues>>,
    /// How message keys are encoded (the stream's `key_format`), for
    /// `_kafka_key.<field>` dedup keys: `auto` reads framed keys by their
    /// schema and others as JSON objects.
    pub key_format: crate::ValueFormat,
    /// Whether values are change events (`change_events`), read by
    /// [`debezium`]'s rules.
    pub change_events: crate::config::ChangeEvents,
    /// Whether `_kafka_headers`, where the table has it, gets the
    /// message's headers (`kafka_headers`); else null.
    pub kafka_headers: bool,
    /// Change events: a delete becomes its `before` row, marked
    /// `_cdc_op = "d"` (`soft_deletes`), and a tombstone is passed.
    pub soft_deletes: bool,
    /// Change events in append mode: every event is a row, a delete its
    /// `before` (`_cdc_op` d).
    pub events_as_rows: bool,
    /// With `events_as_rows`: a truncate is a row of nulls (`_cdc_op` t)
    /// instead of a [`DecodeErrorKind::Truncate`].
    pub truncates_as_rows: bool,
    /// Change events of an upsert table: a value Debezium did not send
    /// (its placeholder for an unchanged TOASTed column) is written as a
    /// null and listed by [`BatchDecoder::take_unsent`], for the sync to
    /// fill from the key's previous row; else the event fails naming the
    /// field.
    pub keep_unsent: bool,
}

/// A value a change event did not send (see [`DecoderOptions::keep_unsent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsentValue {
    /// Its row in the batch.
    pub row: u32,
    /// Its column's name.
    pub column: Arc<str>,
    /// The `_olake_id` bytes of the key the row had before this event
    /// (Debezium's `__debezium.oldkey` header on the create of a
    /// primary-key change): the value is that key's.
    pub moved_from: Option<[u8; 16]>,
}

impl DecoderOptions {
    /// Append mode, rejecting unknown fields.
    pub fn append(olake_timestamp_micros: i64) -> Self {
        Self {
            id_mode: IdMode::Append,
            olake_timestamp_micros,
            unknown_fields: UnknownFieldPolicy::Reject,
            payload_fields: None,
            registry: None,
            key_format: crate::ValueFormat::Auto,
            change_events: crate::config::ChangeEvents::None,
            kafka_headers: false,
            soft_deletes: false,
            events_as_rows: false,
            truncates_as_rows: false,
            keep_unsent: false,
        }
    }
}

/// Options that do not fit the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecoderConfigError {
    /// An upsert key names no column of the table.
    #[error("dedup key column {0:?} is not a column of the table")]
    UnknownKeyColumn(String),
    /// Upsert mode without key columns.
    #[error("upsert mode needs at least one dedup key column")]
    EmptyKey,
    /// `_olake_id` as a key column: the id is computed from the key.
    #[error("_olake_id is computed from the dedup key and cannot be part of it")]
    IdInKey,
}

/// One part of an upsert key.
enum KeyPart {
    /// A column of the row.
    Column(usize),
    /// A field of the message key (`_kafka_key.<field>`).
    KeyField(KeyField),
}

/// Decodes records of one table into Arrow record batches.
pub struct BatchDecoder {
    schema: SchemaRef,
    buffers: Vec<ColumnBuffer>,
    fields: FieldIndex,
    payload: Vec<usize>,
    metadata: MetadataColumns,
    /// `None` in append mode, else the key's parts in order.
    key_columns: Option<Vec<KeyPart>>,
    olake_timestamp_micros: i64,
    policy: UnknownFieldPolicy,
    unknown: Vec<UnknownField>,
    /// `(index, type before)` of unknown fields the current record widened.
    unknown_undo: Vec<(usize, Option<columns::ColumnType>)>,
    scratch: Vec<u8>,
    /// The append-mode `_olake_id` bytes of the last record (topic,
    /// partition, offset): the topic's part is kept for the next one.
    place: Vec<u8>,
    rows: usize,
    registry: Option<Arc<RegistryValues>>,
    /// Writer schemas compiled for these columns, by schema id.
    plans: framed::Plans,
    /// The Protobuf reader's reusable state.
    wire: protobuf::Scratch,
    /// Messages to go before the flat reader is tried again (it gave a
    /// message back to serde this many messages ago, less).
    flat_skip: u32,
    /// What `flat_skip` is set to when the flat reader gives a message
    /// back: [`FLAT_SKIP`] (tests also try 0 and `u32::MAX`).
    flat_pause: u32,
    /// `change_events`: whether values are change events.
    change_events: crate::config::ChangeEvents,
    /// [`DecoderOptions::kafka_headers`].
    kafka_headers: bool,
    /// [`DecoderOptions::soft_deletes`].
    soft_deletes: bool,
    /// [`DecoderOptions::events_as_rows`].
    events_as_rows: bool,
    /// [`DecoderOptions::truncates_as_rows`].
    truncates_as_rows: bool,
    /// Connect schemas of change events compiled for these columns.
    change_plans: debezium::ChangePlans,
    /// The change event's source time (microseconds) while its row is
    /// appended: its `_cdc_timestamp`.
    change_micros: Option<i64>,
    /// The last change event's place in the source's log (`source.lsn`):
    /// its row's `_cdc_lsn`, and the order of a delete.
    change_lsn: Option<i64>,
    /// The last change event's operation (`c`, `r` or `u`; `None`: not
    /// stated), for `_cdc_op`.
    change_op: Option<&'static str>,
    /// The `_olake_id` of the key an update event moved its row away from
    /// (payload keys whose values changed), for the sync to delete.
    replaced_key: Option<String>,
    /// [`DecoderOptions::keep_unsent`].
    keep_unsent: bool,
    /// The values the change events did not send.
    unsent: debezium::Unsent,
    /// The last registry schema of change events, by id.
    change_schema: Option<(u32, Arc<debezium::ChangeSchema>)>,
    /// An Avro change event as its JSON payload (reused).
    change_json: Vec<u8>,
}

/// JSON messages read by serde alone after one the flat reader gave back.
const FLAT_SKIP: u32 = 63;

impl std::fmt::Debug for BatchDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchDecoder")
            .field("columns", &self.buffers.len())
            .field("rows", &self.rows)
            .field("approx_bytes", &self.approx_bytes())
            .finish_non_exhaustive()
    }
}

impl BatchDecoder {
    /// A decoder producing batches with `columns`' Arrow schema.
    pub fn new(
        columns: &TableColumns,
        options: DecoderOptions,
    ) -> Result<Self, DecoderConfigError> {
        let cols = columns.columns();
        // Which field each column holds: decided once per column set.
        let (_, fields) = ColumnNames::of(columns);
        let mut by_name = HashMap::with_capacity(cols.len());
        let mut metadata = MetadataColumns::default();
        let mut payload = Vec::new();
        for (i, (c, field)) in cols.iter().zip(&fields).enumerate() {
            if let Some(field) = field {
                by_name.insert(field.clone().into_boxed_str(), i);
                payload.push(i);
                continue;
            }
            *metadata.slot(&c.name) = Some(i);
        }
        // Errors and the positional hint speak of message fields.
        let names: Vec<Box<str>> = cols
            .iter()
            .zip(&fields)
            .map(|(c, f)| f.as_deref().unwrap_or(&c.name).into())
            .collect();
        let key_columns = match options.id_mode {
            IdMode::Append => None,
            IdMode::Upsert { key_columns } if key_columns.is_empty() => {
                return Err(DecoderConfigError::EmptyKey)
            }
            IdMode::Upsert { key_columns } => Some(
                key_columns
                    .into_iter()
                    .map(|k| {
                        if k == columns::OLAKE_ID {
                            return Err(DecoderConfigError::IdInKey);
                        }
                        if let Some(field) = k.strip_prefix(KEY_FIELD_PREFIX) {
                            let key = KeyField::new(field, options.key_format);
                            return Ok(KeyPart::KeyField(key));
                        }
                        // `_kafka_key` is the metadata column; any other
                        // key names a payload field (maybe renamed).
                        let position = if metadata_column_type(&k).is_some() {
                            cols.iter().position(|c| c.name == k)
                        } else {
                            fields.iter().position(|f| f.as_deref() == Some(&k))
                        };
                        position
                            .map(KeyPart::Column)
                            .ok_or(DecoderConfigError::UnknownKeyColumn(k))
                    })
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(Self {
            schema: Arc::new(columns.arrow_schema()),
            buffers: cols
                .iter()
                .map(|c| ColumnBuffer::new(c.ty.clone()))
                .collect(),
            fields: FieldIndex {
                by_name,
                verbatim: names.iter().map(|n| flat::verbatim(n)).collect(),
                names,
                hint: Vec::new(),
                seen: vec![0; cols.len()],
                stamp: 0,
                allowed: options.payload_fields,
            },
            payload,
            metadata,
            key_columns,
            olake_timestamp_micros: options.olake_timestamp_micros,
            policy: options.unknown_fields,
            unknown: Vec::new(),
            unknown_undo: Vec::new(),
            scratch: Vec::with_capacity(64),
            place: Vec::with_capacity(64),
            rows: 0,
            registry: options.registry,
            plans: framed::Plans::default(),
            wire: protobuf::Scratch::default(),
            flat_skip: 0,
            flat_pause: FLAT_SKIP,
            change_events: options.change_events,
            kafka_headers: options.kafka_headers,
            soft_deletes: options.soft_deletes,
            events_as_rows: options.events_as_rows,
            truncates_as_rows: options.truncates_as_rows,
            change_plans: debezium::ChangePlans::default(),
            change_micros: None,
            change_lsn: None,
            change_op: None,
            replaced_key: None,
            keep_unsent: options.keep_unsent,
            unsent: Default::default(),
            change_schema: None,
            change_json: Vec::new(),
        })
    }

    /// Whether the upsert key is read from the message key alone (every
    /// part a `_kafka_key.<field>`), so a tombstone names the row it
    /// deletes ([`BatchDecoder::key_olake_id`]).
    pub fn key_from_message_key(&self) -> bool {
        self.key_columns
            .as_ref()
            .is_some_and(|keys| keys.iter().all(|k| matches!(k, KeyPart::KeyField(_))))
    }

    /// Whether the upsert key has a payload column (a change stream's
    /// deletes then name their row by their `before`).
    pub fn key_in_payload(&self) -> bool {
        let payload =
            |k: &KeyPart| matches!(k, KeyPart::Column(c) if self.metadata.key != Some(*c));
        self.key_columns
            .as_ref()
            .is_some_and(|keys| keys.iter().any(payload))
    }

    /// `_olake_id` of the row a record's key identifies, when
    /// [`BatchDecoder::key_from_message_key`]: what its tombstone deletes.
    pub fn key_olake_id(&mut self, record: &SourceRecord<'_>) -> Result<String, DecodeError> {
        self.scratch.clear();
        self.scratch.push(b'K');
        for part in self.key_columns.iter_mut().flatten() {
            let KeyPart::KeyField(f) = part else {
                unreachable!("asked only when every key part is a key field")
            };
            f.encode(self.registry.as_deref(), record.key, &mut self.scratch)
                .map_err(|kind| {
                    let field = format!("{KEY_FIELD_PREFIX}{}", f.name());
                    error(record, Some(field), kind)
                })?;
        }
        let hex = hash_hex(&self.scratch);
        Ok(std::str::from_utf8(&hex)
            .expect("hex digits are ASCII")
            .to_owned())
    }

    /// Tests: how many messages serde reads alone after the flat reader
    /// gave one back (0: the flat reader tries every message; `u32::MAX`
    /// with `now`: serde reads every message).
    #[cfg(test)]
    pub(crate) fn set_flat_pause(&mut self, pause: u32, now: bool) {
        self.flat_pause = pause;
        if now {
            self.flat_skip = pause;
        }
    }

    /// The schema of the batches [`BatchDecoder::finish`] returns.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Sets `_olake_timestamp` for the rows appended from now on.
    pub fn set_olake_timestamp(&mut self, micros: i64) {
        self.olake_timestamp_micros = micros;
    }

    /// Decodes one record into a new row. On error nothing was appended.
    pub fn append(&mut self, record: &SourceRecord<'_>) -> Result<(), DecodeError> {
        if self.change_events == crate::config::ChangeEvents::Debezium {
            return self.append_change(record);
        }
        let Some(value) = record.value else {
            return Err(error(record, None, DecodeErrorKind::Tombstone));
        };
        if let Some(registry) = &self.registry {
            match crate::registry::framing(value) {
                Some(f) => return self.append_framed(record, f.schema_id, &value[f.body_start..]),
                None if registry.format == crate::ValueFormat::Auto => {}
                None => {
                    let format = registry.format;
                    return Err(error(record, None, DecodeErrorKind::NotFramed { format }));
                }
            }
        }
        self.append_json(record, value)
    }

    /// A JSON object value into a new row.
    fn append_json(&mut self, record: &SourceRecord<'_>, value: &[u8]) -> Result<(), DecodeError> {
        let row = self.rows;
        if self.policy == UnknownFieldPolicy::Reject {
            self.unknown.clear();
        }
        let unknown_mark = self.unknown.len();
        self.unknown_undo.clear();
        self.fields.stamp += 1;
        if self.flat_skip == 0 {
            if flat::read(
                value,
                &mut self.buffers,
                &mut self.fields,
                &mut self.scratch,
            ) {
                return self.close_json_row(record, row, unknown_mark);
            }
            // Not a message the flat reader takes: serde reads it from
            // scratch, and the next messages too (a topic of nested values
            // pays the flat reader's try once in FLAT_SKIP + 1 messages).
            self.rollback(row, unknown_mark);
            self.fields.stamp += 1;
            self.flat_skip = self.flat_pause;
        } else {
            self.flat_skip -= 1;
        }

        // JSON is UTF-8: checking the whole value once lets serde_json skip
        // its check of every string.
        let text = match std::str::from_utf8(value) {
            Ok(text) => text,
            Err(e) => {
                let reason = format!("invalid UTF-8 at byte {}", e.valid_up_to());
                return Err(error(record, None, DecodeErrorKind::NotJson { reason }));
            }
        };
        let mut failure = None;
        let mut de = serde_json::Deserializer::from_str(text);
        let parsed = de
            .deserialize_map(Row {
                buffers: &mut self.buffers,
                fields: &mut self.fields,
                unknown: &mut self.unknown,
                unknown_undo: &mut self.unknown_undo,
                failure: &mut failure,
                partition: record.partition,
                offset: record.offset,
            })
            .and_then(|()| de.end());
        if let Err(e) = parsed {
            self.rollback(row, unknown_mark);
            return Err(self.parse_error(record, value, e, failure));
        }
        if self.policy == UnknownFieldPolicy::Reject {
            // A field that is only null here reads null without a column:
            // no reason to refuse the record or add a column yet.
            self.unknown.retain(|u| u.ty.is_some());
        }
        if self.policy == UnknownFieldPolicy::Reject && !self.unknown.is_empty() {
            let unknown = std::mem::take(&mut self.unknown);
            self.rollback(row, 0);
            let field = Some(unknown[0].name.clone());
            return Err(error(
                record,
                field,
                DecodeErrorKind::UnknownFields(unknown),
            ));
        }
        self.close_json_row(record, row, unknown_mark)
    }

    /// Nulls in the payload columns the message did not set, then the
    /// metadata columns.
    fn close_json_row(
        &mut self,
        record: &SourceRecord<'_>,
        row: usize,
        unknown_mark: usize,
    ) -> Result<(), DecodeError> {
        let stamp = self.fields.stamp;
        for &column in &self.payload {
            if self.fields.seen[column] != stamp {
                self.buffers[column].push_null();
            }
        }
        self.finish_row(record, row, unknown_mark)
    }

    /// The metadata columns of the row just decoded; the row counts.
    fn finish_row(
        &mut self,
        record: &SourceRecord<'_>,
        row: usize,
        unknown_mark: usize,
    ) -> Result<(), DecodeError> {
        if let Err(e) = self.append_metadata(record, row) {
            self.rollback(row, unknown_mark);
            return Err(e);
        }
        self.rows += 1;
        Ok(())
    }

    /// A registry-framed value with writer schema `id` into a new row.
    fn append_framed(
        &mut self,
        record: &SourceRecord<'_>,
        id: u32,
        body: &[u8],
    ) -> Result<(), DecodeError> {
        if !self.plans.contains_key(&id) {
            let plan = self.compile(record, id)?;
            self.plans.insert(id, plan);
        }
        let row = self.rows;
        let unknown_mark = self.unknown.len();
        match &self.plans[&id] {
            Plan::Json => return self.append_json(record, body),
            Plan::Protobuf(_) => return self.append_protobuf(record, id, body),
            Plan::Fails(kind) => return Err(plan_failure(record, kind)),
            Plan::Avro {
                fields,
                names,
                absent,
            } => {
                let mut cursor = avro::Cursor::new(body);
                let read = avro::read_fields(fields, absent, &mut cursor, &mut self.buffers)
                    .map_err(|(i, bad)| (Some(names[i].clone()), bad))
                    .and_then(|()| match cursor.remaining() {
                        0 => Ok(()),
                        n => Err((None, avro::Bad::Trailing(n))),
                    });
                if let Err((field, bad)) = read {
                    self.rollback(row, unknown_mark);
                    let kind = match bad {
                        avro::Bad::Full => DecodeErrorKind::BatchFull,
                        bad => DecodeErrorKind::BadBody {
                            schema_id: id,
                            reason: bad.to_string(),
                        },
                    };
                    return Err(error(record, field, kind));
                }
            }
        }
        if let Some(registry) = &self.registry {
            registry.used(id);
        }
        self.finish_row(record, row, unknown_mark)
    }

    /// The plan for writer schema `id` against these columns; `Err` when
    /// the registry could not be asked (not cached: a later message asks
    /// again).
    fn compile(&self, record: &SourceRecord<'_>, id: u32) -> Result<Plan, DecodeError> {
        let registry = self
            .registry
            .as_ref()
            .expect("framed values have a registry");
        let parsed = registry
            .parsed(id)
            .map_err(|kind| error(record, None, kind))?;
        let lookup = |name: &str| self.fields.by_name.get(name).copied();
        let columns = self.columns(&lookup);
        Ok(framed::plan(
            id,
            &parsed,
            &columns,
            registry.last_used(),
            (record.partition, record.offset),
        ))
    }

    /// What a plan needs to know about these columns.
    fn columns<'a>(&'a self, lookup: &'a dyn Fn(&str) -> Option<usize>) -> framed::Columns<'a> {
        framed::Columns {
            lookup,
            types: self.buffers.iter().map(|b| &b.ty).collect(),
            payload: &self.payload,
            allowed: self.fields.allowed.as_deref(),
        }
    }

    /// Undoes a failed record: every column back to `rows` rows.
    fn rollback(&mut self, rows: usize, unknown_mark: usize) {
        for buffer in &mut self.buffers {
            buffer.truncate(rows);
        }
        self.unsent.truncate(rows);
        self.unknown.truncate(unknown_mark);
        // Fields listed before this record get back the type they had.
        for (i, ty) in self.unknown_undo.drain(..).rev() {
            if let Some(field) = self.unknown.get_mut(i) {
                field.ty = ty;
            }
        }
    }

    fn parse_error(
        &self,
        record: &SourceRecord<'_>,
        value: &[u8],
        parse: serde_json::Error,
        failure: Option<Failure>,
    ) -> DecodeError {
        let name = |column: usize| Some(self.fields.names[column].to_string());
        let ty = |column: usize| self.buffers[column].ty.clone();
        let (field, kind) = match failure {
            Some(Failure::Mismatch { column, found }) => (
                name(column),
                DecodeErrorKind::TypeMismatch {
                    expected: ty(column),
                    found,
                },
            ),
            Some(Failure::OutOfRange { column, found }) => (
                name(column),
                DecodeErrorKind::OutOfRange {
                    expected: ty(column),
                    found,
                },
            ),
            Some(Failure::BatchFull { column }) => (name(column), DecodeErrorKind::BatchFull),
            // Not ours: the value is not JSON, or not an object.
            None => match serde_json::from_slice::<IgnoredAny>(value) {
                Err(e) => (
                    None,
                    DecodeErrorKind::NotJson {
                        reason: e.to_string(),
                    },
                ),
                Ok(_) => match non_object_kind(value) {
                    Some(found) => (None, DecodeErrorKind::NotAnObject { found }),
                    None => (
                        None,
                        DecodeErrorKind::NotJson {
                            reason: parse.to_string(),
                        },
                    ),
                },
            },
        };
        error(record, field, kind)
    }

    /// Rows appended since the last [`BatchDecoder::finish`].
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether no row was appended since the last [`BatchDecoder::finish`].
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Room for a batch of `rows` rows, so that the buffers do not grow
    /// (and copy what they hold) on the way there: best called once some
    /// rows are held, since variable-width values are projected from them.
    pub fn reserve_rows(&mut self, rows: usize) {
        for buffer in &mut self.buffers {
            buffer.reserve(rows);
        }
    }

    /// Roughly the bytes the pending rows hold in memory, for rolling
    /// batches and files at a target size.
    pub fn approx_bytes(&self) -> usize {
        self.buffers.iter().map(ColumnBuffer::approx_bytes).sum()
    }

    /// With [`UnknownFieldPolicy::Collect`]: each field seen that the table
    /// has no column for, once, in first-seen order.
    pub fn unknown_fields(&self) -> &[UnknownField] {
        &self.unknown
    }

    /// Takes the collected unknown fields, leaving the list empty.
    pub fn take_unknown_fields(&mut self) -> Vec<UnknownField> {
        std::mem::take(&mut self.unknown)
    }

    /// The values the change events of the batch [`Self::finish`] gave
    /// last did not send (see [`DecoderOptions::keep_unsent`]), each
    /// written as a null: (row, column name), rows ascending.
    pub fn take_unsent(&mut self) -> Vec<UnsentValue> {
        self.unsent.take()
    }

    /// The pending rows as a record batch; the decoder starts a new, empty
    /// batch (same schema, same options).
    pub fn finish(&mut self) -> RecordBatch {
        self.unsent.finish();
        let arrays = self.buffers.iter_mut().map(ColumnBuffer::finish).collect();
        let rows = std::mem::take(&mut self.rows);
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)
            .expect("every column has one value per row and the schema's type")
    }
}

/// A record refused by its schema's plan: the field named is the first
/// one to add or widen.
fn plan_failure(record: &SourceRecord<'_>, kind: &DecodeErrorKind) -> DecodeError {
    let field = match kind {
        DecodeErrorKind::UnknownFields(u) => u.first().map(|u| u.name.clone()),
        DecodeErrorKind::Widen(w) => w.first().map(|(n, _)| n.clone()),
        _ => None,
    };
    error(record, field, kind.clone())
}

/// `out` = the append-mode `_olake_id` bytes of `record`'s place
/// ([`encode_append`]); the topic's part is written only when `out` does
/// not hold it already (a decoder's records share one topic).
fn place_bytes(out: &mut Vec<u8>, record: &SourceRecord<'_>) {
    let topic = record.topic.as_bytes();
    let prefix = 5 + topic.len();
    if out.len() != prefix + 12 || !flat::same_bytes(&out[5..prefix], topic) {
        encode_append(out, record.topic, record.partition, record.offset);
        return;
    }
    out[prefix..prefix + 4].copy_from_slice(&record.partition.to_be_bytes());
    out[prefix + 4..].copy_from_slice(&record.offset.to_be_bytes());
}

fn error(record: &SourceRecord<'_>, field: Option<String>, kind: DecodeErrorKind) -> DecodeError {
    DecodeError {
        topic: record.topic.to_owned(),
        partition: record.partition,
        offset: record.offset,
        field,
        kind,
    }
}

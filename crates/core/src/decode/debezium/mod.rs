//! Debezium change events (`change_events = "debezium"`): the row is the
//! event's `after`, its operation decides what happens to the key.
//!
//! - A JSON value written with `schemas.enable=true` (`{"schema": ..,
//!   "payload": ..}`) is read by its Connect schema: each field of `after`
//!   gets the exact column type its schema names ([`schema`]), and a field
//!   the table lacks is reported as an unknown field of that type, so the
//!   table evolves as for a registry schema. The plan for a schema is made
//!   once per decoder (keyed by the schema's text).
//! - Without the schema (`schemas.enable=false`) `after` is read as any
//!   JSON object: types are inferred from the values, so a decimal Debezium
//!   wrote as base64 bytes becomes a string column of that base64 text; use
//!   `schemas.enable=true` (or Debezium's `decimal.handling.mode=string`).
//! - `op` `c` (create), `r` (snapshot read) and `u` (update) give the row;
//!   `d` (delete) is a [`DecodeErrorKind::Tombstone`], which an upsert
//!   table turns into a delete of the message key's row, as it does for
//!   the Kafka tombstone that follows it. `t` (truncate) is a
//!   [`DecodeErrorKind::Truncate`]. `m` (message) and anything else are
//!   not rows: [`DecodeErrorKind::ChangeEvent`].
//! - A message without the envelope (no `op` with a `source`) is a
//!   flattened record (Debezium's `ExtractNewRecordState`): itself the row,
//!   typed by its own struct schema when it has one; `__deleted = "true"`
//!   or `__op` `d` delete, `__lsn` and `__source_ts_ms` are its position
//!   and time.
//! - `source.lsn` (PostgreSQL's log position), or MySQL's binlog position
//!   (`source.file`, `pos`, `row`, as one number) fills `_cdc_lsn` where the
//!   table has it, and orders the key's row (or, for a delete,
//!   [`BatchDecoder::change_lsn`]) against its changes on other partitions.
//! - Debezium's placeholder for a value it did not read
//!   (`__debezium_unavailable_value`, an unchanged TOASTed column) is never
//!   written: an upsert table's decoder writes a null and lists the value
//!   ([`BatchDecoder::take_unsent`]) for the sync to fill from the key's
//!   previous row; otherwise the event fails naming the field.

mod connect_avro;
mod from_avro;
pub(crate) mod schema;
#[cfg(test)]
mod tests;
mod unsent;
mod value;

pub(crate) use connect_avro::ChangeSchema;
pub use from_avro::change_columns_in;
pub(crate) use unsent::Unsent;

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::error::DecodeErrorKind;
use super::{error, BatchDecoder};
use crate::columns::ColumnType;
use crate::record::{Headers, SourceRecord};
use schema::{after_fields, ConnectSchema, Read};
use value::Bad;

pub(crate) use value::UNAVAILABLE;

/// The parts of an event this module reads, borrowed from the message.
struct Event<'a> {
    op: String,
    /// Whether the event says its operation (a flattened record may not:
    /// it is then an upsert of unknown kind).
    op_stated: bool,
    /// `source.ts_ms`: when the change was made in the database.
    source_ms: Option<i64>,
    /// The change's place in the source's log: PostgreSQL's `source.lsn`,
    /// or MySQL's binlog position (`source.file`, `pos`, `row`).
    lsn: Option<i64>,
    /// The row's JSON object: `after`, or a flattened record itself.
    after: Option<&'a str>,
    /// The row before the change: an envelope's `before` (null: `None`),
    /// a deleted flattened record itself.
    before: Option<&'a str>,
    schema: SchemaAt<'a>,
}

/// Where an event's Connect schema is.
#[derive(Clone, Copy)]
enum SchemaAt<'a> {
    /// The event has none (`schemas.enable=false`).
    Absent,
    /// Its text, to be looked up.
    Text(&'a str),
    /// The same text as the last event's (see [`ChangePlans::payload_after_last`]).
    Last,
}

/// The fields of a message this module looks at, each kept as its raw
/// JSON and read only when it has the expected form (a column of a
/// flattened record may be called `op`, `source` or `payload`).
#[derive(Deserialize)]
struct Fields<'a> {
    /// Kafka Connect's JSON converter with `schemas.enable=true` wraps the
    /// value as `{"schema": .., "payload": ..}` (`Some(None)`: present,
    /// null).
    #[serde(borrow, default, deserialize_with = "present")]
    schema: Option<Option<&'a RawValue>>,
    /// `Some(None)`: `"payload": null`, the JSON converter's form of a
    /// null value with a schema (a tombstone).
    #[serde(borrow, default, deserialize_with = "present")]
    payload: Option<Option<&'a RawValue>>,
    /// An envelope's.
    #[serde(borrow, default)]
    after: Option<&'a RawValue>,
    #[serde(borrow, default)]
    before: Option<&'a RawValue>,
    #[serde(borrow, default)]
    op: Option<&'a RawValue>,
    #[serde(borrow, default)]
    source: Option<&'a RawValue>,
    /// The markers Debezium's `ExtractNewRecordState` adds to a flattened
    /// record (`add.fields=op,lsn,source.ts_ms`, `delete.handling.mode`
    /// `rewrite`).
    #[serde(borrow, default, rename = "__op")]
    flat_op: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "__deleted")]
    flat_deleted: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "__lsn")]
    flat_lsn: Option<&'a RawValue>,
    /// MySQL's position (`add.fields=file,pos,row`).
    #[serde(borrow, default, rename = "__file")]
    flat_file: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "__pos")]
    flat_pos: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "__row")]
    flat_row: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "__source_ts_ms")]
    flat_source_ms: Option<&'a RawValue>,
}

/// The part of an envelope's `source` read here.
#[derive(Deserialize, Default)]
struct Source<'a> {
    #[serde(borrow, default)]
    ts_ms: Option<&'a RawValue>,
    #[serde(borrow, default)]
    lsn: Option<&'a RawValue>,
    /// MySQL's binlog file (`mysql-bin.000003`), the event's position in
    /// it and the row's number within the event.
    #[serde(borrow, default)]
    file: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pos: Option<&'a RawValue>,
    #[serde(borrow, default)]
    row: Option<&'a RawValue>,
}

impl Source<'_> {
    /// The change's place in the source's log as one number: PostgreSQL's
    /// LSN, or MySQL's binlog position ([`binlog_position`]).
    fn position(&self) -> Option<i64> {
        long(self.lsn)
            .or_else(|| binlog_position(&text(self.file)?, long(self.pos)?, long(self.row)))
    }
}

/// Bits of a MySQL position's parts in one `i64`: the binlog file's number,
/// the event's position in the file, the row's number within the event.
const BINLOG_POS_BITS: u32 = 32;
const BINLOG_ROW_BITS: u32 = 11;
const BINLOG_FILE_BITS: u32 = 63 - BINLOG_POS_BITS - BINLOG_ROW_BITS;

/// A MySQL binlog position (`file` `mysql-bin.000003`, `pos`, `row`) as one
/// number ordered as the log is: the file's number, then the position,
/// then the row. `None` when a part does not fit (no position: the event
/// orders by its Kafka timestamp, as a source without positions does).
fn binlog_position(file: &str, pos: i64, row: Option<i64>) -> Option<i64> {
    let number: i64 = file.rsplit('.').next()?.parse().ok()?;
    let row = row.unwrap_or(0);
    let fits = |v: i64, bits: u32| (0..1i64 << bits).contains(&v);
    if !(fits(number, BINLOG_FILE_BITS) && fits(pos, BINLOG_POS_BITS) && fits(row, BINLOG_ROW_BITS))
    {
        return None;
    }
    Some(number << (BINLOG_POS_BITS + BINLOG_ROW_BITS) | pos << BINLOG_ROW_BITS | row)
}

/// A field that is there, null or not.
fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<&'de RawValue>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

/// `raw` as a string, if it is one.
fn text(raw: Option<&RawValue>) -> Option<String> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// `raw` as an integer, if it is one.
fn long(raw: Option<&RawValue>) -> Option<i64> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// The event in `value`, or why it is not one.
fn event<'a>(value: &'a [u8], headers: &Headers<'_>) -> Result<Event<'a>, DecodeErrorKind> {
    let top: Fields<'_> =
        serde_json::from_slice(value).map_err(|e| bad(format!("not a JSON object: {e}")))?;
    match (top.schema, top.payload) {
        // A null value written with its (struct) schema.
        (Some(Some(schema)), Some(None)) if top.op.is_none() && schema.get().starts_with('{') => {
            Err(DecodeErrorKind::Tombstone)
        }
        (Some(schema), Some(Some(payload))) if top.op.is_none() => {
            let schema = schema.map_or(SchemaAt::Absent, |s| SchemaAt::Text(s.get()));
            payload_event(payload.get().as_bytes(), schema, headers)
        }
        _ => top.event(value, SchemaAt::Absent, headers),
    }
}

/// The event whose `payload` is `payload`, with its schema at `schema`.
fn payload_event<'a>(
    payload: &'a [u8],
    schema: SchemaAt<'a>,
    headers: &Headers<'_>,
) -> Result<Event<'a>, DecodeErrorKind> {
    if payload == b"null" {
        return Err(DecodeErrorKind::Tombstone);
    }
    let p: Fields<'_> = serde_json::from_slice(payload)
        .map_err(|e| bad(format!("payload is not a JSON object: {e}")))?;
    p.event(payload, schema, headers)
}

impl<'a> Fields<'a> {
    /// The event these fields make, read from `json`, with its schema at
    /// `schema`. An envelope has a string `op` and an object `source`;
    /// anything else is a flattened record, itself the row: deleted when
    /// `__deleted` is `"true"` (or `__op` is `d`: the field, else the
    /// header `add.headers=op` writes), else an upsert.
    fn event(
        self,
        json: &'a [u8],
        schema: SchemaAt<'a>,
        headers: &Headers<'_>,
    ) -> Result<Event<'a>, DecodeErrorKind> {
        let source = self.source.filter(|s| s.get().starts_with('{'));
        if let (Some(op), Some(source)) = (text(self.op), source) {
            let source: Source<'_> = serde_json::from_str(source.get()).unwrap_or_default();
            return Ok(Event {
                op,
                op_stated: true,
                source_ms: long(source.ts_ms),
                lsn: source.position(),
                after: self.after.map(RawValue::get),
                before: self.before.map(RawValue::get).filter(|b| *b != "null"),
                schema,
            });
        }
        let deleted = match self.flat_deleted {
            Some(d) => matches!(d.get(), "\"true\"" | "true"),
            None => false,
        };
        let stated = match text(self.flat_op) {
            Some(op) => Some(op),
            None => headers.last(OP_HEADER, header_text)?.flatten(),
        };
        let op_stated = stated.is_some() || deleted;
        let op = match stated {
            _ if deleted => "d".to_owned(),
            Some(op) => op,
            None => "u".to_owned(),
        };
        // Parsed as JSON above: UTF-8.
        let row = std::str::from_utf8(json).map_err(|e| bad(format!("not UTF-8: {e}")))?;
        Ok(Event {
            op: op.clone(),
            op_stated,
            source_ms: long(self.flat_source_ms),
            lsn: long(self.flat_lsn).or_else(|| {
                binlog_position(
                    &text(self.flat_file)?,
                    long(self.flat_pos)?,
                    long(self.flat_row),
                )
            }),
            after: Some(row),
            // A deleted record is the row as it was.
            before: (op == "d").then_some(row),
            schema,
        })
    }
}

/// Whether a decode error is one the sync answers by appending the message
/// again (new columns, wider types, a full batch), not a fault of it.
fn retried(kind: &DecodeErrorKind) -> bool {
    matches!(
        kind,
        DecodeErrorKind::BatchFull
            | DecodeErrorKind::UnknownFields(_)
            | DecodeErrorKind::Widen(_)
            | DecodeErrorKind::OutOfRange { .. }
    )
}

/// The message key before a primary-key change: the `__debezium.oldkey`
/// header's fields over the message key's. The header holds the source's
/// key as captured, so a field a transform added to the message key (as
/// `ByLogicalTableRouter`'s `__dbz__physicalTableIdentifier`) is the
/// message key's; keys that are not JSON objects are the header as it is.
fn old_key(key: Option<&[u8]>, header: &[u8]) -> Vec<u8> {
    let object = |bytes: &[u8]| -> Option<serde_json::Map<String, serde_json::Value>> {
        let mut value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        if value.get("schema").is_some() {
            value = value.get_mut("payload")?.take();
        }
        match value {
            serde_json::Value::Object(map) => Some(map),
            _ => None,
        }
    };
    let (Some(mut merged), Some(old)) = (key.and_then(object), object(header)) else {
        return header.to_vec();
    };
    if old.keys().all(|k| merged.contains_key(k)) && old.len() == merged.len() {
        return header.to_vec();
    }
    merged.extend(old);
    serde_json::Value::Object(merged).to_string().into_bytes()
}

/// The header Debezium writes on the create event of a primary-key change:
/// the row's key before it.
const OLD_KEY_HEADER: &str = "__debezium.oldkey";

/// The header Debezium's `ExtractNewRecordState` writes the operation in
/// (`add.headers=op`).
const OP_HEADER: &str = "__op";

/// A header's value as text: Kafka Connect's default header converter
/// writes a string as its bytes, the JSON converter as a JSON string.
fn header_text(value: Option<&[u8]>) -> Option<String> {
    let value = value?;
    match serde_json::from_slice::<String>(value) {
        Ok(text) => Some(text),
        Err(_) => std::str::from_utf8(value).ok().map(str::to_owned),
    }
}

/// A change event that is not one this module reads.
fn bad(reason: String) -> DecodeErrorKind {
    DecodeErrorKind::ChangeEvent { reason }
}

/// The columns an event's `after` gives: typed from its Connect schema,
/// or `Untyped` with `after`'s JSON for inference. `None`: the event has
/// no row (a delete, a truncate, a tombstone).
pub enum ChangeColumns<'a> {
    /// From the Connect schema, in field order.
    Typed(Vec<(String, ColumnType)>),
    /// `after` as JSON, to infer from.
    Untyped(&'a [u8]),
}

/// The decode error for a value that could not be read.
fn bad_kind(bad: Bad) -> DecodeErrorKind {
    match bad {
        Bad::Full => DecodeErrorKind::BatchFull,
        Bad::Unavailable => DecodeErrorKind::ChangeEvent {
            reason: format!(
                "Debezium did not send this value ({UNAVAILABLE}: an unchanged TOASTed \
                 column); set REPLICA IDENTITY FULL on the source table"
            ),
        },
        Bad::Form(reason) => DecodeErrorKind::ChangeEvent { reason },
    }
}

/// The columns of the change event `value` (see [`ChangeColumns`]).
pub fn change_columns(value: &[u8]) -> Result<Option<ChangeColumns<'_>>, DecodeErrorKind> {
    match event(value, &Headers::None) {
        Err(DecodeErrorKind::Tombstone) => Ok(None),
        other => columns_of(other?),
    }
}

/// The columns of `event` (see [`ChangeColumns`]).
fn columns_of(event: Event<'_>) -> Result<Option<ChangeColumns<'_>>, DecodeErrorKind> {
    let schema = match event.schema {
        SchemaAt::Text(text) => Some(text),
        _ => None,
    };
    let Some(after) = event
        .after
        .filter(|_| matches!(event.op.as_str(), "c" | "r" | "u"))
    else {
        return Ok(None);
    };
    match schema {
        None => Ok(Some(ChangeColumns::Untyped(after.as_bytes()))),
        Some(schema) => {
            let parsed: ConnectSchema = serde_json::from_str(schema)
                .map_err(|e| bad(format!("schema is not a Connect schema: {e}")))?;
            let fields = after_fields(&parsed).map_err(|e| bad(e.to_string()))?;
            Ok(Some(ChangeColumns::Typed(
                fields.into_iter().map(|(n, t, _)| (n, t)).collect(),
            )))
        }
    }
}

/// How a Connect schema's `after` is read into these columns.
pub(crate) enum ChangePlan {
    Read {
        /// Field name, its column (`None`: read past), how.
        fields: Vec<(String, Option<usize>, Read)>,
        /// Payload columns no field fills.
        absent: Vec<usize>,
    },
    Fails(DecodeErrorKind),
}

/// Plans by the hash of their schema's text (the text kept to tell a
/// collision), and the last one used: a stream's events mostly repeat one
/// schema, and comparing its text costs a fraction of hashing it.
#[derive(Default)]
pub(crate) struct ChangePlans {
    by_hash: HashMap<u64, (String, ChangePlan)>,
    last: Option<u64>,
}

impl ChangePlans {
    /// `value`'s payload when its schema is, byte for byte, the last one
    /// used: Kafka Connect's JSON converter writes
    /// `{"schema":S,"payload":P}` without spaces, so an event of a known
    /// schema is found by comparing bytes, without parsing the schema
    /// again (most of a small event's bytes).
    fn payload_after_last<'v>(&self, value: &'v [u8]) -> Option<&'v [u8]> {
        let last = &self.by_hash.get(&self.last?)?.0;
        value
            .strip_prefix(b"{\"schema\":")?
            .strip_prefix(last.as_bytes())?
            .strip_prefix(b",\"payload\":")?
            .strip_suffix(b"}")
    }
}

impl BatchDecoder {
    /// The place in the source's log (`source.lsn`) of the last change
    /// event given to [`BatchDecoder::append`]: what orders a delete
    /// against the key's changes on other partitions. `None` for a Kafka
    /// tombstone and for an event without one.
    pub fn change_lsn(&self) -> Option<i64> {
        self.change_lsn
    }

    /// The operation (`c`, `r`, `u`; `d` for a soft delete's row, `t` for
    /// a truncate's) of the last change event [`BatchDecoder::append`]
    /// made a row of; `None` for a row whose event names none (a
    /// flattened record without `__op`) and for a value that is not a
    /// change event.
    pub fn change_op(&self) -> Option<&'static str> {
        self.change_op
    }

    /// Whether these columns have `_cdc_lsn`, which then orders the rows
    /// of a key across partitions (see [`BatchDecoder::change_lsn`]).
    pub fn has_change_lsn(&self) -> bool {
        self.metadata.cdc_lsn.is_some()
    }

    /// A change event into a new row (see the [module docs](self)).
    pub(super) fn append_change(
        &mut self,
        record: &SourceRecord<'_>,
    ) -> Result<(), super::DecodeError> {
        self.change_lsn = None;
        self.change_op = None;
        self.replaced_key = None;
        let Some(value) = record.value else {
            return Err(error(record, None, DecodeErrorKind::Tombstone));
        };
        if let Some(registry) = self.registry.clone() {
            match crate::registry::framing(value) {
                Some(f) => {
                    let body = &value[f.body_start..];
                    return self.append_framed_change(record, &registry, f.schema_id, body);
                }
                None if registry.format == crate::ValueFormat::Auto => {}
                None => {
                    let format = registry.format;
                    return Err(error(record, None, DecodeErrorKind::NotFramed { format }));
                }
            }
        }
        let event = match self.change_plans.payload_after_last(value) {
            Some(payload) => payload_event(payload, SchemaAt::Last, &record.headers),
            None => event(value, &record.headers),
        }
        .map_err(|kind| error(record, None, kind))?;
        self.append_event(record, event)
    }

    /// A change event's row, delete or truncate (see
    /// [`BatchDecoder::append_change`]).
    fn append_event(
        &mut self,
        record: &SourceRecord<'_>,
        event: Event<'_>,
    ) -> Result<(), super::DecodeError> {
        let bad = |reason: String| error(record, None, DecodeErrorKind::ChangeEvent { reason });
        self.change_lsn = event.lsn;
        let soft_delete = event.op == "d" && (self.soft_deletes || self.events_as_rows);
        if event.op == "t" && self.truncates_as_rows {
            // A truncate in the log of events: a row of nulls, marked.
            self.change_op = Some("t");
            self.change_micros = event.source_ms.and_then(|ms| ms.checked_mul(1000));
            let appended = self.append_row_of(record, SchemaAt::Absent, "{}");
            self.change_micros = None;
            return appended;
        }
        match event.op.as_str() {
            "c" => self.change_op = Some("c"),
            "r" => self.change_op = Some("r"),
            "u" => self.change_op = Some("u"),
            "d" if soft_delete => self.change_op = Some("d"),
            "d" if self.key_in_payload() => {
                let olake_id = self.key_of_before(record, &event)?;
                return Err(error(record, None, DecodeErrorKind::DeleteKey { olake_id }));
            }
            "d" => return Err(error(record, None, DecodeErrorKind::Tombstone)),
            "t" => return Err(error(record, None, DecodeErrorKind::Truncate)),
            other => return Err(bad(format!("`op` {other:?} is not a row change"))),
        }
        // A soft delete keeps the row as the delete's `before` has it.
        let Some(after) = (if soft_delete {
            event.before
        } else {
            event.after
        }) else {
            if soft_delete {
                return Err(bad(
                    "a delete without `before`, which soft_deletes keeps as the row: \
                     set REPLICA IDENTITY FULL on the source table"
                        .to_owned(),
                ));
            }
            return Err(bad(format!("`op` {} without `after`", event.op)));
        };
        if !event.op_stated {
            self.change_op = None;
        }
        // Payload keys: an update whose `before` has another key moves the
        // row; the old key's row goes (`before` is there with REPLICA
        // IDENTITY FULL).
        let old_key = match event.before {
            Some(_) if !soft_delete && self.key_in_payload() => self.old_key(record, &event)?,
            _ => None,
        };
        self.change_micros = event.source_ms.and_then(|ms| ms.checked_mul(1000));
        let row = self.rows;
        let appended = self.append_row_of(record, event.schema, after);
        self.change_micros = None;
        appended?;
        self.note_moved_from(record, row);
        if let Some(old) = old_key.filter(|old| self.olake_id_at(row) != Some(old.as_str())) {
            self.replaced_key = Some(old);
        }
        Ok(())
    }

    /// The row object `json` (an event's `after` or `before`) into a new
    /// row, read by the event's schema.
    fn append_row_of(
        &mut self,
        record: &SourceRecord<'_>,
        schema: SchemaAt<'_>,
        json: &str,
    ) -> Result<(), super::DecodeError> {
        match schema {
            SchemaAt::Absent => match value::without_unsent(json) {
                None => self.append_json(record, json.as_bytes()),
                Some((json, names)) => self.append_json_unsent(record, &json, &names),
            },
            SchemaAt::Text(schema) => self.append_typed(record, Some(schema), json),
            SchemaAt::Last => self.append_typed(record, None, json),
        }
    }

    /// A row object read without its schema whose fields `names` had
    /// Debezium's placeholder (now null in `json`): kept as unsent values
    /// ([`super::DecoderOptions::keep_unsent`]), else the event fails naming
    /// the first. A field these columns lack is listed by its name: the
    /// table may have it (another thread's decoder added it).
    fn append_json_unsent(
        &mut self,
        record: &SourceRecord<'_>,
        json: &str,
        names: &[String],
    ) -> Result<(), super::DecodeError> {
        if !self.keep_unsent {
            let field = names.first().cloned();
            return Err(error(record, field, bad_kind(Bad::Unavailable)));
        }
        let row = self.rows;
        self.append_json(record, json.as_bytes())?;
        for name in names {
            match self.fields.by_name.get(name.as_str()) {
                Some(&column) => self.unsent.push(row, self.schema.field(column).name()),
                None => self.unsent.push(row, name),
            }
        }
        Ok(())
    }

    /// A row with unsent values whose event is the create of a primary-key
    /// change: the key it moved from (Debezium's `__debezium.oldkey`
    /// header, written as the message key is) holds its values.
    fn note_moved_from(&mut self, record: &SourceRecord<'_>, row: usize) {
        if !self.unsent.in_row(row) || !self.key_from_message_key() {
            return;
        }
        let Ok(Some(Some(old))) = record
            .headers
            .last(OLD_KEY_HEADER, |v| v.map(<[u8]>::to_vec))
        else {
            return;
        };
        let old = old_key(record.key, &old);
        let old_record = SourceRecord {
            key: Some(&old),
            ..*record
        };
        let id = self.key_olake_id(&old_record).ok();
        if let Some(bytes) = id.and_then(|id| crate::olake_id_bytes(id.as_bytes())) {
            self.unsent.moved(row, bytes);
        }
    }

    /// The `_olake_id` of the row at `row` (upsert tables have one).
    fn olake_id_at(&self, row: usize) -> Option<&str> {
        match self.buffers[self.metadata.id?].key_value(row) {
            crate::KeyValue::String(id) => Some(id),
            _ => None,
        }
    }

    /// The key an update's `before` names, if it names one: a `before`
    /// without a usable key (a null key column: that row was never in the
    /// table) moves nothing. Only what the `after` will ask for too (new
    /// columns, a full batch) is passed on.
    fn old_key(
        &mut self,
        record: &SourceRecord<'_>,
        event: &Event<'_>,
    ) -> Result<Option<String>, super::DecodeError> {
        match self.key_of_before(record, event) {
            Ok(id) => Ok(Some(id)),
            Err(e) if retried(&e.kind) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// The `_olake_id` of an event's `before` (a delete's row, or the row
    /// an update changed), read as a row and taken back out.
    fn key_of_before(
        &mut self,
        record: &SourceRecord<'_>,
        event: &Event<'_>,
    ) -> Result<String, super::DecodeError> {
        let fix = "the dedup key's payload fields are read from the event's `before`: \
                   set REPLICA IDENTITY FULL on the source table (or key on its primary key)";
        let Some(before) = event.before else {
            let reason = format!("a delete without `before`; {fix}");
            return Err(error(record, None, DecodeErrorKind::ChangeEvent { reason }));
        };
        let row = self.rows;
        let mark = self.unknown.len();
        // Undo entries of an earlier message are not this row's.
        self.unknown_undo.clear();
        self.append_row_of(record, event.schema, before)
            .map_err(|e| match e.kind {
                DecodeErrorKind::NullKey => {
                    let reason = format!("`before` has no value for the key; {fix}");
                    error(
                        record,
                        e.field.clone(),
                        DecodeErrorKind::ChangeEvent { reason },
                    )
                }
                _ => e,
            })?;
        let id = self.olake_id_at(row).map(str::to_owned);
        self.rollback(row, mark);
        self.rows = row;
        id.ok_or_else(|| error(record, None, DecodeErrorKind::NullKey))
    }

    /// Whether deletes become rows marked `_cdc_op = "d"` (soft deletes):
    /// a Kafka tombstone then deletes nothing.
    pub fn keeps_deleted_rows(&self) -> bool {
        self.soft_deletes || self.events_as_rows
    }

    /// The `_olake_id` of the key the last update moved its row away from
    /// (see [`BatchDecoder::key_in_payload`]): the sync deletes it.
    pub fn take_replaced_key(&mut self) -> Option<String> {
        self.replaced_key.take()
    }

    /// `after` read by the plan of its Connect schema (`None`: the last).
    fn append_typed(
        &mut self,
        record: &SourceRecord<'_>,
        schema: Option<&str>,
        after: &str,
    ) -> Result<(), super::DecodeError> {
        let plans = &self.change_plans;
        let key = match (plans.last, schema) {
            (Some(last), None) => last,
            (Some(last), Some(schema)) if plans.by_hash[&last].0 == schema => last,
            (_, None) => unreachable!("an event of the last schema before any"),
            (_, Some(schema)) => {
                let mut hasher = DefaultHasher::new();
                schema.hash(&mut hasher);
                let key = hasher.finish();
                if plans
                    .by_hash
                    .get(&key)
                    .is_none_or(|(text, _)| text != schema)
                {
                    let plan = self.change_plan(schema, (record.partition, record.offset));
                    self.change_plans
                        .by_hash
                        .insert(key, (schema.to_owned(), plan));
                }
                self.change_plans.last = Some(key);
                key
            }
        };
        let row = self.rows;
        let unknown_mark = self.unknown.len();
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(after)
            .map_err(|e| {
                let reason = format!("`after` is not an object: {e}");
                error(record, None, DecodeErrorKind::ChangeEvent { reason })
            })?;
        let (fields, absent) = match &self.change_plans.by_hash[&key].1 {
            ChangePlan::Fails(kind) => return Err(error(record, None, kind.clone())),
            ChangePlan::Read { fields, absent } => (fields, absent),
        };
        let null = serde_json::Value::Null;
        let mut failed = None;
        for (name, target, read) in fields {
            let Some(column) = target else { continue };
            let v = object.get(name).unwrap_or(&null);
            match value::push(read, v, &mut self.buffers[*column]) {
                Ok(()) => {}
                Err(Bad::Unavailable) if self.keep_unsent => {
                    self.buffers[*column].push_null();
                    self.unsent.push(row, self.schema.field(*column).name());
                }
                Err(bad) => {
                    failed = Some((name.clone(), bad));
                    break;
                }
            }
        }
        if failed.is_none() {
            for &c in absent {
                self.buffers[c].push_null();
            }
        }
        if let Some((field, bad)) = failed {
            self.rollback(row, unknown_mark);
            return Err(error(record, Some(field), bad_kind(bad)));
        }
        self.finish_row(record, row, unknown_mark)
    }

    /// The plan for the envelope schema `text` against these columns.
    fn change_plan(&self, text: &str, at: (i32, i64)) -> ChangePlan {
        let fails = |reason: String| ChangePlan::Fails(DecodeErrorKind::ChangeEvent { reason });
        let parsed: ConnectSchema = match serde_json::from_str(text) {
            Ok(p) => p,
            Err(e) => return fails(format!("schema is not a Connect schema: {e}")),
        };
        let fields = match after_fields(&parsed) {
            Ok(f) => f,
            Err(e) => return fails(e.to_string()),
        };
        let lookup = |name: &str| self.fields.by_name.get(name).copied();
        let columns = self.columns(&lookup);
        let wanted: Vec<(&str, Option<ColumnType>)> = fields
            .iter()
            .map(|(n, t, _)| (n.as_str(), Some(t.clone())))
            .collect();
        let targets = match super::framed::place(0, &wanted, &columns, None, at) {
            Ok(t) => t,
            Err(DecodeErrorKind::SchemaMismatch { reason, .. }) => {
                return fails(format!(
                    "the Connect schema does not fit the table: {reason}"
                ))
            }
            Err(kind) => return ChangePlan::Fails(kind),
        };
        let absent = super::framed::absent_columns(&columns, &targets);
        ChangePlan::Read {
            fields: fields
                .into_iter()
                .zip(targets)
                .map(|((n, _, r), t)| (n, t, r))
                .collect(),
            absent,
        }
    }
}

//! The decoder's rules (see the `decode` module docs) restated as a slow
//! reference model over `serde_json`, and a [`Checker`] that feeds records
//! to a [`BatchDecoder`] and asserts, after every call, that it agrees with
//! the model: the outcome (row or error, and which error when the model can
//! tell), the row count, the collected unknown fields, and on `finish` every
//! cell of the batch, which must also pass Arrow's full validation.
//!
//! Shared by the proptest suite (`decode::tests::fuzz`) and the cargo-fuzz
//! target (`fuzz/fuzz_targets/decode.rs` includes this file by path), so it
//! uses only the public API, through a `tb` module its includer defines
//! (`crate` in the suite, `topicberg_core` in the fuzz target).

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType,
};
use arrow_array::{Array, RecordBatch};
use base64::Engine as _;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::tb::columns::{metadata_column_type, METADATA_COLUMNS};
use super::tb::{
    append_olake_id, merge_types, parse_timestamp_micros, upsert_olake_id, BatchDecoder, Column,
    ColumnType, DecodeError, DecodeErrorKind, DecoderOptions, IdMode, KeyValue, SourceRecord,
    TableColumns, UnknownField, UnknownFieldPolicy,
};

/// The topic every record comes from.
pub const TOPIC: &str = "orders";
/// `_olake_timestamp` of every row.
pub const WRITTEN: i64 = 1_800_000_000_000_000;

/// The table shapes the fuzzers pick from: the seed topics, one column of
/// every type, an evolved table (catalog order, some metadata columns
/// missing), awkward names, metadata only, and no columns at all.
pub fn tables() -> Vec<TableColumns> {
    use ColumnType::*;
    let new = |payload: &[(&str, ColumnType)]| {
        let payload: Vec<_> = payload
            .iter()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect();
        TableColumns::for_new_table(&payload).expect("valid table")
    };
    vec![
        new(&[
            ("id", Long),
            ("customer_id", Long),
            ("product", String),
            ("amount", Double),
            ("status", String),
            ("created_at", TimestampTz),
            ("updated_at", TimestampTz),
        ]),
        new(&[
            ("id", Long),
            ("name", String),
            ("email", String),
            ("city", String),
            ("tier", String),
            ("created_at", TimestampTz),
            ("updated_at", TimestampTz),
        ]),
        new(&[
            ("l", Long),
            ("i", Int),
            ("d", Double),
            ("b", Boolean),
            ("s", String),
            ("t", TimestampTz),
            ("j", Json),
        ]),
        new(&[("f", Float), ("g", Float), ("id", Long)]),
        TableColumns::new(vec![
            Column::new(9, "_olake_id", String),
            Column::new(3, "j", Json),
            Column::new(4, "_kafka_offset", Long),
            Column::new(7, "i", Int),
            Column::new(1, "s", String),
            Column::new(2, "b", Boolean),
            Column::new(12, "_cdc_timestamp", TimestampTz),
            Column::new(5, "d", Double),
            Column::new(6, "t", TimestampTz),
        ])
        .expect("valid table"),
        new(&[
            ("", String),
            ("a\"b\\c", Long),
            ("ünï 😀", Double),
            ("_kafka_offset_", Boolean),
            ("Id", Json),
            ("\u{1}", TimestampTz),
            ("x\u{2028}", Int),
        ]),
        new(&[]),
        TableColumns::new(Vec::new()).expect("valid table"),
    ]
}

/// Field names a stream's `columns` list may allow besides the table's.
pub const ALLOWED_EXTRA: [&str; 3] = ["unknown", "x", "ünï"];

/// A decoder configuration: table `table % tables().len()`; in upsert mode
/// the key columns are the columns `keys` picks (modulo the column count,
/// first occurrence kept), or `_kafka_key`/the first column when it picks
/// none; unknown fields collected or rejected; with `allow`, a `columns`
/// list of the table's payload columns and [`ALLOWED_EXTRA`].
pub fn setup(
    table: usize,
    upsert: bool,
    keys: &[u8],
    collect: bool,
    allow: bool,
) -> (TableColumns, DecoderOptions) {
    let all = tables();
    let columns = all[table % all.len()].clone();
    let names: Vec<&str> = columns.columns().iter().map(|c| c.name.as_str()).collect();
    // A table without columns has no key to upsert by.
    let id_mode = if upsert && !names.is_empty() {
        let mut key_columns: Vec<String> = Vec::new();
        for &k in keys {
            let name = names[k as usize % names.len()];
            // The id hashes the key: BatchDecoder::new refuses it as one.
            if name == "_olake_id" {
                continue;
            }
            if !key_columns.iter().any(|n| n == name) {
                key_columns.push(name.to_owned());
            }
        }
        if key_columns.is_empty() {
            key_columns.push(
                names
                    .iter()
                    .find(|n| **n != "_olake_id")
                    .unwrap_or(&names[0])
                    .to_string(),
            );
        }
        IdMode::Upsert { key_columns }
    } else {
        IdMode::Append
    };
    let options = DecoderOptions {
        id_mode,
        olake_timestamp_micros: WRITTEN,
        unknown_fields: if collect {
            UnknownFieldPolicy::Collect
        } else {
            UnknownFieldPolicy::Reject
        },
        payload_fields: allow.then(|| {
            let payload = columns.payload().map(|c| c.name.clone());
            Arc::new(
                payload
                    .chain(ALLOWED_EXTRA.map(str::to_owned))
                    .collect::<HashSet<_>>(),
            )
        }),
        registry: None,
        key_format: crate::ValueFormat::Auto,
        change_events: crate::config::ChangeEvents::None,
        kafka_headers: false,
        soft_deletes: false,
        keep_unsent: false,
        events_as_rows: false,
        truncates_as_rows: false,
    };
    (columns, options)
}

/// One cell as the model expects it (`timestamptz` as microseconds,
/// `json` as its text, doubles by bits so -0.0 differs from 0.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    Null,
    Long(i64),
    Int(i32),
    Double(u64),
    Float(u32),
    Bool(bool),
    Str(String),
}

/// The error the model expects; `Any` when it cannot tell which one the
/// decoder meets first (a value that is both malformed and mistyped).
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    Any,
    Tombstone,
    NotJson,
    NotAnObject,
    Mismatch(String, ColumnType),
    OutOfRange(String, ColumnType),
    Unknown(Vec<UnknownField>),
    NullKey(String),
}

/// A message object's fields in order, duplicates kept, values as text.
struct Pairs(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Pairs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
                let mut pairs = Vec::new();
                while let Some(entry) = map.next_entry::<String, Box<RawValue>>()? {
                    pairs.push(entry);
                }
                Ok(Pairs(pairs))
            }
        }
        d.deserialize_map(V)
    }
}

/// A column value by the type rules.
fn convert(name: &str, raw: &str, ty: ColumnType) -> Result<Cell, Expected> {
    if ty == ColumnType::Json {
        return Ok(if raw == "null" {
            Cell::Null
        } else {
            Cell::Str(raw.to_owned())
        });
    }
    let mismatch = || Err(Expected::Mismatch(name.to_owned(), ty.clone()));
    let out_of_range = || Err(Expected::OutOfRange(name.to_owned(), ty.clone()));
    if raw.starts_with(['{', '[']) {
        return mismatch();
    }
    let value: Value = serde_json::from_str(raw).map_err(|_| Expected::NotJson)?;
    match (value, ty.clone()) {
        (Value::Null, _) => Ok(Cell::Null),
        (Value::Bool(b), ColumnType::Boolean) => Ok(Cell::Bool(b)),
        (Value::Number(n), ColumnType::Long) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Ok(Cell::Long(i)),
            (None, Some(_)) => out_of_range(),
            _ => mismatch(),
        },
        (Value::Number(n), ColumnType::Int) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i32::try_from(i).map(Cell::Int).or_else(|_| out_of_range()),
            (None, Some(_)) => out_of_range(),
            _ => mismatch(),
        },
        (Value::Number(n), ColumnType::Double) => {
            // Integers only where a double holds them exactly.
            let f = match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) if (i as f64) as i128 == i128::from(i) => i as f64,
                (None, Some(u), _) if (u as f64) as u128 == u128::from(u) => u as f64,
                (Some(_), _, _) | (None, Some(_), _) => return out_of_range(),
                (None, None, f) => f.expect("a JSON number"),
            };
            Ok(Cell::Double(f.to_bits()))
        }
        (Value::Number(n), ColumnType::Float) => {
            let f = match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => return Ok(Cell::Float((i as f32).to_bits())),
                (None, Some(u), _) => return Ok(Cell::Float((u as f32).to_bits())),
                (None, None, f) => f.expect("a JSON number"),
            };
            if f.abs() <= f64::from(f32::MAX) {
                Ok(Cell::Float((f as f32).to_bits()))
            } else {
                out_of_range()
            }
        }
        (Value::String(s), ColumnType::String) => Ok(Cell::Str(s)),
        (Value::String(s), ColumnType::TimestampTz) => match parse_timestamp_micros(&s) {
            Some(micros) => Ok(Cell::Long(micros)),
            None => mismatch(),
        },
        _ => mismatch(),
    }
}

/// The type inference gives a value (`None` for null).
fn type_of(raw: &str) -> Result<Option<ColumnType>, Expected> {
    if raw.starts_with(['{', '[']) {
        return Ok(Some(ColumnType::Json));
    }
    let value: Value = serde_json::from_str(raw).map_err(|_| Expected::NotJson)?;
    Ok(match value {
        Value::Null => None,
        Value::Bool(_) => Some(ColumnType::Boolean),
        Value::Number(n) if n.as_i64().is_some() => Some(ColumnType::Long),
        // serde_json reads `-0` as a float; an integer beyond i64 keeps
        // its digits in a `json` column.
        Value::Number(_) if raw.contains(['.', 'e', 'E']) || raw == "-0" => {
            Some(ColumnType::Double)
        }
        Value::Number(_) => Some(ColumnType::Json),
        Value::String(s) if parse_timestamp_micros(&s).is_some() => Some(ColumnType::TimestampTz),
        Value::String(_) => Some(ColumnType::String),
        Value::Array(_) | Value::Object(_) => Some(ColumnType::Json),
    })
}

fn merge(a: Option<ColumnType>, b: Option<ColumnType>) -> Option<ColumnType> {
    match (a, b) {
        (Some(a), Some(b)) => Some(merge_types(a, b)),
        (a, b) => a.or(b),
    }
}

/// Adds a field seen in `record` to an unknown-field list, as the decoder does.
fn note_unknown(
    list: &mut Vec<UnknownField>,
    name: &str,
    ty: Option<ColumnType>,
    r: &SourceRecord<'_>,
) {
    match list.iter_mut().find(|u| u.name == name) {
        Some(u) => u.ty = merge(u.ty.clone(), ty),
        None => list.push(UnknownField {
            name: name.to_owned(),
            ty,
            partition: r.partition,
            offset: r.offset,
        }),
    }
}

fn key_value(cell: &Cell, ty: ColumnType) -> KeyValue<'_> {
    match (cell, ty) {
        (Cell::Null, _) => KeyValue::Null,
        (Cell::Long(v), ColumnType::TimestampTz) => KeyValue::TimestampMicros(*v),
        (Cell::Long(v), _) => KeyValue::Long(*v),
        (Cell::Int(v), _) => KeyValue::Int(*v),
        (Cell::Double(bits), _) => KeyValue::Double(f64::from_bits(*bits)),
        (Cell::Float(bits), _) => KeyValue::Double(f64::from(f32::from_bits(*bits))),
        (Cell::Bool(b), _) => KeyValue::Boolean(*b),
        (Cell::Str(s), _) => KeyValue::String(s),
    }
}

/// Feeds records to a decoder and checks each result against the model.
pub struct Checker {
    decoder: BatchDecoder,
    columns: TableColumns,
    options: DecoderOptions,
    /// The rows the pending batch must hold.
    rows: Vec<Vec<Cell>>,
    /// With `Collect`: the unknown fields the decoder must list.
    unknown: Vec<UnknownField>,
    /// Records appended, and failed, so far (for reports).
    pub appended: usize,
    pub failed: usize,
}

impl Checker {
    /// A checker around a new decoder for `columns` and `options`.
    pub fn new(columns: TableColumns, options: DecoderOptions) -> Self {
        let decoder = BatchDecoder::new(&columns, options.clone()).expect("valid key columns");
        Self::around(decoder, columns, options)
    }

    /// A checker around `decoder`, made for `columns` and `options`.
    pub fn around(decoder: BatchDecoder, columns: TableColumns, options: DecoderOptions) -> Self {
        Self {
            decoder,
            columns,
            options,
            rows: Vec::new(),
            unknown: Vec::new(),
            appended: 0,
            failed: 0,
        }
    }

    /// What appending `r` must do: the new row, or the error.
    fn expect(&self, r: &SourceRecord<'_>) -> (Result<Vec<Cell>, Expected>, Vec<UnknownField>) {
        let mut unknown = match self.options.unknown_fields {
            UnknownFieldPolicy::Collect => self.unknown.clone(),
            UnknownFieldPolicy::Reject => Vec::new(),
        };
        let Some(value) = r.value else {
            return (Err(Expected::Tombstone), unknown);
        };
        let Ok(text) = std::str::from_utf8(value) else {
            return (Err(Expected::NotJson), unknown);
        };
        let pairs = match serde_json::from_str::<Pairs>(text) {
            Ok(Pairs(pairs)) => pairs,
            Err(_) => {
                let valid = serde_json::from_str::<IgnoredAny>(text).is_ok();
                let object = text.trim_start().starts_with('{');
                let e = if valid && !object {
                    Expected::NotAnObject
                } else {
                    Expected::Any
                };
                return (Err(e), unknown);
            }
        };
        let cols = self.columns.columns();
        let mut row = vec![Cell::Null; cols.len()];
        let mut new_unknown = Vec::new();
        for (name, raw) in &pairs {
            // A field named like a metadata column is payload: it has a
            // column only under a renamed name (none of these tables has one).
            let payload_column = cols
                .iter()
                .position(|c| &c.name == name && metadata_column_type(name).is_none());
            match payload_column {
                Some(i) => match convert(name, raw.get(), cols[i].ty.clone()) {
                    Ok(cell) => row[i] = cell,
                    Err(e) => return (Err(e), unknown),
                },
                // Not in the stream's `columns` list: skipped.
                None if !self
                    .options
                    .payload_fields
                    .as_ref()
                    .is_none_or(|a| a.contains(name)) => {}
                None => match type_of(raw.get()) {
                    Ok(ty) => note_unknown(&mut new_unknown, name, ty, r),
                    Err(e) => return (Err(e), unknown),
                },
            }
        }
        if self.options.unknown_fields == UnknownFieldPolicy::Reject {
            // Fields that are only null read null without a column.
            new_unknown.retain(|u| u.ty.is_some());
            if !new_unknown.is_empty() {
                return (Err(Expected::Unknown(new_unknown)), unknown);
            }
        }
        let previous = unknown.clone();
        for u in &new_unknown {
            note_unknown(&mut unknown, &u.name, u.ty.clone(), r);
        }
        // Metadata columns, in table order; `_olake_id` last (it hashes
        // other cells of the row).
        let micros = r.timestamp_ms.and_then(|ms| ms.checked_mul(1000));
        let mut id = None;
        for (i, c) in cols.iter().enumerate() {
            row[i] = match c.name.as_str() {
                "_kafka_key" => match r.key {
                    Some(k) => Cell::Str(base64::engine::general_purpose::STANDARD.encode(k)),
                    None => Cell::Null,
                },
                "_kafka_partition" => Cell::Int(r.partition),
                "_kafka_offset" => Cell::Long(r.offset),
                "_kafka_timestamp" | "_cdc_timestamp" => micros.map_or(Cell::Null, Cell::Long),
                "_op_type" => Cell::Str("c".into()),
                "_olake_timestamp" => Cell::Long(WRITTEN),
                "_olake_id" => {
                    id = Some(i);
                    continue;
                }
                _ => continue,
            };
        }
        if let Some(id) = id {
            row[id] = match &self.options.id_mode {
                IdMode::Append => Cell::Str(append_olake_id(r.topic, r.partition, r.offset)),
                IdMode::Upsert { key_columns } => {
                    let mut values = Vec::new();
                    for k in key_columns {
                        let i = cols.iter().position(|c| &c.name == k).expect("key column");
                        let v = key_value(&row[i], cols[i].ty.clone());
                        if v == KeyValue::Null {
                            return (Err(Expected::NullKey(k.clone())), previous);
                        }
                        values.push(v);
                    }
                    Cell::Str(upsert_olake_id(&values))
                }
            };
        }
        (Ok(row), unknown)
    }

    /// Appends `r` and checks the outcome; panics on any disagreement.
    pub fn append(&mut self, r: &SourceRecord<'_>) {
        let before = self.decoder.len();
        assert_eq!(before, self.rows.len());
        let (expected, unknown) = self.expect(r);
        let got = self.decoder.append(r);
        match (&got, &expected) {
            (Ok(()), Ok(row)) => {
                assert_eq!(
                    self.decoder.len(),
                    before + 1,
                    "an appended record adds one row"
                );
                self.rows.push(row.clone());
                self.unknown = unknown;
                self.appended += 1;
            }
            (Err(e), Err(x)) => {
                assert_eq!(
                    self.decoder.len(),
                    before,
                    "a failed record adds no row: {e}"
                );
                check_error(e, x, r);
                if self.options.unknown_fields == UnknownFieldPolicy::Reject {
                    self.unknown.clear();
                }
                self.failed += 1;
            }
            _ => panic!("decoder gave {got:?}, the model expected {expected:?}, for {r:?}"),
        }
        assert_eq!(
            self.decoder.unknown_fields(),
            &self.unknown[..],
            "unknown fields after {r:?} ({got:?})"
        );
    }

    /// Takes the collected unknown fields; the list starts over.
    pub fn take_unknown_fields(&mut self) {
        assert_eq!(
            self.decoder.take_unknown_fields(),
            std::mem::take(&mut self.unknown)
        );
    }

    /// Finishes the batch and checks every cell of it.
    pub fn finish(&mut self) -> RecordBatch {
        let batch = self.decoder.finish();
        let rows = std::mem::take(&mut self.rows);
        assert_eq!(batch.num_rows(), rows.len());
        assert_eq!(*batch.schema(), self.columns.arrow_schema());
        assert!(self.decoder.is_empty());
        for (i, c) in self.columns.columns().iter().enumerate() {
            let array = batch.column(i);
            assert_eq!(array.len(), rows.len(), "column {:?}", c.name);
            array
                .to_data()
                .validate_full()
                .unwrap_or_else(|e| panic!("column {:?} is not valid Arrow: {e}", c.name));
            for (r, row) in rows.iter().enumerate() {
                assert_eq!(
                    cell(array, c.ty.clone(), r),
                    row[i],
                    "column {:?} row {r}",
                    c.name
                );
            }
        }
        batch
    }
}

/// The error names the record, and is the one the model expects.
fn check_error(e: &DecodeError, expected: &Expected, r: &SourceRecord<'_>) {
    let text = e.to_string();
    let prefix = format!("{}[{}]@{}: ", r.topic, r.partition, r.offset);
    assert!(
        text.starts_with(&prefix),
        "{text:?} does not start with {prefix:?}"
    );
    assert_eq!(
        (e.topic.as_str(), e.partition, e.offset),
        (r.topic, r.partition, r.offset)
    );
    let field = e.field.as_deref();
    match (&e.kind, expected) {
        (_, Expected::Any) => {}
        (DecodeErrorKind::Tombstone, Expected::Tombstone)
        | (DecodeErrorKind::NotJson { .. }, Expected::NotJson)
        | (DecodeErrorKind::NotAnObject { .. }, Expected::NotAnObject) => {
            assert_eq!(field, None, "{text}");
        }
        (DecodeErrorKind::TypeMismatch { expected: ty, .. }, Expected::Mismatch(name, want))
        | (DecodeErrorKind::OutOfRange { expected: ty, .. }, Expected::OutOfRange(name, want)) => {
            assert_eq!((field, ty), (Some(name.as_str()), want), "{text}");
        }
        (DecodeErrorKind::UnknownFields(list), Expected::Unknown(want)) => {
            assert_eq!(list, want, "{text}");
            assert_eq!(field, Some(want[0].name.as_str()), "{text}");
        }
        (DecodeErrorKind::NullKey, Expected::NullKey(name)) => {
            assert_eq!(field, Some(name.as_str()), "{text}");
        }
        _ => panic!(
            "decoder error {text:?} ({:?}), the model expected {expected:?}",
            e.kind
        ),
    }
}

/// The cell at `row` of a decoder column of type `ty`.
fn cell(array: &dyn Array, ty: ColumnType, row: usize) -> Cell {
    if array.is_null(row) {
        return Cell::Null;
    }
    match ty {
        ColumnType::Long => Cell::Long(array.as_primitive::<Int64Type>().value(row)),
        ColumnType::TimestampTz => {
            Cell::Long(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        ColumnType::Int => Cell::Int(array.as_primitive::<Int32Type>().value(row)),
        ColumnType::Double => {
            Cell::Double(array.as_primitive::<Float64Type>().value(row).to_bits())
        }
        ColumnType::Float => Cell::Float(array.as_primitive::<Float32Type>().value(row).to_bits()),
        ColumnType::Boolean => Cell::Bool(array.as_boolean().value(row)),
        ColumnType::String | ColumnType::Json => {
            Cell::Str(array.as_string::<i32>().value(row).to_owned())
        }
        other => unreachable!("JSON tables have no {other} columns"),
    }
}

/// Every metadata column name.
pub fn metadata_names() -> impl Iterator<Item = &'static str> {
    METADATA_COLUMNS.iter().map(|(n, _)| *n)
}

/// Realistic messages of the seed topics (scripts/demo.d/sample_messages.py).
pub const SEEDS: [&str; 4] = [
    r#"{"id":1,"customer_id":6,"product":"Keyboard","amount":99.19,"status":"shipped","created_at":"2026-10-29T15:22:04+00:00","updated_at":"2026-10-29T15:22:04+00:00"}"#,
    r#"{"id":7,"customer_id":4,"product":"Mouse","amount":574.32,"status":"delivered","created_at":"2026-10-29T15:22:04+00:00","updated_at":"2026-10-30T09:05:41+00:00"}"#,
    r#"{"id":3,"name":"Liam Carter","email":"liam@example.com","city":"Austin","tier":"gold","created_at":"2026-10-29T15:22:04+00:00","updated_at":"2026-10-30T09:05:41+00:00"}"#,
    r#"{"id":10,"name":"Lucas Silva","email":"lucas@example.com","city":"São Paulo","tier":"bronze","created_at":"2026-10-29T15:22:04+00:00","updated_at":"2026-10-30T09:05:41+00:00"}"#,
];

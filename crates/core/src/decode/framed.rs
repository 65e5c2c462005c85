//! Registry-framed values: the writer schema of each id, fetched once per
//! sync and table, and compiled once per decoder (column set) into a plan
//! that reads the body straight into the column buffers.
//!
//! Rules, decided here:
//! - a top-level Avro record's fields are the payload fields; a value
//!   schema that is not a record (a bare `string`, an array, ...) is one
//!   field named `value`;
//! - a writer field without a column is an unknown field (typed from the
//!   schema), so the sync adds the column as it does for JSON; with the
//!   stream's `columns` list, fields outside it are read past;
//! - a column whose type cannot hold the writer's field asks to widen
//!   ([`crate::decode::fit`]), or makes the message invalid naming the
//!   schema ids;
//! - columns the writer schema does not have read null.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::avro::{self, AvroType, FieldOp};
use super::error::{DecodeErrorKind, UnknownField};
use super::fit::{fit, Fit};
use crate::columns::ColumnType;
use crate::registry::{RegistryErrorKind, SchemaKind, SchemaSource, ValueFormat};

/// A stream's registry-framed values, shared by every decoder of its table.
#[derive(Debug)]
pub struct RegistryValues {
    /// `avro`, `protobuf` or `auto`.
    pub format: ValueFormat,
    source: Arc<dyn SchemaSource>,
    parsed: Mutex<HashMap<u32, Arc<Parsed>>>,
    /// The schema id last read into the table (+1; 0: none yet).
    last_used: AtomicU64,
}

impl PartialEq for RegistryValues {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for RegistryValues {}

impl RegistryValues {
    /// Values of `format`, with writer schemas from `source`.
    pub fn new(format: ValueFormat, source: Arc<dyn SchemaSource>) -> Self {
        Self {
            format,
            source,
            parsed: Mutex::new(HashMap::new()),
            last_used: AtomicU64::new(0),
        }
    }

    /// The writer schema of `id`, parsed (asked of the source on the first
    /// use in this sync).
    pub(crate) fn parsed(&self, id: u32) -> Result<Arc<Parsed>, DecodeErrorKind> {
        if let Some(p) = self.parsed.lock().expect("schemas").get(&id) {
            return Ok(p.clone());
        }
        let schema = self.source.schema_by_id(id).map_err(|e| match e.kind {
            RegistryErrorKind::NotFound => DecodeErrorKind::UnknownSchema {
                schema_id: id,
                reason: e.to_string(),
            },
            _ => DecodeErrorKind::Registry(Box::new(e)),
        })?;
        let parsed = Arc::new(match schema.kind {
            SchemaKind::Json => Parsed::Json,
            SchemaKind::Avro => {
                let refs: Vec<&str> = schema
                    .references
                    .iter()
                    .map(|r| r.schema.as_str())
                    .collect();
                match AvroType::parse(&schema.schema, &refs) {
                    Ok(t) => Parsed::Avro(t),
                    Err(reason) => Parsed::Unsupported(reason),
                }
            }
            SchemaKind::Protobuf => {
                Parsed::Unsupported("Protobuf values are not read yet".to_owned())
            }
        });
        let mut cache = self.parsed.lock().expect("schemas");
        Ok(cache.entry(id).or_insert(parsed).clone())
    }

    /// The payload fields writer schema `id` declares, in order, with the
    /// column type each is stored as (nested field ids 0), for a new
    /// table's columns; `None` for a JSON Schema (its values are JSON).
    pub fn fields_of(&self, id: u32) -> Result<Option<Vec<(String, ColumnType)>>, DecodeErrorKind> {
        let parsed = self.parsed(id)?;
        let unsupported = |reason: String| DecodeErrorKind::UnsupportedSchema {
            schema_id: id,
            reason,
        };
        match parsed.as_ref() {
            Parsed::Json => Ok(None),
            Parsed::Unsupported(reason) => Err(unsupported(reason.clone())),
            Parsed::Avro(writer) => top_level(writer)
                .into_iter()
                .map(|(name, ty)| match ty.column_type() {
                    Ok(t) => Ok((name, t)),
                    Err(reason) => Err(unsupported(format!("field {name}: {reason}"))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    }

    /// Notes that `id` was read into the table.
    pub(crate) fn used(&self, id: u32) {
        self.last_used.store(u64::from(id) + 1, Ordering::Relaxed);
    }

    /// The schema id last read into the table in this sync.
    pub(crate) fn last_used(&self) -> Option<u32> {
        match self.last_used.load(Ordering::Relaxed) {
            0 => None,
            n => Some((n - 1) as u32),
        }
    }
}

/// The payload fields of an Avro value: a record's fields, or the whole
/// value as one field named `value`.
pub(crate) fn top_level(writer: &AvroType) -> Vec<(String, AvroType)> {
    match writer {
        AvroType::Record(r) => r.fields.clone(),
        other => vec![("value".to_owned(), other.clone())],
    }
}

/// A writer schema, parsed.
#[derive(Debug)]
pub(crate) enum Parsed {
    Avro(AvroType),
    /// A JSON Schema: the body is a plain JSON value.
    Json,
    /// Cannot be read into a table; why.
    Unsupported(String),
}

/// A writer schema compiled for one decoder's columns.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Read the Avro body: per writer field its op and column, the writer
    /// field names (for errors), and the payload columns it leaves null.
    Avro {
        fields: Vec<FieldOp>,
        names: Vec<String>,
        absent: Vec<usize>,
    },
    /// Decode the body as a JSON object.
    Json,
    /// Every message of this schema id fails this way (for this decoder).
    Fails(DecodeErrorKind),
}

/// What a plan needs to know about the decoder's columns.
pub(crate) struct Columns<'a> {
    /// Message field name -> column index.
    pub lookup: &'a dyn Fn(&str) -> Option<usize>,
    /// Each column's type.
    pub types: Vec<&'a ColumnType>,
    /// The payload columns.
    pub payload: &'a [usize],
    /// Fields outside the stream's `columns` list are read past.
    pub allowed: Option<&'a std::collections::HashSet<String>>,
}

/// The plan for `parsed` (schema `id`) against `columns`.
pub(crate) fn plan(
    id: u32,
    parsed: &Parsed,
    columns: &Columns<'_>,
    previous: Option<u32>,
    at: (i32, i64),
) -> Plan {
    let writer = match parsed {
        Parsed::Json => return Plan::Json,
        Parsed::Unsupported(reason) => {
            return Plan::Fails(DecodeErrorKind::UnsupportedSchema {
                schema_id: id,
                reason: reason.clone(),
            })
        }
        Parsed::Avro(t) => t,
    };
    let top = top_level(writer);
    let mut fields = Vec::with_capacity(top.len());
    let mut unknown = Vec::new();
    let mut widen = Vec::new();
    for (name, ty) in &top {
        let wanted = match ty.column_type() {
            Ok(t) => t,
            Err(reason) => {
                return Plan::Fails(DecodeErrorKind::UnsupportedSchema {
                    schema_id: id,
                    reason: format!("field {name}: {reason}"),
                })
            }
        };
        let Some(column) = (columns.lookup)(name) else {
            if columns.allowed.is_some_and(|a| !a.contains(name)) {
                fields.push(FieldOp {
                    op: avro::skipper(ty),
                    target: None,
                });
                continue;
            }
            unknown.push(UnknownField {
                name: name.clone(),
                ty: Some(wanted),
                partition: at.0,
                offset: at.1,
            });
            continue;
        };
        match fit(columns.types[column], &wanted) {
            Fit::Holds => {}
            Fit::Widen(to) => {
                widen.push((name.clone(), to));
                continue;
            }
            Fit::Incompatible(reason) => {
                return Plan::Fails(DecodeErrorKind::SchemaMismatch {
                    schema_id: id,
                    previous,
                    reason: format!("field {name}: {reason}"),
                })
            }
        }
        match avro::compile(ty, columns.types[column]) {
            Ok(op) => fields.push(FieldOp {
                op,
                target: Some(column),
            }),
            Err(reason) => {
                return Plan::Fails(DecodeErrorKind::SchemaMismatch {
                    schema_id: id,
                    previous,
                    reason: format!("field {name}: {reason}"),
                })
            }
        }
    }
    if !unknown.is_empty() {
        return Plan::Fails(DecodeErrorKind::UnknownFields(unknown));
    }
    if !widen.is_empty() {
        return Plan::Fails(DecodeErrorKind::Widen(widen));
    }
    let absent = columns
        .payload
        .iter()
        .copied()
        .filter(|c| !fields.iter().any(|f| f.target == Some(*c)))
        .collect();
    Plan::Avro {
        fields,
        names: top.into_iter().map(|(n, _)| n).collect(),
        absent,
    }
}

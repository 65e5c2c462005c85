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
//! - columns the writer schema does not have read null;
//! - a Protobuf schema's message is the one the value's message indexes
//!   name; its fields are the payload fields (see [`super::protobuf`]),
//!   and a plan is made per message on first use.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::avro::{self, AvroType, FieldOp};
use super::debezium::ChangeSchema;
use super::error::{DecodeErrorKind, UnknownField};
use super::fit::{fit, Fit};
use super::protobuf::{self, MessageOp, ProtoSchema};
use super::schema_error::SchemaError;
use crate::columns::ColumnType;
use crate::registry::{RegisteredSchema, RegistryErrorKind, SchemaKind, SchemaSource, ValueFormat};

/// A stream's registry-framed values, shared by every decoder of its table.
#[derive(Debug)]
pub struct RegistryValues {
    /// `avro`, `protobuf` or `auto`.
    pub format: ValueFormat,
    source: Arc<dyn SchemaSource>,
    parsed: Mutex<HashMap<u32, Arc<Parsed>>>,
    /// Writer schemas of change events, by id.
    changes: Mutex<HashMap<u32, Arc<ChangeSchema>>>,
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
            changes: Mutex::new(HashMap::new()),
            last_used: AtomicU64::new(0),
        }
    }

    /// The writer schema of `id`, parsed (asked of the source on the first
    /// use in this sync).
    pub(crate) fn parsed(&self, id: u32) -> Result<Arc<Parsed>, DecodeErrorKind> {
        if let Some(p) = self.parsed.lock().expect("schemas").get(&id) {
            return Ok(p.clone());
        }
        let schema = self.registered(id)?;
        let parsed = Arc::new(match schema.kind {
            SchemaKind::Json => Parsed::Json,
            SchemaKind::Avro => match AvroType::parse(&schema.schema, &schema.reference_texts()) {
                Ok(t) => Parsed::Avro(t),
                Err(reason) => Parsed::Unsupported(reason),
            },
            SchemaKind::Protobuf => match ProtoSchema::parse(&schema.schema, &schema.references) {
                Ok(p) => Parsed::Protobuf(p),
                Err(reason) => Parsed::Unsupported(reason),
            },
        });
        let mut cache = self.parsed.lock().expect("schemas");
        Ok(cache.entry(id).or_insert(parsed).clone())
    }

    /// The schema `id` as the source has it; a missing one is
    /// [`DecodeErrorKind::UnknownSchema`].
    fn registered(&self, id: u32) -> Result<Arc<RegisteredSchema>, DecodeErrorKind> {
        self.source.schema_by_id(id).map_err(|e| match e.kind {
            RegistryErrorKind::NotFound => DecodeErrorKind::UnknownSchema {
                schema_id: id,
                reason: e.to_string(),
            },
            _ => DecodeErrorKind::Registry(Box::new(e)),
        })
    }

    /// The writer schema `id` of change events (asked of the source on the
    /// first use in this sync).
    pub(crate) fn change_schema(&self, id: u32) -> Result<Arc<ChangeSchema>, DecodeErrorKind> {
        if let Some(s) = self.changes.lock().expect("schemas").get(&id) {
            return Ok(s.clone());
        }
        let schema = self.registered(id)?;
        let change = Arc::new(ChangeSchema::of(&schema));
        let mut cache = self.changes.lock().expect("schemas");
        Ok(cache.entry(id).or_insert(change).clone())
    }

    /// The payload fields writer schema `id` declares, in order, with the
    /// column type each is stored as (nested field ids 0), for a new
    /// table's columns; `None` for a JSON Schema (its values are JSON).
    /// For a Protobuf schema, the fields of its first message (message
    /// indexes `[0]`: the one a producer of the file's first type sends;
    /// values naming another message ask for their columns when read).
    pub fn fields_of(&self, id: u32) -> Result<Option<Vec<(String, ColumnType)>>, DecodeErrorKind> {
        let parsed = self.parsed(id)?;
        let unsupported = |reason: SchemaError| DecodeErrorKind::UnsupportedSchema {
            schema_id: id,
            reason: Box::new(reason),
        };
        match parsed.as_ref() {
            Parsed::Json => Ok(None),
            Parsed::Unsupported(reason) => Err(unsupported(reason.clone())),
            Parsed::Avro(writer) => top_level(writer)
                .into_iter()
                .map(|(name, ty)| match ty.column_type() {
                    Ok(t) => Ok((name, t)),
                    Err(reason) => Err(unsupported(reason.in_field(name))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Parsed::Protobuf(schema) => match schema.message(&[0]) {
                None => Err(unsupported(SchemaError::NoMessage)),
                Some(Err(reason)) => Err(unsupported(reason)),
                Some(Ok(message)) => Ok(Some(
                    message
                        .fields
                        .iter()
                        .filter_map(|f| Some((f.name.clone(), f.column_type()?)))
                        .collect(),
                )),
            },
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
    Protobuf(ProtoSchema),
    /// A JSON Schema: the body is a plain JSON value.
    Json,
    /// Cannot be read into a table; why.
    Unsupported(SchemaError),
}

/// A decoder's plans by schema id. Hashed by [`SchemaIdHasher`]: SipHash
/// of the id was a tenth of the Protobuf path's time per message.
pub(crate) type Plans = HashMap<u32, Plan, BuildHasherDefault<SchemaIdHasher>>;

/// Hashes a schema id (a small integer the registry hands out) by one
/// multiplication.
#[derive(Debug, Default)]
pub(crate) struct SchemaIdHasher(u64);

impl Hasher for SchemaIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(u32::from(b) ^ (self.0 as u32).rotate_left(8));
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
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
    /// Read a Protobuf body: per message-index path, the message's plan
    /// (made by [`plan_message`] when a value first names it).
    Protobuf(Vec<(Vec<i32>, MessagePlan)>),
    /// Decode the body as a JSON object.
    Json,
    /// Every message of this schema id fails this way (for this decoder).
    Fails(DecodeErrorKind),
}

/// One Protobuf message of a schema compiled for one decoder's columns.
#[derive(Debug)]
pub(crate) enum MessagePlan {
    /// Read the message's fields into the columns.
    Read(MessageOp),
    /// Every value of this message fails this way (for this decoder).
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
        Parsed::Protobuf(_) => return Plan::Protobuf(Vec::new()),
        Parsed::Unsupported(reason) => {
            return Plan::Fails(DecodeErrorKind::UnsupportedSchema {
                schema_id: id,
                reason: Box::new(reason.clone()),
            })
        }
        Parsed::Avro(t) => t,
    };
    let top = top_level(writer);
    let mut wanted = Vec::with_capacity(top.len());
    for (name, ty) in &top {
        match ty.column_type() {
            Ok(t) => wanted.push((name.as_str(), Some(t))),
            Err(reason) => {
                return Plan::Fails(DecodeErrorKind::UnsupportedSchema {
                    schema_id: id,
                    reason: Box::new(reason.in_field(name.as_str())),
                })
            }
        }
    }
    let targets = match place(id, &wanted, columns, previous, at) {
        Ok(t) => t,
        Err(kind) => return Plan::Fails(kind),
    };
    let mut fields = Vec::with_capacity(top.len());
    for ((name, ty), target) in top.iter().zip(&targets) {
        let op = match target {
            None => avro::skipper(ty),
            Some(column) => match avro::compile(ty, columns.types[*column]) {
                Ok(op) => op,
                Err(reason) => return Plan::Fails(mismatch(id, previous, name, &reason)),
            },
        };
        fields.push(FieldOp {
            op,
            target: *target,
        });
    }
    let absent = absent_columns(columns, &targets);
    Plan::Avro {
        fields,
        names: top.into_iter().map(|(n, _)| n).collect(),
        absent,
    }
}

/// The plan for the Protobuf message at `path` of schema `id` against
/// `columns`.
pub(crate) fn plan_message(
    id: u32,
    schema: &ProtoSchema,
    path: &[i32],
    columns: &Columns<'_>,
    previous: Option<u32>,
    at: (i32, i64),
) -> MessagePlan {
    let Some(message) = schema.message(path) else {
        return MessagePlan::Fails(DecodeErrorKind::BadBody {
            schema_id: id,
            reason: format!("message indexes {path:?} name no message of the schema"),
        });
    };
    let message = match message {
        Ok(m) => m,
        Err(reason) => {
            return MessagePlan::Fails(DecodeErrorKind::UnsupportedSchema {
                schema_id: id,
                reason: Box::new(reason),
            })
        }
    };
    let wanted: Vec<(&str, Option<ColumnType>)> = message
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.column_type()))
        .collect();
    let targets = match place(id, &wanted, columns, previous, at) {
        Ok(t) => t,
        Err(kind) => return MessagePlan::Fails(kind),
    };
    let absent = absent_columns(columns, &targets);
    match protobuf::compile_top(&message, &targets, &columns.types, absent) {
        Ok(op) => MessagePlan::Read(op),
        Err((name, reason)) => MessagePlan::Fails(mismatch(id, previous, &name, &reason)),
    }
}

/// The column of each top-level writer field (`wanted`: its column type;
/// `None`: it has none and is read past), or why the schema cannot be
/// read into these columns yet: fields without a column (unknown, typed;
/// with the stream's `columns` list, fields outside it are read past),
/// columns that must widen, or a column Iceberg cannot change.
pub(crate) fn place(
    id: u32,
    wanted: &[(&str, Option<ColumnType>)],
    columns: &Columns<'_>,
    previous: Option<u32>,
    at: (i32, i64),
) -> Result<Vec<Option<usize>>, DecodeErrorKind> {
    let mut targets = Vec::with_capacity(wanted.len());
    let mut unknown = Vec::new();
    let mut widen = Vec::new();
    for (name, ty) in wanted {
        let Some(ty) = ty else {
            targets.push(None);
            continue;
        };
        let Some(column) = (columns.lookup)(name) else {
            targets.push(None);
            if columns.allowed.is_none_or(|a| a.contains(*name)) {
                unknown.push(UnknownField {
                    name: (*name).to_owned(),
                    ty: Some(ty.clone()),
                    partition: at.0,
                    offset: at.1,
                });
            }
            continue;
        };
        targets.push(Some(column));
        match fit(columns.types[column], ty) {
            Fit::Holds => {}
            Fit::Widen(to) => widen.push(((*name).to_owned(), to)),
            Fit::Incompatible(reason) => return Err(mismatch(id, previous, name, &reason)),
        }
    }
    if !unknown.is_empty() {
        return Err(DecodeErrorKind::UnknownFields(unknown));
    }
    if !widen.is_empty() {
        return Err(DecodeErrorKind::Widen(widen));
    }
    Ok(targets)
}

/// The payload columns no writer field fills (they read null).
pub(crate) fn absent_columns(columns: &Columns<'_>, targets: &[Option<usize>]) -> Vec<usize> {
    columns
        .payload
        .iter()
        .copied()
        .filter(|c| !targets.contains(&Some(*c)))
        .collect()
}

fn mismatch(
    id: u32,
    previous: Option<u32>,
    field: &str,
    reason: &dyn std::fmt::Display,
) -> DecodeErrorKind {
    DecodeErrorKind::SchemaMismatch {
        schema_id: id,
        previous,
        reason: format!("field {field}: {reason}"),
    }
}

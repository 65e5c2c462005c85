//! Dedup keys read from the message key: `_kafka_key.<field>` names a
//! top-level field of the key, which is registry-framed (decoded with its
//! writer schema, like values) or a JSON object. The field's value is
//! hashed into `_olake_id` exactly as a column of its type would be; the
//! key itself stays in `_kafka_key` (base64 of its bytes), so the id can be
//! recomputed from the table and the registry. Avro keys are read here,
//! Protobuf keys by [`super::protobuf::ProtoKey`].

use std::collections::HashMap;

use super::avro::{self, FieldOp};
use super::buffer::ColumnBuffer;
use super::error::DecodeErrorKind;
use super::framed::{top_level, Parsed, RegistryValues};
use super::protobuf::ProtoKey;
use super::schema_error::SchemaError;
use crate::olake_id::{encode_key_value, KeyValue};
use crate::registry::{framing, ValueFormat};

/// The prefix of a dedup key that names a field of the message key.
pub const KEY_FIELD_PREFIX: &str = "_kafka_key.";

/// The dedup key of every field of the message key (a JSON object or a
/// registry-encoded Avro record), in the order of their names, so that a
/// key's JSON and Avro forms name one row (a change stream's default:
/// Debezium's key holds the primary key).
pub const ALL_KEY_FIELDS: &str = "_kafka_key.*";

/// The field name [`ALL_KEY_FIELDS`] gives.
const ALL: &str = "*";

/// How a key schema's field(s) are read: the ops, and a one-value buffer
/// per field read.
type KeyPlan = (Vec<FieldOp>, Vec<ColumnBuffer>);

/// One `_kafka_key.<field>` part of a dedup key.
pub(crate) struct KeyField {
    /// The field's name in the key.
    name: String,
    /// How the keys are encoded (the stream's `key_format`).
    format: ValueFormat,
    /// Per key schema id: how to read the field (every field, for
    /// [`ALL_KEY_FIELDS`]) into one-value buffers.
    plans: HashMap<u32, Result<KeyPlan, SchemaError>>,
    /// Per Protobuf key schema id: its reader.
    protobuf: HashMap<u32, ProtoKey>,
}

impl KeyField {
    pub(crate) fn new(name: &str, format: ValueFormat) -> Self {
        Self {
            name: name.to_owned(),
            format,
            plans: HashMap::new(),
            protobuf: HashMap::new(),
        }
    }

    /// The field's name in the key.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Appends the field's value in `key` to `out` as a key value is
    /// encoded; a null or missing field is [`DecodeErrorKind::NullKey`].
    pub(crate) fn encode(
        &mut self,
        registry: Option<&RegistryValues>,
        key: Option<&[u8]>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeErrorKind> {
        let Some(key) = key else {
            return Err(DecodeErrorKind::NullKey);
        };
        let framed = framing(key).filter(|_| self.format != ValueFormat::Json);
        match (registry, framed) {
            (Some(registry), Some(f)) => {
                self.encode_framed(registry, f.schema_id, &key[f.body_start..], out)
            }
            (_, None) if matches!(self.format, ValueFormat::Avro | ValueFormat::Protobuf) => {
                Err(DecodeErrorKind::NotFramed {
                    format: self.format,
                })
            }
            _ => self.encode_json(key, out),
        }
    }

    fn encode_framed(
        &mut self,
        registry: &RegistryValues,
        id: u32,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeErrorKind> {
        if let Some(key) = self.protobuf.get_mut(&id) {
            return key.encode(id, &self.name, body, out);
        }
        if !self.plans.contains_key(&id) {
            let parsed = registry.parsed(id)?;
            if let Parsed::Protobuf(_) = parsed.as_ref() {
                let key = self.protobuf.entry(id).or_insert(ProtoKey::new(parsed));
                return key.encode(id, &self.name, body, out);
            }
            let plan = key_plan(parsed.as_ref(), &self.name);
            self.plans.insert(id, plan);
        }
        let (fields, buffers) = match self.plans.get_mut(&id).expect("inserted above") {
            Ok(plan) => plan,
            Err(reason) => {
                return Err(DecodeErrorKind::UnsupportedSchema {
                    schema_id: id,
                    reason: Box::new(reason.clone()),
                })
            }
        };
        let mut cursor = avro::Cursor::new(body);
        let result = match avro::read_fields(fields, &[], &mut cursor, buffers) {
            Err((_, bad)) => Err(DecodeErrorKind::BadBody {
                schema_id: id,
                reason: format!("in the message key: {bad}"),
            }),
            Ok(()) => buffers
                .iter()
                .try_for_each(|buffer| match buffer.key_value(0) {
                    KeyValue::Null => Err(DecodeErrorKind::NullKey),
                    value => {
                        encode_key_value(out, &value);
                        Ok(())
                    }
                }),
        };
        for buffer in buffers {
            buffer.truncate(0);
        }
        result
    }

    fn encode_json(&self, key: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeErrorKind> {
        let not_json = |reason: String| DecodeErrorKind::NotJson {
            reason: format!(
                "the message key is neither registry-framed nor a JSON object: {reason}"
            ),
        };
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(key).map_err(|e| not_json(e.to_string()))?;
        let object = connect_payload(&object).unwrap_or(&object);
        if self.name == ALL {
            if object.is_empty() {
                return Err(DecodeErrorKind::NullKey);
            }
            for value in object.values() {
                encode_json_value(value, out)?;
            }
            return Ok(());
        }
        encode_json_value(
            object.get(&self.name).unwrap_or(&serde_json::Value::Null),
            out,
        )
    }
}

/// A key written by Kafka Connect's JSON converter with its schema
/// (`{"schema": .., "payload": {..}}`): the payload.
fn connect_payload(
    object: &serde_json::Map<String, serde_json::Value>,
) -> Option<&serde_json::Map<String, serde_json::Value>> {
    if object.len() != 2 || !object.contains_key("schema") {
        return None;
    }
    object.get("payload")?.as_object()
}

/// One JSON key value as a key value is encoded.
fn encode_json_value(value: &serde_json::Value, out: &mut Vec<u8>) -> Result<(), DecodeErrorKind> {
    let value = match value {
        serde_json::Value::Null => return Err(DecodeErrorKind::NullKey),
        serde_json::Value::Bool(b) => KeyValue::Boolean(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(v) => KeyValue::Long(v),
            None => KeyValue::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => {
            encode_key_value(out, &KeyValue::String(s));
            return Ok(());
        }
        other => {
            let text = other.to_string();
            encode_key_value(out, &KeyValue::String(&text));
            return Ok(());
        }
    };
    encode_key_value(out, &value);
    Ok(())
}

/// How to read field `name` (every field, for [`ALL`]) of a key written
/// with `parsed`: each into a buffer of its own, in the key's order.
fn key_plan(parsed: &Parsed, name: &str) -> Result<KeyPlan, SchemaError> {
    let Parsed::Avro(writer) = parsed else {
        return Err(SchemaError::KeyFormat);
    };
    let fields = top_level(writer);
    if name != ALL && !fields.iter().any(|(n, _)| n == name) {
        return Err(SchemaError::NoKeyField {
            name: name.to_owned(),
        });
    }
    // Every field in the order of their names, as a JSON key's are read.
    let mut read: Vec<&str> = fields
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| name == ALL || *n == name)
        .collect();
    read.sort_unstable();
    let mut buffers: Vec<Option<ColumnBuffer>> = read.iter().map(|_| None).collect();
    let ops = fields
        .iter()
        .map(|(n, t)| {
            let Some(target) = read.iter().position(|r| r == n) else {
                return Ok(FieldOp {
                    op: avro::skipper(t),
                    target: None,
                });
            };
            let column = t.column_type()?;
            if column.is_nested() {
                return Err(SchemaError::KeyNotSingle {
                    name: n.clone(),
                    column: Some(column),
                });
            }
            buffers[target] = Some(ColumnBuffer::new(column.clone()));
            Ok(FieldOp {
                op: avro::compile(t, &column)?,
                target: Some(target),
            })
        })
        .collect::<Result<Vec<_>, SchemaError>>()?;
    Ok((ops, buffers.into_iter().flatten().collect()))
}

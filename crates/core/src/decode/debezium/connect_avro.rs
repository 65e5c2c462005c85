//! Kafka Connect's Avro converter's schemas turned back into the Connect
//! schemas they were written from, for change events read through the
//! schema registry ([`super::from_avro`]).
//!
//! Avro schema -> Connect schema, by the conventions the Avro converter
//! writes (its `connect.*` properties):
//! - a record is a struct, named by its `connect.name` (else its full
//!   name), its fields in order; a named type used again is the same type;
//! - a union of `null` and one type is that type, optional; other unions
//!   are refused (the converter writes them only for Connect's own union
//!   structs, which Debezium does not make);
//! - `connect.name` and `connect.parameters` keep the semantic type
//!   (`io.debezium.time.*`, `io.debezium.data.*`, Connect's `Decimal`);
//!   `connect.type` `int8` / `int16` the narrow integers;
//! - a logical type without `connect.name` (a writer other than Kafka
//!   Connect): `decimal` is Connect's Decimal of that scale and precision,
//!   `date`, `time-millis`, `timestamp-millis` Connect's Date, Time,
//!   Timestamp, `time-micros` / `timestamp-micros` Debezium's MicroTime /
//!   MicroTimestamp, `uuid` Debezium's Uuid;
//! - an enum is a string, a fixed is bytes, arrays and maps as they are.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::decode::avro::AvroType;
use crate::decode::schema_error::SchemaError;
use crate::registry::{RegisteredSchema, SchemaKind};

/// A registry schema as change events are read with it.
#[derive(Debug)]
pub(crate) enum ChangeSchema {
    /// An Avro writer schema and the Connect schema's JSON text it was
    /// written from.
    Avro { writer: AvroType, connect: String },
    /// Not read; why.
    Unsupported(SchemaError),
}

impl ChangeSchema {
    /// How events written with `schema` are read.
    pub(crate) fn of(schema: &RegisteredSchema) -> ChangeSchema {
        match schema.kind {
            SchemaKind::Json => ChangeSchema::Unsupported(SchemaError::invalid(
                "change events under a JSON Schema are not read yet (their values come without \
                 the Connect schema that types them): use Kafka Connect's JSON converter with \
                 schemas.enable, or its Avro converter",
            )),
            SchemaKind::Protobuf => ChangeSchema::Unsupported(SchemaError::invalid(
                "Protobuf change events are not read yet: use Kafka Connect's Avro or JSON \
                 converter",
            )),
            SchemaKind::Avro => {
                let refs = schema.reference_texts();
                match (
                    AvroType::parse(&schema.schema, &refs),
                    connect_schema(&schema.schema, &refs),
                ) {
                    (Ok(writer), Ok(connect)) => ChangeSchema::Avro { writer, connect },
                    (Err(e), _) | (_, Err(e)) => ChangeSchema::Unsupported(e),
                }
            }
        }
    }
}

/// The Connect schema (as the JSON converter writes it) of the Avro schema
/// `text`, whose named types may be defined in `references`.
pub(crate) fn connect_schema(text: &str, references: &[&str]) -> Result<String, SchemaError> {
    let mut names = Names::default();
    for r in references {
        let json: Value = serde_json::from_str(r).map_err(not_json)?;
        names.connect(&json, "")?;
    }
    let json: Value = serde_json::from_str(text).map_err(not_json)?;
    Ok(names.connect(&json, "")?.to_string())
}

/// Named types met so far, as Connect schemas.
#[derive(Default)]
struct Names {
    by_name: HashMap<String, Value>,
}

impl Names {
    /// The Connect schema of one Avro schema (optional: a union with null).
    fn connect(&mut self, avro: &Value, namespace: &str) -> Result<Value, SchemaError> {
        match avro {
            Value::String(name) => self.primitive_or_named(name, namespace),
            Value::Array(branches) => {
                let types: Vec<&Value> = branches.iter().filter(|b| *b != "null").collect();
                let [one] = types[..] else {
                    return Err(SchemaError::invalid(format!(
                        "a union of {} types is not read (only a type or null)",
                        types.len()
                    )));
                };
                let mut schema = self.connect(one, namespace)?;
                schema["optional"] = Value::Bool(branches.len() > 1);
                Ok(schema)
            }
            Value::Object(o) => self.complex(o, namespace),
            other => Err(SchemaError::invalid(format!("not an Avro schema: {other}"))),
        }
    }

    fn primitive_or_named(&mut self, name: &str, namespace: &str) -> Result<Value, SchemaError> {
        let ty = match name {
            "boolean" => "boolean",
            "int" => "int32",
            "long" => "int64",
            "float" => "float",
            "double" => "double",
            "bytes" => "bytes",
            "string" => "string",
            "null" => return Err(SchemaError::invalid("a field of type null is not read")),
            _ => {
                let full = full_name(name, namespace);
                return self
                    .by_name
                    .get(&full)
                    .or_else(|| self.by_name.get(name))
                    .cloned()
                    .ok_or_else(|| SchemaError::UnknownType {
                        name: name.to_owned(),
                    });
            }
        };
        Ok(json!({ "type": ty, "optional": false }))
    }

    fn complex(&mut self, o: &Map<String, Value>, namespace: &str) -> Result<Value, SchemaError> {
        let base = match o.get("type") {
            Some(Value::String(t)) if t == "record" || t == "error" => {
                return self.record(o, namespace)
            }
            Some(Value::String(t)) if t == "enum" || t == "fixed" => {
                // A fixed(16) uuid is written as its text (`from_avro`).
                let uuid = o.get("logicalType").and_then(Value::as_str) == Some("uuid");
                let ty = if t == "enum" || uuid {
                    "string"
                } else {
                    "bytes"
                };
                let schema = json!({ "type": ty, "optional": false });
                let name = o.get("name").and_then(Value::as_str).unwrap_or_default();
                let full = full_name(name, own_namespace(o, namespace));
                let schema = semantic(o, schema);
                self.by_name.insert(full, schema.clone());
                return Ok(schema);
            }
            Some(Value::String(t)) if t == "array" => {
                let items = o
                    .get("items")
                    .ok_or_else(|| SchemaError::invalid("array without \"items\""))?;
                json!({ "type": "array", "items": self.connect(items, namespace)?, "optional": false })
            }
            Some(Value::String(t)) if t == "map" => {
                let values = o
                    .get("values")
                    .ok_or_else(|| SchemaError::invalid("map without \"values\""))?;
                json!({
                    "type": "map",
                    "keys": { "type": "string", "optional": false },
                    "values": self.connect(values, namespace)?,
                    "optional": false
                })
            }
            Some(inner) => self.connect(inner, namespace)?,
            None => {
                return Err(SchemaError::invalid(format!(
                    "a schema object without \"type\": {o:?}"
                )))
            }
        };
        Ok(semantic(o, base))
    }

    fn record(&mut self, o: &Map<String, Value>, namespace: &str) -> Result<Value, SchemaError> {
        let name = o
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| SchemaError::invalid("a record without \"name\""))?;
        let full = full_name(name, own_namespace(o, namespace));
        let ns = full.rsplit_once('.').map_or("", |(n, _)| n).to_owned();
        let mut fields = Vec::new();
        for f in o
            .get("fields")
            .and_then(Value::as_array)
            .ok_or_else(|| SchemaError::invalid(format!("record {full} without \"fields\"")))?
        {
            let field = f["name"].as_str().ok_or_else(|| {
                SchemaError::invalid(format!("a field of {full} without \"name\""))
            })?;
            let ty = f.get("type").ok_or_else(|| {
                SchemaError::invalid(format!("field {full}.{field} without \"type\""))
            })?;
            let mut schema = self.connect(ty, &ns).map_err(|e| e.in_field(field))?;
            schema["field"] = Value::String(field.to_owned());
            fields.push(schema);
        }
        let connect_name = o.get("connect.name").and_then(Value::as_str);
        let schema = json!({
            "type": "struct",
            "name": connect_name.unwrap_or(&full),
            "fields": fields,
            "optional": false,
        });
        self.by_name.insert(full, schema.clone());
        Ok(schema)
    }
}

/// `schema` with the semantic name and parameters the Avro schema object
/// `o` carries: the converter's `connect.name` / `connect.parameters` /
/// `connect.type`, else its logical type's Connect equivalent.
fn semantic(o: &Map<String, Value>, mut schema: Value) -> Value {
    if let Some(Value::String(t)) = o.get("connect.type") {
        if t == "int8" || t == "int16" {
            schema["type"] = Value::String(t.clone());
        }
    }
    if let Some(p) = o.get("connect.parameters") {
        schema["parameters"] = p.clone();
    }
    if let Some(name) = o.get("connect.name") {
        schema["name"] = name.clone();
        return schema;
    }
    let name = match o.get("logicalType").and_then(Value::as_str) {
        Some("decimal") => {
            let number = |k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0).to_string();
            schema["parameters"] = json!({
                "scale": number("scale"),
                "connect.decimal.precision": number("precision"),
            });
            "org.apache.kafka.connect.data.Decimal"
        }
        Some("date") => "org.apache.kafka.connect.data.Date",
        Some("time-millis") => "org.apache.kafka.connect.data.Time",
        Some("timestamp-millis") => "org.apache.kafka.connect.data.Timestamp",
        Some("time-micros") => "io.debezium.time.MicroTime",
        Some("timestamp-micros") => "io.debezium.time.MicroTimestamp",
        Some("uuid") => "io.debezium.data.Uuid",
        _ => return schema,
    };
    schema["name"] = Value::String(name.to_owned());
    schema
}

fn own_namespace<'a>(o: &'a Map<String, Value>, namespace: &'a str) -> &'a str {
    o.get("namespace")
        .and_then(Value::as_str)
        .unwrap_or(namespace)
}

fn full_name(name: &str, namespace: &str) -> String {
    if name.contains('.') || namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}.{name}")
    }
}

fn not_json(e: serde_json::Error) -> SchemaError {
    SchemaError::NotJson {
        source: std::sync::Arc::new(e),
    }
}

//! Avro schemas (the JSON form a registry holds) parsed into the types the
//! decoder reads, and the column type each one is stored as.
//!
//! Written from the Avro 1.12 specification: primitive types, records,
//! enums, arrays, maps, unions, fixed, named types and namespaces, and the
//! logical types `decimal`, `uuid`, `date`, `time-millis`, `time-micros`,
//! `timestamp-millis`, `timestamp-micros`, `local-timestamp-millis`,
//! `local-timestamp-micros`. A logical type on the wrong base type, or with
//! bad attributes, is ignored as the specification says (the base type is
//! read).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::columns::{ColumnType, MapFields, NestedField};
use crate::decode::schema_error::SchemaError;

/// An Avro type as the decoder reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum AvroType {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Record(Arc<Record>),
    /// The symbols, by index.
    Enum(Arc<[String]>),
    Array(Box<AvroType>),
    Map(Box<AvroType>),
    /// The size in bytes.
    Fixed(usize),
    Union(Vec<AvroType>),
    /// `decimal` on `bytes` (`fixed: None`) or on `fixed` of that size.
    Decimal {
        precision: u8,
        scale: u8,
        fixed: Option<usize>,
    },
    /// `uuid` on `string` (text form) or on `fixed(16)`.
    Uuid {
        fixed: bool,
    },
    /// `date` on `int`.
    Date,
    /// `time-millis` (`int`) or `time-micros` (`long`).
    Time {
        millis: bool,
    },
    /// `timestamp-*` (UTC) or `local-timestamp-*`, millis or micros.
    Timestamp {
        millis: bool,
        local: bool,
    },
}

/// A record: its full name and fields in writer order.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub name: String,
    pub fields: Vec<(String, AvroType)>,
}

impl AvroType {
    /// Parses a schema's JSON text; `references` are the texts of the
    /// schemas it refers to (named types defined elsewhere), dependencies
    /// first.
    pub fn parse(text: &str, references: &[&str]) -> Result<AvroType, SchemaError> {
        let mut parser = Parser::default();
        for r in references {
            let json: Value = serde_json::from_str(r).map_err(not_json)?;
            parser.parse(&json, "")?;
        }
        let json: Value = serde_json::from_str(text).map_err(not_json)?;
        parser.parse(&json, "")
    }

    /// The column type it is stored as (see the module docs and the type table of
    /// docs/src/how-to/schema-registry.md); nested field ids are 0 (assigned when the column is
    /// added). `Err` names what Iceberg cannot hold.
    pub fn column_type(&self) -> Result<ColumnType, SchemaError> {
        Ok(match self {
            AvroType::Null => ColumnType::String,
            AvroType::Boolean => ColumnType::Boolean,
            AvroType::Int => ColumnType::Int,
            AvroType::Long => ColumnType::Long,
            AvroType::Float => ColumnType::Float,
            AvroType::Double => ColumnType::Double,
            AvroType::Bytes | AvroType::Fixed(_) => ColumnType::Binary,
            AvroType::String | AvroType::Enum(_) => ColumnType::String,
            AvroType::Decimal { precision, .. } if *precision > 38 => {
                return Err(SchemaError::DecimalTooWide {
                    precision: *precision,
                })
            }
            AvroType::Decimal {
                precision, scale, ..
            } => ColumnType::Decimal {
                precision: *precision,
                scale: *scale,
            },
            AvroType::Uuid { .. } => ColumnType::Uuid,
            AvroType::Date => ColumnType::Date,
            AvroType::Time { .. } => ColumnType::Time,
            AvroType::Timestamp { local: false, .. } => ColumnType::TimestampTz,
            AvroType::Timestamp { local: true, .. } => ColumnType::Timestamp,
            AvroType::Record(r) => ColumnType::Struct(
                r.fields
                    .iter()
                    .map(|(name, t)| Ok(NestedField::optional(0, name, t.column_type()?)))
                    .collect::<Result<Vec<_>, SchemaError>>()?
                    .into(),
            ),
            AvroType::Array(items) => ColumnType::List(Arc::new(NestedField::optional(
                0,
                "element",
                items.column_type()?,
            ))),
            AvroType::Map(values) => ColumnType::Map(Arc::new(MapFields {
                key: NestedField {
                    field_id: 0,
                    name: "key".into(),
                    ty: ColumnType::String,
                    required: true,
                },
                value: NestedField::optional(0, "value", values.column_type()?),
            })),
            AvroType::Union(branches) => match self.optional_branch() {
                Some(inner) => inner.column_type()?,
                None => union_struct(branches)?,
            },
        })
    }

    /// For `[null, T]` or `[T, null]`: `T`.
    pub fn optional_branch(&self) -> Option<&AvroType> {
        match self {
            AvroType::Union(b) if b.len() == 2 && b[0] == AvroType::Null => Some(&b[1]),
            AvroType::Union(b) if b.len() == 2 && b[1] == AvroType::Null => Some(&b[0]),
            _ => None,
        }
    }

    /// The type's name in messages (`record orders`, `long`, ...).
    pub fn describe(&self) -> String {
        match self {
            AvroType::Record(r) => format!("record {}", r.name),
            AvroType::Union(b) => format!(
                "union [{}]",
                b.iter().map(Self::describe).collect::<Vec<_>>().join(", ")
            ),
            AvroType::Array(i) => format!("array<{}>", i.describe()),
            AvroType::Map(v) => format!("map<{}>", v.describe()),
            other => format!("{other:?}").to_lowercase(),
        }
    }
}

/// A union that is not `[null, T]`: a struct with `tag` (the branch index
/// among the non-null branches) and one optional field per non-null
/// branch, `field0`, `field1`, ... (Iceberg's own rule for Avro unions).
fn union_struct(branches: &[AvroType]) -> Result<ColumnType, SchemaError> {
    let mut fields = vec![NestedField::optional(0, "tag", ColumnType::Int)];
    for (i, b) in branches
        .iter()
        .filter(|b| **b != AvroType::Null)
        .enumerate()
    {
        fields.push(NestedField::optional(
            0,
            format!("field{i}"),
            b.column_type()?,
        ));
    }
    Ok(ColumnType::Struct(fields.into()))
}

#[derive(Default)]
struct Parser {
    /// Named types by full name. A record is registered before its fields
    /// are parsed, so a record that contains itself is found (and refused).
    named: HashMap<String, Option<AvroType>>,
}

impl Parser {
    fn parse(&mut self, json: &Value, namespace: &str) -> Result<AvroType, SchemaError> {
        match json {
            Value::String(name) => self.named_or_primitive(name, namespace),
            Value::Array(branches) => Ok(AvroType::Union(
                branches
                    .iter()
                    .map(|b| self.parse(b, namespace))
                    .collect::<Result<_, _>>()?,
            )),
            Value::Object(o) => {
                let ty = o
                    .get("type")
                    .ok_or_else(|| invalid(format!("a schema object without \"type\": {json}")))?;
                let base = match ty.as_str() {
                    Some("record" | "error") => return self.record(json, namespace),
                    Some("enum") => return self.enumeration(json, namespace),
                    Some("fixed") => self.fixed(json, namespace)?,
                    Some("array") => AvroType::Array(Box::new(
                        self.parse(
                            o.get("items")
                                .ok_or_else(|| invalid("array without \"items\""))?,
                            namespace,
                        )?,
                    )),
                    Some("map") => AvroType::Map(Box::new(
                        self.parse(
                            o.get("values")
                                .ok_or_else(|| invalid("map without \"values\""))?,
                            namespace,
                        )?,
                    )),
                    _ => self.parse(ty, namespace)?,
                };
                Ok(logical(json, base))
            }
            other => Err(invalid(format!("not an Avro schema: {other}"))),
        }
    }

    fn named_or_primitive(&mut self, name: &str, namespace: &str) -> Result<AvroType, SchemaError> {
        Ok(match name {
            "null" => AvroType::Null,
            "boolean" => AvroType::Boolean,
            "int" => AvroType::Int,
            "long" => AvroType::Long,
            "float" => AvroType::Float,
            "double" => AvroType::Double,
            "bytes" => AvroType::Bytes,
            "string" => AvroType::String,
            _ => {
                let full = full_name(name, namespace);
                let found = self
                    .named
                    .get(&full)
                    .or_else(|| self.named.get(name))
                    .ok_or_else(|| SchemaError::UnknownType {
                        name: name.to_owned(),
                    })?;
                found.clone().ok_or(SchemaError::ContainsItself {
                    what: "record",
                    name: full,
                })?
            }
        })
    }

    fn name_of(json: &Value, namespace: &str) -> Result<(String, String), SchemaError> {
        let name = json["name"]
            .as_str()
            .ok_or_else(|| invalid(format!("a named type without \"name\": {json}")))?;
        let ns = json["namespace"].as_str().unwrap_or(namespace);
        let full = full_name(name, ns);
        let own_ns = full.rsplit_once('.').map_or("", |(n, _)| n).to_owned();
        Ok((full, own_ns))
    }

    fn record(&mut self, json: &Value, namespace: &str) -> Result<AvroType, SchemaError> {
        let (full, ns) = Self::name_of(json, namespace)?;
        self.named.insert(full.clone(), None);
        let fields = json["fields"]
            .as_array()
            .ok_or_else(|| invalid(format!("record {full} without \"fields\"")))?
            .iter()
            .map(|f| {
                let name = f["name"]
                    .as_str()
                    .ok_or_else(|| invalid(format!("a field of record {full} without \"name\"")))?;
                let ty = f
                    .get("type")
                    .ok_or_else(|| invalid(format!("field {full}.{name} without \"type\"")))?;
                Ok((name.to_owned(), self.parse(ty, &ns)?))
            })
            .collect::<Result<Vec<_>, SchemaError>>()?;
        let record = AvroType::Record(Arc::new(Record {
            name: full.clone(),
            fields,
        }));
        self.named.insert(full, Some(record.clone()));
        Ok(record)
    }

    fn enumeration(&mut self, json: &Value, namespace: &str) -> Result<AvroType, SchemaError> {
        let (full, _) = Self::name_of(json, namespace)?;
        let symbols = json["symbols"]
            .as_array()
            .ok_or_else(|| invalid(format!("enum {full} without \"symbols\"")))?
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| invalid(format!("enum {full} has a symbol that is not a string")))?;
        let ty = AvroType::Enum(symbols.into());
        self.named.insert(full, Some(ty.clone()));
        Ok(ty)
    }

    fn fixed(&mut self, json: &Value, namespace: &str) -> Result<AvroType, SchemaError> {
        let (full, _) = Self::name_of(json, namespace)?;
        let size = json["size"]
            .as_u64()
            .ok_or_else(|| invalid(format!("fixed {full} without a \"size\"")))?;
        let ty = logical(json, AvroType::Fixed(size as usize));
        self.named.insert(full, Some(ty.clone()));
        Ok(ty)
    }
}

fn not_json(e: serde_json::Error) -> SchemaError {
    SchemaError::NotJson {
        source: Arc::new(e),
    }
}

fn invalid(reason: impl Into<String>) -> SchemaError {
    SchemaError::invalid(reason)
}

fn full_name(name: &str, namespace: &str) -> String {
    if name.contains('.') || namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}.{name}")
    }
}

/// The logical type `json` declares on `base`, or `base` when it declares
/// none (or one that does not apply: the specification says to ignore it).
fn logical(json: &Value, base: AvroType) -> AvroType {
    let Some(logical) = json["logicalType"].as_str() else {
        return base;
    };
    match (logical, &base) {
        ("decimal", AvroType::Bytes | AvroType::Fixed(_)) => {
            let precision = json["precision"].as_u64().unwrap_or(0);
            let scale = json["scale"].as_u64().unwrap_or(0);
            let fixed = match base {
                AvroType::Fixed(n) => Some(n),
                _ => None,
            };
            if precision == 0 || scale > precision {
                return base;
            }
            AvroType::Decimal {
                precision: precision.min(255) as u8,
                scale: scale as u8,
                fixed,
            }
        }
        ("uuid", AvroType::String) => AvroType::Uuid { fixed: false },
        ("uuid", AvroType::Fixed(16)) => AvroType::Uuid { fixed: true },
        ("date", AvroType::Int) => AvroType::Date,
        ("time-millis", AvroType::Int) => AvroType::Time { millis: true },
        ("time-micros", AvroType::Long) => AvroType::Time { millis: false },
        ("timestamp-millis", AvroType::Long) => AvroType::Timestamp {
            millis: true,
            local: false,
        },
        ("timestamp-micros", AvroType::Long) => AvroType::Timestamp {
            millis: false,
            local: false,
        },
        ("local-timestamp-millis", AvroType::Long) => AvroType::Timestamp {
            millis: true,
            local: true,
        },
        ("local-timestamp-micros", AvroType::Long) => AvroType::Timestamp {
            millis: false,
            local: true,
        },
        _ => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_logical_types_and_named_references_parse() {
        let text = r#"{"type":"record","name":"Order","namespace":"shop","fields":[
            {"name":"id","type":"long"},
            {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
            {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
            {"name":"local","type":{"type":"long","logicalType":"local-timestamp-micros"}},
            {"name":"day","type":{"type":"int","logicalType":"date"}},
            {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
            {"name":"coupon","type":["null","string"],"default":null},
            {"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}},
            {"name":"billing","type":"Address"},
            {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
            {"name":"tags","type":{"type":"array","items":"string"}},
            {"name":"attrs","type":{"type":"map","values":"long"}},
            {"name":"either","type":["int","string"]}
        ]}"#;
        let t = AvroType::parse(text, &[]).unwrap();
        let ty = t.column_type().unwrap();
        assert_eq!(
            ty.to_string(),
            "struct<id: long, amount: decimal(10,2), at: timestamptz, local: timestamp, \
             day: date, ref: uuid, coupon: string, address: struct<city: string>, \
             billing: struct<city: string>, status: string, tags: list<string>, \
             attrs: map<string, long>, either: struct<tag: int, field0: int, field1: string>>"
        );
    }

    #[test]
    fn references_define_named_types_and_recursion_is_refused() {
        let address = r#"{"type":"record","name":"Address","namespace":"shop","fields":[{"name":"city","type":"string"}]}"#;
        let order = r#"{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"to","type":"Address"}]}"#;
        let t = AvroType::parse(order, &[address]).unwrap();
        assert_eq!(
            t.column_type().unwrap().to_string(),
            "struct<to: struct<city: string>>"
        );
        let list =
            r#"{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}"#;
        let e = AvroType::parse(list, &[]).unwrap_err();
        assert!(e.to_string().contains("contains itself"), "{e}");
    }

    #[test]
    fn a_logical_type_on_the_wrong_base_type_is_ignored() {
        let t = AvroType::parse(r#"{"type":"string","logicalType":"date"}"#, &[]).unwrap();
        assert_eq!(t, AvroType::String);
        let t = AvroType::parse(
            r#"{"type":"bytes","logicalType":"decimal","precision":5,"scale":7}"#,
            &[],
        )
        .unwrap();
        assert_eq!(t, AvroType::Bytes);
        let wide = r#"{"type":"bytes","logicalType":"decimal","precision":50,"scale":2}"#;
        let e = AvroType::parse(wide, &[])
            .unwrap()
            .column_type()
            .unwrap_err();
        assert!(e.to_string().contains("38 digits"), "{e}");
    }
}

//! Schema inference from a sample of JSON values.
//!
//! Each top-level field of an object becomes a column, in first-seen order.
//! A value's type:
//!
//! | JSON value | type |
//! |---|---|
//! | integer (fits i64) | `long` |
//! | integer beyond i64, number with a fraction or an exponent | `double` |
//! | `true` / `false` | `boolean` |
//! | string that parses as a timestamp ([`crate::parse_timestamp_micros`]) | `timestamptz` |
//! | any other string | `string` |
//! | object, array | `json` |
//! | `null` | decides nothing |
//!
//! Across messages, [`merge_types`]: `long` + `double` -> `double`,
//! `timestamptz` + `string` -> `string`, anything + `json` -> `json`, and
//! any other disagreement (say `boolean` and `long`, or `string` and
//! `long`) -> `json`: a `json` column takes every value as its JSON text, so
//! every sampled message still decodes, where a `string` column would reject
//! the numbers. A field that is only ever null becomes `string`.
//!
//! Fields named like a metadata column (`_kafka_offset`, ...) are left out:
//! the metadata column holds the Kafka value. [`SchemaInference::shadowed`]
//! lists them so `discover` can warn.

use std::collections::HashMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::columns::{metadata_column_type, ColumnType};
use crate::timestamp::parse_timestamp_micros;

/// The type both `a` and `b` values fit in (see the [module docs](self)).
pub fn merge_types(a: ColumnType, b: ColumnType) -> ColumnType {
    use ColumnType::*;
    match (a, b) {
        (x, y) if x == y => x,
        (Json, _) | (_, Json) => Json,
        (Int, Long) | (Long, Int) => Long,
        (Int | Long, Double) | (Double, Int | Long) => Double,
        (TimestampTz, String) | (String, TimestampTz) => String,
        _ => Json,
    }
}

/// Merges an optional type (None: only nulls so far) with another.
pub(crate) fn merge_optional(a: Option<ColumnType>, b: Option<ColumnType>) -> Option<ColumnType> {
    match (a, b) {
        (Some(a), Some(b)) => Some(merge_types(a, b)),
        (a, b) => a.or(b),
    }
}

/// A sampled value that cannot contribute columns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InferError {
    /// The bytes are not JSON.
    #[error("value is not JSON: {0}")]
    NotJson(String),
    /// The value is JSON but not an object.
    #[error("value is not a JSON object, found {0}")]
    NotAnObject(&'static str),
}

/// Accumulates the payload columns of a topic from sampled values.
#[derive(Debug, Default, Clone)]
pub struct SchemaInference {
    fields: Vec<(String, Option<ColumnType>)>,
    index: HashMap<String, usize>,
    shadowed: Vec<String>,
    messages: usize,
}

impl SchemaInference {
    /// An empty inference.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one message value. A value that is not a JSON object changes
    /// nothing and is returned as an error for the caller to count or log.
    pub fn add(&mut self, value: &[u8]) -> Result<(), InferError> {
        // Check the whole value first so that a broken message adds no column.
        serde_json::from_slice::<IgnoredAny>(value)
            .map_err(|e| InferError::NotJson(e.to_string()))?;
        if let Some(kind) = non_object_kind(value) {
            return Err(InferError::NotAnObject(kind));
        }
        let mut de = serde_json::Deserializer::from_slice(value);
        de.deserialize_map(ObjectVisitor { inference: self })
            .map_err(|e| InferError::NotJson(e.to_string()))?;
        self.messages += 1;
        Ok(())
    }

    /// How many values were added.
    pub fn messages(&self) -> usize {
        self.messages
    }

    /// The payload columns so far, in first-seen order; null-only fields
    /// are `string`.
    pub fn columns(&self) -> Vec<(String, ColumnType)> {
        self.fields
            .iter()
            .map(|(name, ty)| (name.clone(), ty.unwrap_or(ColumnType::String)))
            .collect()
    }

    /// Fields left out because a metadata column has their name.
    pub fn shadowed(&self) -> &[String] {
        &self.shadowed
    }

    fn slot(&mut self, name: &str) -> Option<usize> {
        if let Some(&i) = self.index.get(name) {
            return Some(i);
        }
        if metadata_column_type(name).is_some() {
            if !self.shadowed.iter().any(|s| s == name) {
                self.shadowed.push(name.to_owned());
            }
            return None;
        }
        self.fields.push((name.to_owned(), None));
        self.index.insert(name.to_owned(), self.fields.len() - 1);
        Some(self.fields.len() - 1)
    }
}

/// For valid JSON: `None` when it is an object, else the kind it is.
pub(crate) fn non_object_kind(json: &[u8]) -> Option<&'static str> {
    match json.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => None,
        Some(b'[') => Some("array"),
        Some(b'"') => Some("string"),
        Some(b't' | b'f') => Some("boolean"),
        Some(b'n') => Some("null"),
        _ => Some("number"),
    }
}

struct ObjectVisitor<'a> {
    inference: &'a mut SchemaInference,
}

impl<'de> Visitor<'de> for ObjectVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(slot) = map.next_key_seed(FieldSlot {
            inference: &mut *self.inference,
        })? {
            let ty = map.next_value_seed(TypeOf)?;
            if let Some(i) = slot {
                let field = &mut self.inference.fields[i].1;
                *field = merge_optional(*field, ty);
            }
        }
        Ok(())
    }
}

/// Finds (or adds) the field a key names; `None` for a metadata name.
struct FieldSlot<'a> {
    inference: &'a mut SchemaInference,
}

impl<'de> DeserializeSeed<'de> for FieldSlot<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldSlot<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Self::Value, E> {
        Ok(self.inference.slot(name))
    }
}

/// Reads one value and returns its inferred type (`None` for null), without
/// building it: nested values are skipped.
pub(crate) struct TypeOf;

impl<'de> DeserializeSeed<'de> for TypeOf {
    type Value = Option<ColumnType>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TypeOf {
    type Value = Option<ColumnType>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Some(ColumnType::Boolean))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Some(ColumnType::Long))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(if i64::try_from(v).is_ok() {
            ColumnType::Long
        } else {
            ColumnType::Double
        }))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Some(ColumnType::Double))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(if parse_timestamp_micros(v).is_some() {
            ColumnType::TimestampTz
        } else {
            ColumnType::String
        }))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Some(ColumnType::Json))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Some(ColumnType::Json))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ColumnType::*;

    fn infer(values: &[&str]) -> Vec<(std::string::String, ColumnType)> {
        let mut inf = SchemaInference::new();
        for v in values {
            inf.add(v.as_bytes()).unwrap();
        }
        inf.columns()
    }

    fn cols(pairs: &[(&str, ColumnType)]) -> Vec<(std::string::String, ColumnType)> {
        pairs.iter().map(|(n, t)| (n.to_string(), *t)).collect()
    }

    #[test]
    fn seed_order_message() {
        let order = r#"{"id":1,"customer_id":6,"product":"Keyboard","amount":99.19,"status":"shipped","created_at":"2026-10-29T15:22:04+00:00","updated_at":"2026-10-29T15:22:04+00:00"}"#;
        assert_eq!(
            infer(&[order]),
            cols(&[
                ("id", Long),
                ("customer_id", Long),
                ("product", String),
                ("amount", Double),
                ("status", String),
                ("created_at", TimestampTz),
                ("updated_at", TimestampTz),
            ])
        );
    }

    #[test]
    fn scalar_types() {
        let v = r#"{"i":-3,"big":18446744073709551615,"f":1.5,"e":1e3,"z":1.0,
            "t":true,"b":false,"s":"x","ts":"2026-10-29 15:22:04","o":{"a":[1]},"a":[],"n":null}"#;
        assert_eq!(
            infer(&[v]),
            cols(&[
                ("i", Long),
                ("big", Double),
                ("f", Double),
                ("e", Double),
                ("z", Double),
                ("t", Boolean),
                ("b", Boolean),
                ("s", String),
                ("ts", TimestampTz),
                ("o", Json),
                ("a", Json),
                ("n", String),
            ])
        );
    }

    #[test]
    fn merging_across_messages() {
        let got = infer(&[
            r#"{"amount":1,"when":"2026-10-29T15:22:04Z","flag":true,"s":"a","mix":1,"n":null,"nest":1}"#,
            r#"{"amount":2.5,"when":"soon","flag":7,"s":2,"mix":"x","n":5,"nest":{"a":1}}"#,
            r#"{"amount":3,"when":null,"flag":null,"n":null}"#,
        ]);
        assert_eq!(
            got,
            cols(&[
                ("amount", Double),
                ("when", String),
                ("flag", Json),
                ("s", Json),
                ("mix", Json),
                ("n", Long),
                ("nest", Json),
            ])
        );
    }

    #[test]
    fn merge_table() {
        assert_eq!(merge_types(Long, Double), Double);
        assert_eq!(merge_types(Double, Long), Double);
        assert_eq!(merge_types(Int, Long), Long);
        assert_eq!(merge_types(TimestampTz, String), String);
        assert_eq!(merge_types(Boolean, Long), Json);
        assert_eq!(merge_types(TimestampTz, Long), Json);
        assert_eq!(merge_types(String, Double), Json);
        for t in ColumnType::ALL {
            assert_eq!(merge_types(t, t), t);
            assert_eq!(merge_types(t, Json), Json);
            for u in ColumnType::ALL {
                assert_eq!(merge_types(t, u), merge_types(u, t), "{t} {u}");
            }
        }
        assert_eq!(merge_optional(None, Some(Long)), Some(Long));
        assert_eq!(merge_optional(None, None), None);
    }

    #[test]
    fn first_seen_order_with_late_fields() {
        let got = infer(&[r#"{"b":1,"a":1}"#, r#"{"c":1,"a":2,"d":"x"}"#]);
        let names: Vec<_> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b", "a", "c", "d"]);
    }

    #[test]
    fn escaped_and_unicode_names() {
        let got = infer(&[r#"{"na\u006de":"x","città":"São Paulo","emoji😀":1}"#]);
        assert_eq!(
            got,
            cols(&[("name", String), ("città", String), ("emoji😀", Long)])
        );
    }

    #[test]
    fn bad_values_change_nothing() {
        let mut inf = SchemaInference::new();
        assert!(matches!(
            inf.add(b"{\"a\":1,\"b\":"),
            Err(InferError::NotJson(_))
        ));
        assert!(matches!(inf.add(b"not json"), Err(InferError::NotJson(_))));
        assert!(matches!(inf.add(b""), Err(InferError::NotJson(_))));
        assert_eq!(inf.add(b" [1,2]"), Err(InferError::NotAnObject("array")));
        assert_eq!(inf.add(b"\"s\""), Err(InferError::NotAnObject("string")));
        assert_eq!(inf.add(b"12"), Err(InferError::NotAnObject("number")));
        assert_eq!(inf.add(b"-1"), Err(InferError::NotAnObject("number")));
        assert_eq!(inf.add(b"null"), Err(InferError::NotAnObject("null")));
        assert_eq!(inf.add(b"true"), Err(InferError::NotAnObject("boolean")));
        assert_eq!(inf.messages(), 0);
        assert!(inf.columns().is_empty());
        assert_eq!(
            InferError::NotAnObject("array").to_string(),
            "value is not a JSON object, found array"
        );
    }

    #[test]
    fn metadata_names_are_shadowed() {
        let mut inf = SchemaInference::new();
        inf.add(br#"{"id":1,"_kafka_offset":5,"_op_type":"u"}"#)
            .unwrap();
        inf.add(br#"{"_op_type":"c"}"#).unwrap();
        assert_eq!(inf.columns(), cols(&[("id", Long)]));
        assert_eq!(inf.shadowed(), ["_kafka_offset", "_op_type"]);
        assert_eq!(inf.messages(), 2);
    }
}

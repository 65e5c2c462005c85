//! Schema inference from a sample of JSON values.
//!
//! Each top-level field of an object becomes a column, in first-seen order,
//! named by [`crate::names`] (a field named like a metadata column goes to
//! `<field>_payload`, a later spelling of a name that differs only in case
//! to `<field>__<n>`). A value's type:
//!
//! | JSON value | type |
//! |---|---|
//! | integer that fits i64 | `long` |
//! | integer beyond i64 | `json` (its exact digits as text; a double would round it) |
//! | number with a fraction or an exponent | `double` |
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
//! the numbers. A field that is only ever null becomes `string`. A field
//! with `long` and `double` values where some integer is beyond 2^53 (which
//! a double cannot hold exactly) becomes `json` instead of `double`.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::columns::{ColumnType, METADATA_COLUMNS};
use crate::names::{ColumnNames, NameError};
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
    /// A field that cannot get a column name.
    #[error("{0}")]
    ColumnName(NameError),
    /// The value's fields would take the table past its column limit.
    #[error("{}", too_many_columns(*.columns, *.limit))]
    TooManyColumns {
        /// Columns the table would have, metadata included.
        columns: usize,
        /// `sync.max_columns`.
        limit: usize,
    },
}

/// The words of a column-limit error, shared with the decoder's.
pub fn too_many_columns(columns: usize, limit: usize) -> String {
    format!(
        "the table would have {columns} columns (metadata included), more than sync.max_columns = {limit}; \
         raise `max_columns` under [sync] in the job file, or keep only the fields you need with the stream's `columns`"
    )
}

#[derive(Debug, Clone)]
struct Field {
    name: String,
    column: String,
    ty: Option<ColumnType>,
    /// An integer beyond 2^53 was seen: `double` would round it.
    wide: bool,
}

/// Accumulates the payload columns of a topic from sampled values.
#[derive(Debug, Default, Clone)]
pub struct SchemaInference {
    fields: Vec<Field>,
    index: HashMap<String, usize>,
    names: ColumnNames,
    keep: Option<Arc<HashSet<String>>>,
    max_columns: Option<usize>,
    messages: usize,
}

/// What one message changed, to undo it when it is refused.
#[derive(Default)]
struct Undo {
    /// `names` before the message's first new field.
    names: Option<ColumnNames>,
    /// `(field, type, wide)` before the message changed them.
    types: Vec<(usize, Option<ColumnType>, bool)>,
    failure: Option<NameError>,
}

impl SchemaInference {
    /// An empty inference.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only these fields become columns (the stream's `columns`).
    pub fn keep_only(mut self, fields: Option<Arc<HashSet<String>>>) -> Self {
        self.keep = fields;
        self
    }

    /// At most this many columns, the metadata columns included: a value
    /// whose fields would pass it is refused and changes nothing.
    pub fn max_columns(mut self, limit: usize) -> Self {
        self.max_columns = Some(limit);
        self
    }

    /// Adds one message value. A value that is not a JSON object, or that
    /// cannot contribute its fields, changes nothing and is returned as an
    /// error for the caller to count or log.
    pub fn add(&mut self, value: &[u8]) -> Result<(), InferError> {
        // Check the whole value first so that a broken message adds no column.
        serde_json::from_slice::<IgnoredAny>(value)
            .map_err(|e| InferError::NotJson(e.to_string()))?;
        if let Some(kind) = non_object_kind(value) {
            return Err(InferError::NotAnObject(kind));
        }
        let mark = self.fields.len();
        let mut undo = Undo::default();
        let mut de = serde_json::Deserializer::from_slice(value);
        let parsed = de.deserialize_map(ObjectVisitor {
            inference: self,
            undo: &mut undo,
        });
        let refused = match (parsed, undo.failure.take()) {
            (_, Some(name)) => Some(InferError::ColumnName(name)),
            (Err(e), None) => Some(InferError::NotJson(e.to_string())),
            (Ok(()), None) => {
                let columns = self.fields.len() + METADATA_COLUMNS.len();
                match self.max_columns {
                    Some(limit) if self.fields.len() > mark && columns > limit => {
                        Some(InferError::TooManyColumns { columns, limit })
                    }
                    _ => None,
                }
            }
        };
        if let Some(e) = refused {
            self.rollback(mark, undo);
            return Err(e);
        }
        self.messages += 1;
        Ok(())
    }

    fn rollback(&mut self, mark: usize, undo: Undo) {
        for f in self.fields.drain(mark..) {
            self.index.remove(&f.name);
        }
        for (i, ty, wide) in undo.types.into_iter().rev() {
            if let Some(f) = self.fields.get_mut(i) {
                f.ty = ty;
                f.wide = wide;
            }
        }
        if let Some(names) = undo.names {
            self.names = names;
        }
    }

    /// How many values were added.
    pub fn messages(&self) -> usize {
        self.messages
    }

    /// The payload columns so far, in first-seen order, by column name;
    /// null-only fields are `string`.
    pub fn columns(&self) -> Vec<(String, ColumnType)> {
        self.fields
            .iter()
            .map(|f| {
                let ty = match f.ty.clone() {
                    None => ColumnType::String,
                    Some(ColumnType::Double) if f.wide => ColumnType::Json,
                    Some(ty) => ty,
                };
                (f.column.clone(), ty)
            })
            .collect()
    }

    /// `(field, column)` for each field whose column has another name
    /// (see [`crate::names`]), in first-seen order.
    pub fn renamed(&self) -> &[(String, String)] {
        self.names.renamed()
    }

    fn slot(&mut self, name: &str, undo: &mut Undo) -> Result<Option<usize>, ()> {
        if let Some(&i) = self.index.get(name) {
            return Ok(Some(i));
        }
        if self.keep.as_ref().is_some_and(|keep| !keep.contains(name)) {
            return Ok(None);
        }
        if undo.names.is_none() {
            undo.names = Some(self.names.clone());
        }
        let column = match self.names.assign(name) {
            Ok(column) => column,
            Err(e) => {
                undo.failure = Some(e);
                return Err(());
            }
        };
        self.fields.push(Field {
            name: name.to_owned(),
            column,
            ty: None,
            wide: false,
        });
        self.index.insert(name.to_owned(), self.fields.len() - 1);
        Ok(Some(self.fields.len() - 1))
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
    undo: &'a mut Undo,
}

impl<'de> Visitor<'de> for ObjectVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(slot) = map.next_key_seed(FieldSlot {
            inference: &mut *self.inference,
            undo: &mut *self.undo,
        })? {
            let raw = map.next_value::<&RawValue>()?;
            if let Some(i) = slot {
                let (ty, wide) = classify(raw.get()).map_err(serde::de::Error::custom)?;
                let field = &mut self.inference.fields[i];
                let merged = merge_optional(field.ty.clone(), ty);
                if merged != field.ty || (wide && !field.wide) {
                    self.undo.types.push((i, field.ty.clone(), field.wide));
                    field.ty = merged;
                    field.wide |= wide;
                }
            }
        }
        Ok(())
    }
}

/// Finds (or adds) the field a key names; `None` for a field left out.
struct FieldSlot<'a> {
    inference: &'a mut SchemaInference,
    undo: &'a mut Undo,
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
        self.inference
            .slot(name, self.undo)
            .map_err(|()| E::custom("field refused"))
    }
}

/// The inferred type of one JSON value's text (`None` for null), and
/// whether it is an integer beyond 2^53 (which a double cannot hold
/// exactly). Nested values are not looked into. A number beyond f64's
/// range is an error, as serde_json has it.
pub(crate) fn classify(raw: &str) -> Result<(Option<ColumnType>, bool), &'static str> {
    const EXACT_IN_DOUBLE: u64 = 1 << 53;
    let ty = match raw.as_bytes().first() {
        Some(b'n') => None,
        Some(b't' | b'f') => Some(ColumnType::Boolean),
        Some(b'{' | b'[') => Some(ColumnType::Json),
        Some(b'"') => {
            let inner = &raw[1..raw.len() - 1];
            let timestamp = if inner.contains('\\') {
                let text = serde_json::from_str::<String>(raw).map_err(|_| "invalid string")?;
                parse_timestamp_micros(&text)
            } else {
                parse_timestamp_micros(inner)
            };
            Some(if timestamp.is_some() {
                ColumnType::TimestampTz
            } else {
                ColumnType::String
            })
        }
        _ if !raw.parse::<f64>().is_ok_and(f64::is_finite) => return Err("number out of range"),
        // serde_json reads `-0` as the float -0.0, as the decoder sees it.
        _ if raw.contains(['.', 'e', 'E']) || raw == "-0" => Some(ColumnType::Double),
        // An integer: within i64 a long, beyond it its exact digits.
        _ => match raw.parse::<i64>() {
            Ok(v) => return Ok((Some(ColumnType::Long), v.unsigned_abs() > EXACT_IN_DOUBLE)),
            Err(_) => Some(ColumnType::Json),
        },
    };
    Ok((ty, false))
}

/// Reads one value and returns its inferred type (`None` for null), without
/// building it: nested values are skipped.
pub(crate) struct TypeOf;

impl<'de> DeserializeSeed<'de> for TypeOf {
    type Value = Option<ColumnType>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        classify(raw.get())
            .map(|(ty, _)| ty)
            .map_err(serde::de::Error::custom)
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
        pairs
            .iter()
            .map(|(n, t)| (n.to_string(), t.clone()))
            .collect()
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
                ("big", Json),
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
        for t in ColumnType::JSON {
            assert_eq!(merge_types(t.clone(), t.clone()), t);
            assert_eq!(merge_types(t.clone(), Json), Json);
            for u in ColumnType::JSON {
                let (a, b) = (t.clone(), u.clone());
                assert_eq!(
                    merge_types(a.clone(), b.clone()),
                    merge_types(b, a),
                    "{t} {u}"
                );
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
    fn metadata_names_and_case_variants_get_renamed_columns() {
        let mut inf = SchemaInference::new();
        inf.add(br#"{"id":1,"_kafka_offset":5,"_op_type":"u","ID":"x"}"#)
            .unwrap();
        inf.add(br#"{"_op_type":"c","Id":true}"#).unwrap();
        assert_eq!(
            inf.columns(),
            cols(&[
                ("id", Long),
                ("_kafka_offset_payload", Long),
                ("_op_type_payload", String),
                ("ID__2", String),
                ("Id__3", Boolean),
            ])
        );
        let renamed: Vec<_> = inf.renamed().iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(renamed, ["_kafka_offset", "_op_type", "ID", "Id"]);
        assert_eq!(inf.messages(), 2);
        // The literal name of a renamed column: numbered like a case variant.
        inf.add(br#"{"_op_type_payload":"u"}"#).unwrap();
        assert_eq!(inf.columns()[5].0, "_op_type_payload__2");
        // A field whose name would read as a renamed column: refused,
        // nothing of its message kept.
        let mut inf = SchemaInference::new();
        let e = inf.add(br#"{"new":1,"_op_type_payload":"u"}"#).unwrap_err();
        assert!(
            matches!(e, InferError::ColumnName(NameError::ReadsAsRenamed { .. })),
            "{e}"
        );
        assert!(inf.columns().is_empty());
        assert_eq!(inf.messages(), 0);
        inf.add(br#"{"new":1}"#).unwrap();
        assert_eq!(inf.columns(), cols(&[("new", Long)]));
    }

    #[test]
    fn integers_beyond_64_bits_keep_their_digits() {
        // 2^64 and 2^53 + 1: neither may reach a double.
        assert_eq!(
            infer(&[
                r#"{"big":18446744073709551616,"huge":123456789012345678901234567890,"neg":-9223372036854775809}"#
            ]),
            cols(&[("big", Json), ("huge", Json), ("neg", Json)])
        );
        assert_eq!(
            infer(&[
                r#"{"a":9007199254740993,"b":9007199254740992}"#,
                r#"{"a":1.5,"b":1.5}"#
            ]),
            cols(&[("a", Json), ("b", Double)])
        );
        assert_eq!(
            infer(&[r#"{"a":9007199254740993}"#, r#"{"a":-9223372036854775808}"#]),
            cols(&[("a", Long)])
        );
    }

    #[test]
    fn column_limit_refuses_the_message_that_passes_it() {
        let mut inf = SchemaInference::new().max_columns(11);
        inf.add(br#"{"a":1,"b":2}"#).unwrap();
        inf.add(br#"{"a":2,"c":"x"}"#).unwrap();
        let e = inf.add(br#"{"a":2.5,"d":1,"e":2}"#).unwrap_err();
        assert_eq!(
            e,
            InferError::TooManyColumns {
                columns: 13,
                limit: 11
            }
        );
        assert!(
            e.to_string().contains("raise `max_columns` under [sync]"),
            "{e}"
        );
        // Refused whole: no new column, and `a` is still a long.
        assert_eq!(
            inf.columns(),
            cols(&[("a", Long), ("b", Long), ("c", String)])
        );
        // Known fields only: within the limit.
        inf.add(br#"{"a":3,"b":4,"c":"y"}"#).unwrap();
        assert_eq!(inf.messages(), 3);
    }

    #[test]
    fn kept_fields_only() {
        let keep = Arc::new(HashSet::from(["a".to_owned()]));
        let mut inf = SchemaInference::new().keep_only(Some(keep)).max_columns(9);
        inf.add(br#"{"a":1,"b":2,"c":3}"#).unwrap();
        assert_eq!(inf.columns(), cols(&[("a", Long)]));
    }
}

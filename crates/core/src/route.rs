//! A table name template that routes each message of a topic to a table
//! its own content names (`table = "{source.table}"`, `"orders_{region}"`,
//! `"{header:tenant}_events"`): the template's parts, and the name it
//! gives one message.
//!
//! - `{topic}`: the topic's name;
//! - `{header:NAME}`: the message's last header `NAME`, as UTF-8 text;
//! - `{a.b}`: the value's field `a.b` (a JSON object's; a change event's
//!   path is into its envelope, e.g. Debezium's `source.table`, inside the
//!   `payload` of a value written with its Connect schema).
//!
//! A string gives its text, a number or a boolean its JSON text. The joined
//! text becomes a table name as a topic's does
//! ([`crate::config::sanitize_identifier`]).

use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::config::sanitize_identifier;
use crate::record::SourceRecord;

/// A parsed `table` template with at least one placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteTemplate {
    text: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Topic,
    Header(String),
    Field(Vec<String>),
}

/// Why a `table` template is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A brace without its pair.
    #[error("{brace:?} without its pair in {text:?}")]
    Unpaired {
        /// The brace.
        brace: char,
        /// The template.
        text: String,
    },
    /// `{header:}`.
    #[error("{{header:}} names no header; write {{header:NAME}}")]
    NoHeader,
    /// Not a placeholder.
    #[error("{{{0}}} is not a placeholder: use {{topic}}, {{header:NAME}} or a field path such as {{source.table}}")]
    Unknown(String),
}

/// Why a message names no table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The field or header is missing, or null (a tombstone has no fields).
    #[error("the message has no {0} to name its table by")]
    Missing(String),
    /// The field is an object or an array.
    #[error("{0} is an object or an array, not a name")]
    NotText(String),
    /// The header is not UTF-8.
    #[error("{0} is not UTF-8 text")]
    NotUtf8(String),
    /// The value is not a JSON object.
    #[error("the value is not a JSON object ({0})")]
    NotJson(String),
    /// The parts give no letter or digit.
    #[error("the parts give {0:?}, which names no table")]
    Empty(String),
}

impl RouteTemplate {
    /// The template `text`, or `None` when it has no placeholder (a plain
    /// table name). A brace without its pair, or an empty or unknown
    /// placeholder, is an error saying what is wrong.
    pub fn parse(text: &str) -> Result<Option<Self>, TemplateError> {
        if !text.contains(['{', '}']) {
            return Ok(None);
        }
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            match rest.find(['{', '}']) {
                None => {
                    parts.push(Part::Text(rest.to_owned()));
                    break;
                }
                Some(i) if rest.as_bytes()[i] == b'}' => {
                    return Err(TemplateError::Unpaired {
                        brace: '}',
                        text: text.to_owned(),
                    })
                }
                Some(i) => {
                    if i > 0 {
                        parts.push(Part::Text(rest[..i].to_owned()));
                    }
                    let end = rest[i..].find('}').ok_or_else(|| TemplateError::Unpaired {
                        brace: '{',
                        text: text.to_owned(),
                    })?;
                    parts.push(placeholder(&rest[i + 1..i + end])?);
                    rest = &rest[i + end + 1..];
                }
            }
        }
        Ok(Some(RouteTemplate {
            text: text.to_owned(),
            parts,
        }))
    }

    /// The template as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether a part is a field of the value (not only the topic and
    /// headers): a tombstone then names no table.
    pub fn reads_value(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Field(_)))
    }

    /// The table `record` goes to: the parts joined, as a table name.
    /// `envelope`: a change event, whose `{"schema": .., "payload": ..}`
    /// wrapping is looked through.
    pub fn table_for(
        &self,
        record: &SourceRecord<'_>,
        envelope: bool,
    ) -> Result<String, RouteError> {
        self.name_for(record, envelope).map(|n| n.table)
    }

    /// [`Self::table_for`] with the joined text it was made from (two
    /// texts that make one table name collide).
    pub fn name_for(
        &self,
        record: &SourceRecord<'_>,
        envelope: bool,
    ) -> Result<RoutedName, RouteError> {
        let mut joined = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => joined.push_str(t),
                Part::Topic => joined.push_str(record.topic),
                Part::Header(name) => joined.push_str(&header(record, name)?),
                Part::Field(path) => joined.push_str(&field(record.value, path, envelope)?),
            }
        }
        let table = sanitize_identifier(&joined);
        if table.chars().all(|c| c == '_') {
            return Err(RouteError::Empty(joined));
        }
        Ok(RoutedName {
            text: joined,
            table,
        })
    }
}

impl RouteTemplate {
    /// [`Self::table_for`] written into `table` (cleared first): the
    /// drain's form, which reuses one buffer for every message.
    pub fn write_table(
        &self,
        record: &SourceRecord<'_>,
        envelope: bool,
        table: &mut String,
    ) -> Result<(), RouteError> {
        table.clear();
        let push = |table: &mut String, text: &str| {
            table.extend(text.chars().map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            }))
        };
        for part in &self.parts {
            match part {
                Part::Text(t) => push(table, t),
                Part::Topic => push(table, record.topic),
                Part::Header(name) => push(table, &header(record, name)?),
                Part::Field(path) => push(table, &field(record.value, path, envelope)?),
            }
        }
        if table.chars().all(|c| c == '_') {
            return Err(self
                .name_for(record, envelope)
                .err()
                .unwrap_or(RouteError::Empty(table.clone())));
        }
        Ok(())
    }
}

/// The name a message's parts give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedName {
    /// The parts joined, as the message has them.
    pub text: String,
    /// That text as a table name.
    pub table: String,
}

impl fmt::Display for RouteTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn placeholder(inner: &str) -> Result<Part, TemplateError> {
    let inner = inner.trim();
    if inner == "topic" {
        return Ok(Part::Topic);
    }
    if let Some(name) = inner.strip_prefix("header:") {
        if name.is_empty() {
            return Err(TemplateError::NoHeader);
        }
        return Ok(Part::Header(name.to_owned()));
    }
    let path: Vec<String> = inner.split('.').map(str::to_owned).collect();
    if path.iter().any(|p| p.is_empty()) {
        return Err(TemplateError::Unknown(inner.to_owned()));
    }
    Ok(Part::Field(path))
}

fn header(record: &SourceRecord<'_>, name: &str) -> Result<String, RouteError> {
    let what = || format!("header {name:?}");
    let value = record
        .headers
        .last(name, |v| v.map(<[u8]>::to_vec))
        .map_err(|_| RouteError::Missing(what()))?
        .flatten()
        .ok_or_else(|| RouteError::Missing(what()))?;
    String::from_utf8(value).map_err(|_| RouteError::NotUtf8(what()))
}

fn field(value: Option<&[u8]>, path: &[String], envelope: bool) -> Result<String, RouteError> {
    let what = || format!("field {:?}", path.join("."));
    let value = value.ok_or_else(|| RouteError::Missing(what()))?;
    let wrapped = envelope && value.starts_with(b"{\"schema\":");
    let mut full: Vec<&str> = Vec::with_capacity(path.len() + 1);
    if wrapped {
        full.push("payload");
    }
    full.extend(path.iter().map(String::as_str));
    let mut de = serde_json::Deserializer::from_slice(value);
    match (PathSeed { path: &full }).deserialize(&mut de) {
        Ok(Found::Text(t)) => Ok(t),
        Ok(Found::Nothing) => Err(RouteError::Missing(what())),
        Ok(Found::Nested) => Err(RouteError::NotText(what())),
        Err(e) => Err(RouteError::NotJson(e.to_string())),
    }
}

/// What a path leads to.
enum Found {
    Text(String),
    /// An object or an array.
    Nested,
    /// Nothing, or null.
    Nothing,
}

/// Reads the value at `path` of a JSON object, skipping everything else
/// without building it.
struct PathSeed<'p> {
    path: &'p [&'p str],
}

impl<'de> DeserializeSeed<'de> for PathSeed<'_> {
    type Value = Found;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PathSeed<'_> {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        let Some((first, rest)) = self.path.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Found::Nested);
        };
        let mut found = Found::Nothing;
        while let Some(matches) = map.next_key_seed(KeyIs(first))? {
            if matches {
                found = map.next_value_seed(PathSeed { path: rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(if self.path.is_empty() {
            Found::Nested
        } else {
            Found::Nothing
        })
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Found, E> {
        Ok(self.scalar(v.to_owned()))
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Found, E> {
        Ok(self.scalar(v.to_string()))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Found, E> {
        Ok(self.scalar(v.to_string()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Found, E> {
        Ok(self.scalar(v.to_string()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Found, E> {
        Ok(self.scalar(v.to_string()))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Found, E> {
        Ok(Found::Nothing)
    }
}

impl PathSeed<'_> {
    /// A scalar: the value when the path ends here.
    fn scalar(&self, text: String) -> Found {
        if self.path.is_empty() {
            Found::Text(text)
        } else {
            Found::Nothing
        }
    }
}

/// Whether an object key is `.0`, without building the key.
struct KeyIs<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Headers;

    fn record<'a>(value: Option<&'a [u8]>, headers: Headers<'a>) -> SourceRecord<'a> {
        SourceRecord {
            topic: "Shop.All",
            partition: 0,
            offset: 7,
            timestamp_ms: None,
            key: None,
            value,
            headers,
        }
    }

    fn template(text: &str) -> RouteTemplate {
        RouteTemplate::parse(text).unwrap().unwrap()
    }

    #[test]
    fn a_name_without_braces_is_no_template_and_bad_braces_are_errors() {
        assert_eq!(RouteTemplate::parse("orders").unwrap(), None);
        for bad in ["{source.table", "a}b", "{}", "{a..b}", "{header:}"] {
            assert!(RouteTemplate::parse(bad).is_err(), "{bad}");
        }
        assert!(template("x_{a}").reads_value());
        assert!(!template("{topic}_{header:t}").reads_value());
    }

    #[test]
    fn fields_headers_and_the_topic_name_the_table() {
        let value = br#"{"before":null,"after":{"region":"EU"},"source":{"db":"Shop","table":"Order Lines","lsn":5},"n":3,"ok":true}"#;
        let headers =
            crate::record::wire_headers(&[(b"tenant".as_slice(), Some(b"acme".as_slice()))]);
        let r = record(Some(value), Headers::Wire(&headers));
        assert_eq!(
            template("{source.db}_{source.table}")
                .table_for(&r, true)
                .unwrap(),
            "shop_order_lines"
        );
        assert_eq!(
            template("t_{n}_{ok}").table_for(&r, false).unwrap(),
            "t_3_true"
        );
        assert_eq!(
            template("{header:tenant}_{topic}")
                .table_for(&r, false)
                .unwrap(),
            "acme_shop_all"
        );
        assert_eq!(
            template("{after.region}").table_for(&r, true).unwrap(),
            "eu"
        );
        let missing = template("{source.schema}").table_for(&r, true).unwrap_err();
        assert_eq!(
            missing,
            RouteError::Missing("field \"source.schema\"".into())
        );
        let nested = template("{source}").table_for(&r, true).unwrap_err();
        assert_eq!(nested, RouteError::NotText("field \"source\"".into()));
        assert!(matches!(
            template("{before.x}").table_for(&r, true),
            Err(RouteError::Missing(_))
        ));
        assert!(matches!(
            template("{header:other}").table_for(&r, true),
            Err(RouteError::Missing(_))
        ));
    }

    #[test]
    fn a_change_event_with_its_schema_is_read_inside_its_payload() {
        let value = br#"{"schema":{"type":"struct","fields":[]},"payload":{"after":{"id":1},"source":{"table":"orders"},"op":"c"}}"#;
        let r = record(Some(value), Headers::None);
        assert_eq!(
            template("{source.table}").table_for(&r, true).unwrap(),
            "orders"
        );
        // Not a change event: the path is the value's own.
        assert!(template("{source.table}").table_for(&r, false).is_err());
        // A tombstone names no table by a field.
        let tombstone = record(None, Headers::None);
        assert!(matches!(
            template("{source.table}").table_for(&tombstone, true),
            Err(RouteError::Missing(_))
        ));
        assert!(matches!(
            template("{x}").table_for(&record(Some(b"[1]"), Headers::None), false),
            Err(RouteError::Missing(_))
        ));
        assert!(matches!(
            template("{x}").table_for(&record(Some(b"{\"x\":\"--\"}"), Headers::None), false),
            Err(RouteError::Empty(_))
        ));
    }
}

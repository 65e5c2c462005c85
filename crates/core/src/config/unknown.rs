//! Unknown keys, every one of them: found on the parsed document before it
//! is deserialised (serde's `deny_unknown_fields` stops at the first), each
//! reported with its table and line and a near match if there is one, then
//! taken out so that the validation problems are reported with them. The
//! file still fails to load: an unknown key stays an error.

use serde::de::{self, Deserialize, Deserializer, Visitor};
use toml::de::{DeTable, DeValue};

use super::{
    ConfigProblem, DestinationConfig, JobConfig, MaintainConfig, SourceConfig, StreamConfig,
    SyncConfig,
};

/// Removes every unknown key from `root`; returns one problem per key with
/// the byte offset of the key (for ordering).
pub(super) fn take_unknown_keys(root: &mut DeTable<'_>, text: &str) -> Vec<(usize, ConfigProblem)> {
    let mut found = take_from(root, "(top level)", fields_of::<JobConfig>(), text);
    for (key, fields) in [
        ("source", fields_of::<SourceConfig>()),
        ("destination", fields_of::<DestinationConfig>()),
        ("sync", fields_of::<SyncConfig>()),
        ("maintain", fields_of::<MaintainConfig>()),
    ] {
        if let Some(DeValue::Table(table)) = root.get_mut(key).map(|v| v.get_mut()) {
            found.extend(take_from(table, &format!("[{key}]"), fields, text));
        }
    }
    if let Some(DeValue::Array(items)) = root.get_mut("streams").map(|v| v.get_mut()) {
        let fields = fields_of::<StreamConfig>();
        for (i, item) in items.iter_mut().enumerate() {
            if let DeValue::Table(table) = item.get_mut() {
                let place = format!("[[streams]] #{}", i + 1);
                found.extend(take_from(table, &place, fields, text));
            }
        }
    }
    found.sort_by_key(|(at, _)| *at);
    found
}

fn take_from(
    table: &mut DeTable<'_>,
    place: &str,
    fields: &[&str],
    text: &str,
) -> Vec<(usize, ConfigProblem)> {
    let mut found = Vec::new();
    let mut unknown = Vec::new();
    for (key, _) in table.iter() {
        let name: &str = key.get_ref();
        if fields.contains(&name) {
            continue;
        }
        let at = key.span().start;
        let line = super::error::line_column(text, at).0;
        found.push((
            at,
            ConfigProblem::new(place, unknown_message(name, fields, line)),
        ));
        unknown.push(name.to_string());
    }
    for name in unknown {
        table.remove(name.as_str());
    }
    found
}

/// `unknown field "dedup_key", did you mean "dedup_keys"? (line 14)`, or
/// the list of known fields when none is close.
fn unknown_message(name: &str, fields: &[&str], line: usize) -> String {
    match near_match(name, fields) {
        Some(near) => format!(
            "unknown field \"{name}\", did you mean \"{near}\"? (line {line}; rename or remove it)"
        ),
        None => format!(
            "unknown field \"{name}\" (line {line}); remove it, or use one of: {}",
            fields.join(", ")
        ),
    }
}

/// The known field closest to `name`, if it is a plausible typo: at most
/// two edits away (one for names of up to four characters).
fn near_match<'f>(name: &str, fields: &[&'f str]) -> Option<&'f str> {
    let limit = if name.chars().count() <= 4 { 1 } else { 2 };
    let lower = name.to_ascii_lowercase();
    fields
        .iter()
        .map(|f| (crate::near::edit_distance(&lower, f), *f))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, f)| f)
}

/// The field names serde's derive gives a struct (the same list
/// `deny_unknown_fields` checks against), read by asking the struct to
/// deserialise itself from a deserializer that only records them.
pub(super) fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

struct FieldNames<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Recorded;

impl std::fmt::Display for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names recorded")
    }
}

impl std::error::Error for Recorded {}

impl de::Error for Recorded {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Recorded
    }
}

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = Recorded;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Recorded> {
        Err(Recorded)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Recorded> {
        *self.0 = fields;
        Err(Recorded)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_lists_come_from_the_structs() {
        let source = fields_of::<SourceConfig>();
        assert!(source.contains(&"sasl_password") && source.contains(&"max_threads"));
        let root = fields_of::<JobConfig>();
        assert!(root.contains(&"streams") && !root.contains(&"topic_regex"));
        assert!(fields_of::<StreamConfig>().contains(&"dedup_keys"));
    }

    #[test]
    fn near_matches_are_typos_only() {
        let fields = ["dedup_keys", "mode", "topic", "table"];
        assert_eq!(near_match("dedup_key", &fields), Some("dedup_keys"));
        assert_eq!(near_match("moed", &fields), Some("mode"));
        assert_eq!(near_match("mod", &fields), Some("mode"));
        assert_eq!(near_match("Topic", &fields), Some("topic"));
        assert_eq!(near_match("colour", &fields), None);
        assert_eq!(crate::near::edit_distance("kitten", "sitting"), 3);
    }
}

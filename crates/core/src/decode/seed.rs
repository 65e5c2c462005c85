//! The serde side of the decoder: a map visitor for the message object, a
//! key seed that finds each field's column, and a value seed that appends
//! the field's value straight into that column's buffer.

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::buffer::ColumnBuffer;
use super::error::UnknownField;
use crate::columns::ColumnType;
use crate::infer::{merge_optional, TypeOf};
use crate::timestamp::parse_timestamp_micros;

/// Why a value did not go into its column; the custom serde error that
/// stops the parse carries no detail, this does.
pub(super) enum Failure {
    Mismatch { column: usize, found: String },
    OutOfRange { column: usize, found: String },
    BatchFull { column: usize },
}

/// Field name -> column, plus the per-row bookkeeping of which columns a
/// message set.
pub(super) struct FieldIndex {
    /// Message field name -> column index (a renamed column under its
    /// field's name; metadata columns are not listed).
    pub(super) by_name: HashMap<Box<str>, usize>,
    /// The message field each column holds, by column index (a metadata
    /// column: its own name).
    pub(super) names: Vec<Box<str>>,
    /// Whether each name reads the same in a JSON message, quoted as it
    /// is (no quote, backslash or control character in it).
    pub(super) verbatim: Vec<bool>,
    /// The column the key at each position of the previous message named:
    /// messages of a topic usually list fields in one order, so one string
    /// comparison replaces the hash lookup.
    pub(super) hint: Vec<usize>,
    /// `seen[c] == stamp` when the current message set column `c`.
    pub(super) seen: Vec<u64>,
    pub(super) stamp: u64,
    /// The stream's `columns` list: other unknown names are skipped.
    pub(super) allowed: Option<std::sync::Arc<std::collections::HashSet<String>>>,
}

impl FieldIndex {
    /// [`FieldIndex::lookup`] of a name's UTF-8 bytes.
    #[inline]
    pub(super) fn lookup_bytes(&mut self, position: usize, name: &[u8]) -> Option<usize> {
        if let Some(&column) = self.hint.get(position) {
            if self.names.get(column).is_some_and(|n| n.as_bytes() == name) {
                return Some(column);
            }
        }
        self.lookup(position, std::str::from_utf8(name).ok()?)
    }

    #[inline]
    fn lookup(&mut self, position: usize, name: &str) -> Option<usize> {
        // Positions that named no payload column hold usize::MAX: no name.
        let hinted = self
            .hint
            .get(position)
            .and_then(|&c| Some((c, self.names.get(c)?)));
        if let Some((column, hinted_name)) = hinted {
            if **hinted_name == *name {
                return Some(column);
            }
        }
        let column = *self.by_name.get(name)?;
        if position >= self.hint.len() {
            self.hint.resize(position + 1, usize::MAX);
        }
        self.hint[position] = column;
        Some(column)
    }
}

/// The state one message's parse works on.
pub(super) struct Row<'a> {
    pub(super) buffers: &'a mut [ColumnBuffer],
    pub(super) fields: &'a mut FieldIndex,
    pub(super) unknown: &'a mut Vec<UnknownField>,
    /// Each unknown field's type before this message widened it, for
    /// undoing a failed message.
    pub(super) unknown_undo: &'a mut Vec<(usize, Option<ColumnType>)>,
    pub(super) failure: &'a mut Option<Failure>,
    pub(super) partition: i32,
    pub(super) offset: i64,
}

impl<'de> Visitor<'de> for Row<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let stamp = self.fields.stamp;
        let mut position = 0;
        while let Some(key) = map.next_key_seed(KeySeed {
            fields: &mut *self.fields,
            unknown: &mut *self.unknown,
            position,
            partition: self.partition,
            offset: self.offset,
        })? {
            match key {
                Key::Column(column) => {
                    let buffer = &mut self.buffers[column];
                    if self.fields.seen[column] == stamp {
                        // A duplicate key: the last value wins.
                        buffer.pop();
                    } else {
                        self.fields.seen[column] = stamp;
                    }
                    map.next_value_seed(ValueSeed {
                        buffer,
                        column,
                        failure: &mut *self.failure,
                    })?;
                }
                Key::Unknown(i) => {
                    let ty = map.next_value_seed(TypeOf)?;
                    let field = &mut self.unknown[i];
                    let merged = merge_optional(field.ty.clone(), ty.clone());
                    if merged != field.ty {
                        self.unknown_undo.push((i, field.ty.clone()));
                        field.ty = merged;
                    }
                }
                Key::Ignored => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            position += 1;
        }
        Ok(())
    }
}

enum Key {
    Column(usize),
    /// Index into the unknown-field list.
    Unknown(usize),
    /// Not in the stream's `columns`.
    Ignored,
}

struct KeySeed<'a> {
    fields: &'a mut FieldIndex,
    unknown: &'a mut Vec<UnknownField>,
    position: usize,
    partition: i32,
    offset: i64,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    // Borrowed or unescaped into serde_json's scratch: either way no copy.
    fn visit_str<E: de::Error>(self, name: &str) -> Result<Key, E> {
        match self.fields.lookup(self.position, name) {
            Some(column) => Ok(Key::Column(column)),
            None => {
                if let Some(allowed) = &self.fields.allowed {
                    if !allowed.contains(name) {
                        return Ok(Key::Ignored);
                    }
                }
                if let Some(i) = self.unknown.iter().position(|u| u.name == name) {
                    return Ok(Key::Unknown(i));
                }
                self.unknown.push(UnknownField {
                    name: name.to_owned(),
                    ty: None,
                    partition: self.partition,
                    offset: self.offset,
                });
                Ok(Key::Unknown(self.unknown.len() - 1))
            }
        }
    }
}

/// Appends one value into one column, checking the column's type rules.
struct ValueSeed<'a> {
    buffer: &'a mut ColumnBuffer,
    column: usize,
    failure: &'a mut Option<Failure>,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.buffer.ty != ColumnType::Json {
            return d.deserialize_any(self);
        }
        // Any value, kept as its JSON text exactly as the message has it.
        let raw = <&'de RawValue>::deserialize(d)?;
        match raw.get() {
            "null" => {
                self.buffer.push_null();
                Ok(())
            }
            text => self.push_str(text),
        }
    }
}

impl ValueSeed<'_> {
    fn mismatch<E: de::Error>(self, found: String) -> Result<(), E> {
        *self.failure = Some(Failure::Mismatch {
            column: self.column,
            found,
        });
        Err(E::custom("type mismatch"))
    }

    fn out_of_range<E: de::Error>(self, found: String) -> Result<(), E> {
        *self.failure = Some(Failure::OutOfRange {
            column: self.column,
            found,
        });
        Err(E::custom("out of range"))
    }

    fn push_str<E: de::Error>(self, text: &str) -> Result<(), E> {
        if self.buffer.push_str(text).is_err() {
            *self.failure = Some(Failure::BatchFull {
                column: self.column,
            });
            return Err(E::custom("batch full"));
        }
        Ok(())
    }
}

/// `string "text"`, cut after 40 characters.
fn describe_string(text: &str) -> String {
    const MAX_CHARS: usize = 40;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("string {:?}...", &text[..cut]),
        None => format!("string {text:?}"),
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} value", self.buffer.ty)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.buffer.push_null();
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        match self.buffer.ty {
            ColumnType::Boolean => {
                self.buffer.push_bool(v);
                Ok(())
            }
            _ => self.mismatch(format!("boolean {v}")),
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        match self.buffer.ty {
            ColumnType::Long => self.buffer.push_i64(v),
            // Only integers a double holds exactly: never a rounded value.
            ColumnType::Double if (v as f64) as i128 == i128::from(v) => {
                self.buffer.push_f64(v as f64)
            }
            ColumnType::Double => return self.out_of_range(format!("integer {v}")),
            ColumnType::Float => self.buffer.push_f32(v as f32),
            ColumnType::Int => match i32::try_from(v) {
                Ok(v) => self.buffer.push_i32(v),
                Err(_) => return self.out_of_range(format!("integer {v}")),
            },
            _ => return self.mismatch(format!("integer {v}")),
        }
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        match self.buffer.ty {
            ColumnType::Long => match i64::try_from(v) {
                Ok(v) => self.buffer.push_i64(v),
                Err(_) => return self.out_of_range(format!("integer {v}")),
            },
            ColumnType::Double if (v as f64) as u128 == u128::from(v) => {
                self.buffer.push_f64(v as f64)
            }
            ColumnType::Double => return self.out_of_range(format!("integer {v}")),
            ColumnType::Float => self.buffer.push_f32(v as f32),
            ColumnType::Int => match i32::try_from(v) {
                Ok(v) => self.buffer.push_i32(v),
                Err(_) => return self.out_of_range(format!("integer {v}")),
            },
            _ => return self.mismatch(format!("integer {v}")),
        }
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        match self.buffer.ty {
            ColumnType::Double => {
                self.buffer.push_f64(v);
                Ok(())
            }
            // Within float's range it is stored rounded to 32 bits, as the
            // column's type says; beyond it the column must widen.
            ColumnType::Float if v.abs() <= f64::from(f32::MAX) => {
                self.buffer.push_f32(v as f32);
                Ok(())
            }
            ColumnType::Float => self.out_of_range(format!("number {v:?}")),
            _ => self.mismatch(format!("number {v:?}")),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        match self.buffer.ty {
            ColumnType::String => self.push_str(v),
            ColumnType::TimestampTz => match parse_timestamp_micros(v) {
                Some(micros) => {
                    self.buffer.push_i64(micros);
                    Ok(())
                }
                None => self.mismatch(describe_string(v)),
            },
            _ => self.mismatch(describe_string(v)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.mismatch("object".to_owned())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.mismatch("array".to_owned())
    }
}

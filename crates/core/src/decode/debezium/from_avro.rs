//! Change events in Avro through the schema registry (Kafka Connect's Avro
//! converter): each value is written as the JSON converter's payload of
//! the Connect schema its writer schema was made from
//! ([`super::connect_avro`]), which is then read by the same rules as a
//! JSON event (operations, keys, positions, types, Debezium's
//! placeholder).
//!
//! Values are written as the JSON converter writes them: bytes (and
//! decimals) as base64, enums as their symbol, a union as its branch,
//! `NaN` and infinities as strings.

use std::io::Write as _;

use base64::Engine as _;

use super::connect_avro::ChangeSchema;
use super::{columns_of, payload_event, ChangeColumns, Event, SchemaAt};
use crate::decode::avro::{AvroType, Bad, Cursor};
use crate::decode::error::DecodeErrorKind;
use crate::decode::{error, BatchDecoder, DecodeError, RegistryValues};
use crate::record::{Headers, SourceRecord};

impl BatchDecoder {
    /// A registry-framed change event written with schema `id`.
    pub(super) fn append_framed_change(
        &mut self,
        record: &SourceRecord<'_>,
        registry: &RegistryValues,
        id: u32,
        body: &[u8],
    ) -> Result<(), DecodeError> {
        let schema = match &self.change_schema {
            Some((last, schema)) if *last == id => schema.clone(),
            _ => {
                let schema = registry
                    .change_schema(id)
                    .map_err(|kind| error(record, None, kind))?;
                self.change_schema = Some((id, schema.clone()));
                schema
            }
        };
        let mut json = std::mem::take(&mut self.change_json);
        let appended = with_event(&schema, id, body, &mut json, &record.headers)
            .map_err(|kind| error(record, None, kind))
            .and_then(|event| self.append_event(record, event));
        self.change_json = json;
        appended
    }
}

/// The event in the framed `body` of schema `id`, an Avro one written
/// into `json` as its JSON payload.
fn with_event<'a>(
    schema: &'a ChangeSchema,
    id: u32,
    body: &'a [u8],
    json: &'a mut Vec<u8>,
    headers: &Headers<'_>,
) -> Result<Event<'a>, DecodeErrorKind> {
    match schema {
        ChangeSchema::Unsupported(reason) => Err(DecodeErrorKind::UnsupportedSchema {
            schema_id: id,
            reason: Box::new(reason.clone()),
        }),
        ChangeSchema::Avro { writer, connect } => {
            json.clear();
            transcode(writer, body, json).map_err(|bad| DecodeErrorKind::BadBody {
                schema_id: id,
                reason: bad.to_string(),
            })?;
            payload_event(json, SchemaAt::Text(connect), headers)
        }
    }
}

/// The columns of the change event `value` (see [`ChangeColumns`]), read
/// through `registry` when it is framed.
pub fn change_columns_in<'a>(
    value: &'a [u8],
    registry: Option<&RegistryValues>,
) -> Result<Option<ChangeColumns<'a>>, DecodeErrorKind> {
    let framing = registry.and_then(|_| crate::registry::framing(value));
    let (Some(registry), Some(f)) = (registry, framing) else {
        return match registry.map(|r| r.format) {
            Some(format) if format != crate::ValueFormat::Auto => {
                Err(DecodeErrorKind::NotFramed { format })
            }
            _ => super::change_columns(value),
        };
    };
    let schema = registry.change_schema(f.schema_id)?;
    let body = &value[f.body_start..];
    let mut json = Vec::new();
    let event = match with_event(&schema, f.schema_id, body, &mut json, &Headers::None) {
        Err(DecodeErrorKind::Tombstone) => return Ok(None),
        other => other?,
    };
    Ok(match columns_of(event)? {
        Some(ChangeColumns::Typed(fields)) => Some(ChangeColumns::Typed(fields)),
        // An Avro event always has its schema.
        Some(ChangeColumns::Untyped(_)) | None => None,
    })
}

/// Writes the Avro value `body` of `writer` into `out` as the JSON
/// converter's payload (see the module docs).
pub(crate) fn transcode(writer: &AvroType, body: &[u8], out: &mut Vec<u8>) -> Result<(), Bad> {
    let mut cursor = Cursor::new(body);
    value(writer, &mut cursor, out)?;
    match cursor.remaining() {
        0 => Ok(()),
        n => Err(Bad::Trailing(n)),
    }
}

fn value(ty: &AvroType, c: &mut Cursor<'_>, out: &mut Vec<u8>) -> Result<(), Bad> {
    match ty {
        AvroType::Null => out.extend_from_slice(b"null"),
        AvroType::Boolean => match c.take(1)?[0] {
            0 => out.extend_from_slice(b"false"),
            1 => out.extend_from_slice(b"true"),
            b => return Err(Bad::Boolean(b)),
        },
        AvroType::Int | AvroType::Date | AvroType::Time { millis: true } => {
            write!(out, "{}", c.int()?).expect("a Vec takes writes")
        }
        AvroType::Long | AvroType::Time { .. } | AvroType::Timestamp { .. } => {
            write!(out, "{}", c.long()?).expect("a Vec takes writes")
        }
        // A float's own shortest text, as the JSON converter writes it.
        AvroType::Float => match c.float()? {
            v if v.is_finite() => write!(out, "{v:?}").expect("a Vec takes writes"),
            v => number(f64::from(v), out),
        },
        AvroType::Double => number(c.double()?, out),
        AvroType::Bytes | AvroType::Decimal { fixed: None, .. } => base64(c.bytes()?, out),
        AvroType::Fixed(n) | AvroType::Decimal { fixed: Some(n), .. } => base64(c.take(*n)?, out),
        AvroType::Uuid { fixed: true } => {
            let b = c.take(16)?;
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            let text = format!(
                "{}-{}-{}-{}-{}",
                &hex[..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..]
            );
            string(&text, out);
        }
        AvroType::String | AvroType::Uuid { fixed: false } => string(c.str()?, out),
        AvroType::Enum(symbols) => {
            let i = c.int()?;
            let symbol = usize::try_from(i)
                .ok()
                .and_then(|i| symbols.get(i))
                .ok_or(Bad::Enum(i64::from(i)))?;
            string(symbol, out);
        }
        AvroType::Record(record) => {
            out.push(b'{');
            for (i, (name, field)) in record.fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(name, out);
                out.push(b':');
                value(field, c, out)?;
            }
            out.push(b'}');
        }
        AvroType::Array(items) => {
            out.push(b'[');
            blocks(c, out, |c, out| value(items, c, out))?;
            out.push(b']');
        }
        AvroType::Map(values) => {
            out.push(b'{');
            blocks(c, out, |c, out| {
                string(c.str()?, out);
                out.push(b':');
                value(values, c, out)
            })?;
            out.push(b'}');
        }
        AvroType::Union(branches) => {
            let i = c.long()?;
            let branch = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or(Bad::Union(i))?;
            value(branch, c, out)?;
        }
    }
    Ok(())
}

/// The items of an array's or a map's blocks, comma-separated.
fn blocks(
    c: &mut Cursor<'_>,
    out: &mut Vec<u8>,
    mut item: impl FnMut(&mut Cursor<'_>, &mut Vec<u8>) -> Result<(), Bad>,
) -> Result<(), Bad> {
    let mut first = true;
    loop {
        let n = c.block()?;
        if n == 0 {
            return Ok(());
        }
        for _ in 0..n {
            if !first {
                out.push(b',');
            }
            first = false;
            item(c, out)?;
        }
    }
}

/// A number as the JSON converter writes it (`NaN` and infinities as strings).
fn number(v: f64, out: &mut Vec<u8>) {
    if v.is_finite() {
        write!(out, "{v:?}").expect("a Vec takes writes");
    } else if v.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if v > 0.0 {
        out.extend_from_slice(b"\"Infinity\"");
    } else {
        out.extend_from_slice(b"\"-Infinity\"");
    }
}

fn string(s: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, s).expect("a Vec takes writes");
}

fn base64(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    out.extend_from_slice(
        base64::engine::general_purpose::STANDARD
            .encode(bytes)
            .as_bytes(),
    );
    out.push(b'"');
}

#[cfg(test)]
mod tests;

//! One field's JSON value of a change event into its column, as its
//! Connect schema says ([`super::schema::Read`]).

use base64::Engine as _;
use serde_json::Value;

use super::schema::Read;
use crate::decode::buffer::ColumnBuffer;
use crate::decode::parse_uuid;

/// What Debezium writes for a value it did not read (an unchanged TOASTed
/// column of PostgreSQL under `REPLICA IDENTITY DEFAULT`).
pub(crate) const UNAVAILABLE: &str = "__debezium_unavailable_value";

/// [`UNAVAILABLE`] as Kafka Connect's JSON converter writes a bytes value
/// (base64), as Debezium sends it for a `bytea` column.
pub(crate) const UNAVAILABLE_BASE64: &str = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";

/// The fields of a row object read without its schema whose value is the
/// placeholder (as text, as base64 bytes, or an array holding it), and the
/// object with those values null; `None` when it has none (the bytes are
/// searched first: most rows have none).
pub(crate) fn without_unsent(json: &str) -> Option<(String, Vec<String>)> {
    let bytes = json.as_bytes();
    let base64 = &UNAVAILABLE_BASE64.as_bytes()[..UNAVAILABLE_BASE64.len() - 2];
    memchr::memmem::find(bytes, UNAVAILABLE.as_bytes())
        .or_else(|| memchr::memmem::find(bytes, base64))?;
    let mut object: serde_json::Map<String, Value> = serde_json::from_str(json).ok()?;
    let mut names = Vec::new();
    for (name, value) in object.iter_mut() {
        let unsent = match value {
            Value::String(s) => s == UNAVAILABLE || s == UNAVAILABLE_BASE64,
            Value::Array(items) => items.iter().any(|e| e.as_str() == Some(UNAVAILABLE)),
            _ => false,
        };
        if unsent {
            names.push(name.clone());
            *value = Value::Null;
        }
    }
    if names.is_empty() {
        return None;
    }
    Some((Value::Object(object).to_string(), names))
}

/// Why a value could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Bad {
    /// The value does not have the JSON form its schema says.
    Form(String),
    /// Debezium's placeholder for a value it did not send.
    Unavailable,
    /// The batch's strings would pass 2 GiB.
    Full,
}

/// Appends `value` (null: a null) to `buffer` by `read`.
pub(crate) fn push(read: &Read, value: &Value, buffer: &mut ColumnBuffer) -> Result<(), Bad> {
    if value.is_null() {
        buffer.push_null();
        return Ok(());
    }
    let form = |what: &str| Bad::Form(format!("expected {what}, found {}", short(value)));
    match read {
        Read::Int => {
            let v = value.as_i64().and_then(|v| i32::try_from(v).ok());
            buffer.push_i32(v.ok_or_else(|| form("a 32-bit integer"))?);
        }
        Read::Long => buffer.push_i64(value.as_i64().ok_or_else(|| form("an integer"))?),
        Read::Float => buffer.push_f32(value.as_f64().ok_or_else(|| form("a number"))? as f32),
        Read::Double => buffer.push_f64(value.as_f64().ok_or_else(|| form("a number"))?),
        Read::Boolean => buffer.push_bool(value.as_bool().ok_or_else(|| form("a boolean"))?),
        Read::String => {
            let text = value.as_str().ok_or_else(|| form("a string"))?;
            if text == UNAVAILABLE {
                return Err(Bad::Unavailable);
            }
            buffer.push_str(text).map_err(|_| Bad::Full)?;
        }
        Read::JsonText => buffer.push_str(&value.to_string()).map_err(|_| Bad::Full)?,
        Read::Binary => {
            let bytes = base64_of(value).ok_or_else(|| form("base64 bytes"))?;
            if bytes == UNAVAILABLE.as_bytes() {
                return Err(Bad::Unavailable);
            }
            buffer.push_bytes(&bytes);
        }
        Read::Decimal { precision } => {
            let bytes = base64_of(value).ok_or_else(|| form("a decimal as base64 bytes"))?;
            let unscaled = unscaled(&bytes).ok_or_else(|| form("at most 16 bytes"))?;
            if unscaled.unsigned_abs() >= 10u128.pow(u32::from(*precision)) {
                return Err(Bad::Form(format!(
                    "decimal with unscaled value {unscaled} has more than {precision} digits"
                )));
            }
            buffer.push_i128(unscaled);
        }
        Read::VariableDecimal => {
            let text = variable_decimal(value).ok_or_else(|| form("{scale, value}"))?;
            buffer.push_str(&text).map_err(|_| Bad::Full)?;
        }
        Read::Date => {
            let v = value.as_i64().and_then(|v| i32::try_from(v).ok());
            buffer.push_i32(v.ok_or_else(|| form("days as a 32-bit integer"))?);
        }
        Read::Time { per_second } | Read::Timestamp { per_second } => {
            let v = value.as_i64().ok_or_else(|| form("an integer"))?;
            buffer.push_i64(
                micros(v, *per_second).ok_or_else(|| {
                    Bad::Form(format!("{v} is not a whole number of microseconds"))
                })?,
            );
        }
        Read::ZonedTimestamp => {
            let text = value.as_str().ok_or_else(|| form("a timestamp string"))?;
            let micros = crate::parse_timestamp_micros(text)
                .ok_or_else(|| form("an ISO 8601 timestamp with an offset"))?;
            buffer.push_i64(micros);
        }
        Read::Uuid => {
            let text = value.as_str().ok_or_else(|| form("a UUID string"))?;
            buffer.push_uuid(parse_uuid(text).ok_or_else(|| form("a UUID"))?);
        }
        Read::List(items) => {
            let elements = value.as_array().ok_or_else(|| form("an array"))?;
            // Checked before any element is written: the value is then
            // one unsent value, nothing of it in the buffer.
            if elements.iter().any(|e| e.as_str() == Some(UNAVAILABLE)) {
                return Err(Bad::Unavailable);
            }
            let element = buffer.list_element();
            for e in elements {
                push(items, e, element)?;
            }
            buffer.close_row().map_err(|_| Bad::Full)?;
        }
    }
    Ok(())
}

/// `v` units of `1 / per_second` s in microseconds; `None` when that
/// would drop a fraction of a microsecond or overflow.
fn micros(v: i64, per_second: i64) -> Option<i64> {
    if per_second <= 1_000_000 {
        v.checked_mul(1_000_000 / per_second)
    } else {
        let per_micro = per_second / 1_000_000;
        (v % per_micro == 0).then_some(v / per_micro)
    }
}

fn base64_of(value: &Value) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str()?)
        .ok()
}

/// A big-endian two's complement integer of at most 16 bytes.
fn unscaled(bytes: &[u8]) -> Option<i128> {
    if bytes.len() > 16 {
        return None;
    }
    let fill = if bytes.first().is_some_and(|b| b & 0x80 != 0) {
        0xff
    } else {
        0
    };
    let mut full = [fill; 16];
    full[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(full))
}

/// `{"scale": s, "value": base64}` as decimal text, e.g. `-12.340`.
fn variable_decimal(value: &Value) -> Option<String> {
    let scale = usize::try_from(value.get("scale")?.as_u64()?).ok()?;
    let unscaled = unscaled(&base64_of(value.get("value")?)?)?;
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale == 0 {
        return Some(format!("{sign}{digits}"));
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    Some(format!("{sign}{whole}.{fraction}"))
}

/// The value for an error message, cut to 40 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unscaled_reads_big_endian_twos_complement() {
        assert_eq!(unscaled(&[0x01, 0xe2, 0x40]), Some(123_456));
        assert_eq!(unscaled(&[0xfe, 0x1d, 0xc0]), Some(-123_456));
        assert_eq!(unscaled(&[]), Some(0));
        assert_eq!(unscaled(&[0; 17]), None);
    }

    #[test]
    fn variable_decimal_keeps_every_digit_and_the_scale() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let v = |scale: u64, bytes: &[u8]| serde_json::json!({"scale": scale, "value": b64(bytes)});
        assert_eq!(variable_decimal(&v(3, &[0x30, 0x39])).unwrap(), "12.345");
        assert_eq!(variable_decimal(&v(5, &[0x30, 0x39])).unwrap(), "0.12345");
        assert_eq!(variable_decimal(&v(2, &[0xff, 0x85])).unwrap(), "-1.23");
        assert_eq!(variable_decimal(&v(0, &[0x07])).unwrap(), "7");
    }

    #[test]
    fn nanoseconds_must_be_whole_microseconds() {
        assert_eq!(micros(1_500, 1_000), Some(1_500_000));
        assert_eq!(micros(7, 1_000_000), Some(7));
        assert_eq!(micros(7_000, 1_000_000_000), Some(7));
        assert_eq!(micros(7_001, 1_000_000_000), None);
        assert_eq!(micros(i64::MAX, 1_000), None);
    }
}

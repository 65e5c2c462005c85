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
/// (base64), as Debezium sends it for a `bytea` column (and in a
/// `bytea[]`).
pub(crate) const UNAVAILABLE_BASE64: &str = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";

/// The placeholder in a `uuid[]`: the name-based UUID of its bytes.
const UNAVAILABLE_UUID: &str = "b68a35a7-17ad-35b3-af2a-ae46edb4545a";

/// The start of the placeholder in an `int[]` or `bigint[]`: its bytes as
/// numbers.
const UNAVAILABLE_NUMBERS: &str = "95,95,100,101,98,101,122,105,117,109,95";

/// Whether `value` is Debezium's placeholder for an unsent value in the
/// form it takes for a column read as `read` (PostgreSQL's connector: the
/// text; base64 bytes; a list of the text, of the base64 bytes, of the
/// UUID or of the bytes as numbers; an `hstore` of the text to itself).
fn is_unsent(read: &Read, value: &Value) -> bool {
    match (read, value) {
        (Read::String, Value::String(s)) => s == UNAVAILABLE,
        (Read::Binary, Value::String(s)) => s == UNAVAILABLE_BASE64,
        (Read::JsonText, Value::Object(map)) => is_unsent_hstore(map),
        (Read::List(_), Value::Array(items)) => is_unsent_list(items),
        _ => false,
    }
}

/// A list in one of the placeholder's forms.
fn is_unsent_list(items: &[Value]) -> bool {
    match items {
        [Value::String(s)] => s == UNAVAILABLE || s == UNAVAILABLE_BASE64 || s == UNAVAILABLE_UUID,
        numbers => {
            numbers.len() == UNAVAILABLE.len()
                && numbers
                    .iter()
                    .zip(UNAVAILABLE.bytes())
                    .all(|(n, b)| n.as_i64() == Some(i64::from(b)))
        }
    }
}

fn is_unsent_hstore(map: &serde_json::Map<String, Value>) -> bool {
    map.len() == 1 && map.get(UNAVAILABLE).and_then(Value::as_str) == Some(UNAVAILABLE)
}

/// Whether a value read without its schema is the placeholder in any of
/// its forms (the column's type is not known, so a text equal to the
/// base64 form counts too).
fn is_unsent_untyped(value: &Value) -> bool {
    match value {
        Value::String(s) => s == UNAVAILABLE || s == UNAVAILABLE_BASE64,
        Value::Array(items) => is_unsent_list(items),
        Value::Object(map) => is_unsent_hstore(map),
        _ => false,
    }
}

/// Finds any form of the placeholder in a message's bytes, in one pass.
fn placeholder_finder() -> &'static aho_corasick::AhoCorasick {
    static FINDER: std::sync::OnceLock<aho_corasick::AhoCorasick> = std::sync::OnceLock::new();
    FINDER.get_or_init(|| {
        let base64 = &UNAVAILABLE_BASE64[..UNAVAILABLE_BASE64.len() - 2];
        aho_corasick::AhoCorasick::new([UNAVAILABLE, base64, UNAVAILABLE_UUID, UNAVAILABLE_NUMBERS])
            .expect("fixed patterns")
    })
}

/// The fields of a row object read without its schema whose value is the
/// placeholder (see [`is_unsent_untyped`]), and the object with those
/// values null; `None` when it has none (the bytes are searched first:
/// most rows have none).
pub(crate) fn without_unsent(json: &str) -> Option<(String, Vec<String>)> {
    placeholder_finder().find(json)?;
    let mut object: serde_json::Map<String, Value> = serde_json::from_str(json).ok()?;
    let mut names = Vec::new();
    for (name, value) in object.iter_mut() {
        if is_unsent_untyped(value) {
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
    if is_unsent(read, value) {
        return Err(Bad::Unavailable);
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
            buffer.push_str(text).map_err(|_| Bad::Full)?;
        }
        Read::JsonText => buffer.push_str(&value.to_string()).map_err(|_| Bad::Full)?,
        Read::Binary => {
            let bytes = base64_of(value).ok_or_else(|| form("base64 bytes"))?;
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
    fn every_form_of_the_placeholder_is_found_and_nothing_else() {
        let numbers: Vec<u8> = UNAVAILABLE.bytes().collect();
        let row = serde_json::json!({
            "id": 1, "text": UNAVAILABLE, "bytes": UNAVAILABLE_BASE64,
            "texts": [UNAVAILABLE], "blobs": [UNAVAILABLE_BASE64], "uuids": [UNAVAILABLE_UUID],
            "ints": numbers, "hstore": {UNAVAILABLE: UNAVAILABLE},
            "short": &numbers[..5], "pair": [UNAVAILABLE, "x"], "other": {UNAVAILABLE: "x"},
            "plain": "__debezium", "list": ["x"]
        });
        let (json, mut names) = without_unsent(&row.to_string()).unwrap();
        names.sort();
        assert_eq!(
            names,
            ["blobs", "bytes", "hstore", "ints", "text", "texts", "uuids"]
        );
        let kept: Value = serde_json::from_str(&json).unwrap();
        for name in &names {
            assert!(kept[name].is_null(), "{name}");
        }
        for name in ["short", "pair", "other", "plain", "list", "id"] {
            assert_eq!(kept[name], row[name], "{name}");
        }
        assert!(without_unsent(r#"{"id":1,"text":"x"}"#).is_none());
        // With the schema, each form counts for its own type only.
        let list = Read::List(Box::new(Read::Long));
        assert!(is_unsent(&list, &row["ints"]) && is_unsent(&list, &row["uuids"]));
        assert!(is_unsent(&Read::Binary, &row["bytes"]));
        assert!(!is_unsent(&Read::String, &row["bytes"]));
        assert!(is_unsent(&Read::JsonText, &row["hstore"]));
        assert!(!is_unsent(&Read::JsonText, &row["other"]));
    }

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

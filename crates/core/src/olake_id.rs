//! `_olake_id`: a stable identifier for each row.
//!
//! Both functions hash a byte encoding with XXH3-128 (seed 0, default secret)
//! and write the hash as 32 lowercase hex digits in canonical (big-endian)
//! order, the same digits `XXH128_canonicalFromHash` and Python's
//! `xxhash.xxh3_128_hexdigest` give. The encodings below are part of the
//! table format: rows written years apart must agree, so they never change.
//!
//! Append mode, [`append_olake_id`]:
//!
//! ```text
//! 0x41 ('A') | topic length, u32 big-endian | topic, UTF-8
//!            | partition, i32 big-endian | offset, i64 big-endian
//! ```
//!
//! Upsert mode, [`upsert_olake_id`], the dedup key's values as stored in
//! their columns (so the id can be recomputed from the table alone; for
//! `_kafka_key` that is its base64 text), in key-column order:
//!
//! ```text
//! 0x4B ('K') | for each value, a tag byte and its bytes:
//!   null          0x00
//!   int, long     0x01 | i64 big-endian (an int is widened first, so an
//!                        int -> long promotion keeps every id)
//!   double        0x02 | IEEE 754 bits, u64 big-endian; -0.0 as 0.0 and
//!                        every NaN as 0x7ff8000000000000
//!   boolean       0x03 | 0x00 or 0x01
//!   string, json  0x04 | length in bytes, u32 big-endian | UTF-8 bytes
//!   timestamptz   0x05 | microseconds since the epoch, i64 big-endian
//!   decimal       0x06 | scale, u8 | unscaled value, i128 big-endian (a
//!                        precision widening keeps every id)
//!   date          0x07 | days since 1970-01-01, i64 big-endian
//!   time          0x08 | microseconds since midnight, i64 big-endian
//!   timestamp     0x09 | microseconds since the epoch, i64 big-endian
//!   uuid, binary  0x0A | length in bytes, u32 big-endian | the bytes
//! ```

use xxhash_rust::xxh3::xxh3_128;

/// One value of a dedup key, as stored in its column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeyValue<'a> {
    /// A null value.
    Null,
    /// An `int` value (hashed as a `long`).
    Int(i32),
    /// A `long` value.
    Long(i64),
    /// A `double` value.
    Double(f64),
    /// A `boolean` value.
    Boolean(bool),
    /// A `string` or `json` value (for `_kafka_key`, its base64 text).
    String(&'a str),
    /// A `timestamptz` value in microseconds since the epoch.
    TimestampMicros(i64),
    /// A `decimal` value: unscaled value and scale.
    Decimal(i128, u8),
    /// A `date` value in days since 1970-01-01.
    Date(i32),
    /// A `time` value in microseconds since midnight.
    Time(i64),
    /// A `timestamp` (no zone) value in microseconds since the epoch.
    Timestamp(i64),
    /// A `uuid` or `binary` value.
    Bytes(&'a [u8]),
}

/// `_olake_id` of a row in append mode: identifies the message.
pub fn append_olake_id(topic: &str, partition: i32, offset: i64) -> String {
    let mut bytes = Vec::with_capacity(17 + topic.len());
    encode_append(&mut bytes, topic, partition, offset);
    hex_string(xxh3_128(&bytes))
}

/// `_olake_id` of a row in upsert mode: identifies the dedup key's values.
pub fn upsert_olake_id(values: &[KeyValue<'_>]) -> String {
    let mut bytes = Vec::with_capacity(64);
    encode_key(&mut bytes, values);
    hex_string(xxh3_128(&bytes))
}

/// Writes the append-mode encoding into `out` (cleared first).
pub(crate) fn encode_append(out: &mut Vec<u8>, topic: &str, partition: i32, offset: i64) {
    out.clear();
    out.push(b'A');
    // Kafka topic names are at most 249 bytes; anything longer still hashes
    // unambiguously with its real length.
    out.extend_from_slice(&(topic.len() as u32).to_be_bytes());
    out.extend_from_slice(topic.as_bytes());
    out.extend_from_slice(&partition.to_be_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
}

/// Writes the upsert-mode encoding into `out` (cleared first).
pub(crate) fn encode_key(out: &mut Vec<u8>, values: &[KeyValue<'_>]) {
    out.clear();
    out.push(b'K');
    for value in values {
        encode_key_value(out, value);
    }
}

/// Appends one key value's tag and bytes.
pub(crate) fn encode_key_value(out: &mut Vec<u8>, value: &KeyValue<'_>) {
    match *value {
        KeyValue::Null => out.push(0x00),
        KeyValue::Int(v) => {
            out.push(0x01);
            out.extend_from_slice(&i64::from(v).to_be_bytes());
        }
        KeyValue::Long(v) => {
            out.push(0x01);
            out.extend_from_slice(&v.to_be_bytes());
        }
        KeyValue::Double(v) => {
            let bits: u64 = if v.is_nan() {
                0x7ff8_0000_0000_0000
            } else if v == 0.0 {
                0
            } else {
                v.to_bits()
            };
            out.push(0x02);
            out.extend_from_slice(&bits.to_be_bytes());
        }
        KeyValue::Boolean(v) => out.extend_from_slice(&[0x03, u8::from(v)]),
        KeyValue::String(s) => {
            out.push(0x04);
            out.extend_from_slice(&(s.len() as u32).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        KeyValue::TimestampMicros(v) => {
            out.push(0x05);
            out.extend_from_slice(&v.to_be_bytes());
        }
        KeyValue::Decimal(v, scale) => {
            out.extend_from_slice(&[0x06, scale]);
            out.extend_from_slice(&v.to_be_bytes());
        }
        KeyValue::Date(v) => {
            out.push(0x07);
            out.extend_from_slice(&i64::from(v).to_be_bytes());
        }
        KeyValue::Time(v) => {
            out.push(0x08);
            out.extend_from_slice(&v.to_be_bytes());
        }
        KeyValue::Timestamp(v) => {
            out.push(0x09);
            out.extend_from_slice(&v.to_be_bytes());
        }
        KeyValue::Bytes(b) => {
            out.push(0x0A);
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// The XXH3-128 of `bytes` as 32 lowercase hex digits, without allocating.
pub(crate) fn hash_hex(bytes: &[u8]) -> [u8; 32] {
    olake_id_hex(&xxh3_128(bytes).to_be_bytes())
}

/// An `_olake_id`'s 16 bytes (the hash, big-endian) as its 32 lowercase
/// hex digits.
pub fn olake_id_hex(hash: &[u8; 16]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (pair, byte) in out.chunks_exact_mut(2).zip(hash) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(*byte)]);
    }
    out
}

/// An `_olake_id`'s 32 hex digits (either case) as its 16 bytes; `None`
/// for anything else.
pub fn olake_id_bytes(hex: &[u8]) -> Option<[u8; 16]> {
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (high, low) = (
            HEX_VALUES[usize::from(pair[0])],
            HEX_VALUES[usize::from(pair[1])],
        );
        if (high | low) > 0x0f {
            return None;
        }
        *byte = (high << 4) | low;
    }
    Some(out)
}

/// Each byte's value as a hex digit, or 0xff.
const HEX_VALUES: [u8; 256] = {
    let mut values = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        values[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        values[b'a' as usize + i] = 10 + i as u8;
        values[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    values
};

/// Each byte's two lowercase hex digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        pairs[i] = [DIGITS[i >> 4], DIGITS[i & 0x0f]];
        i += 1;
    }
    pairs
};

/// `_olake_id` of a row whose single dedup key is `_kafka_key`, from the
/// raw key bytes (hashed as their standard base64 text, the column value):
/// what a tombstone on such a stream deletes.
pub fn kafka_key_olake_id(key: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(key);
    upsert_olake_id(&[KeyValue::String(&text)])
}

fn hex_string(hash: u128) -> String {
    format!("{hash:032x}")
}

#[cfg(test)]
mod kafka_key_tests {
    use super::*;

    #[test]
    fn kafka_key_id_hashes_the_base64_text() {
        assert_eq!(
            kafka_key_olake_id(b"3"),
            upsert_olake_id(&[KeyValue::String("Mw==")])
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Fixed vectors, computed independently with Python's `xxhash` package
    // (the reference C implementation) over the documented encodings. These
    // digits are stored in users' tables: if one of these assertions fails,
    // the change broke every existing table.
    #[test]
    fn append_id_is_stable() {
        assert_eq!(
            append_olake_id("orders", 0, 0),
            "cf1bd8d256a1e463ca380f9f4aed1794"
        );
        assert_eq!(
            append_olake_id("orders", 2, 1234),
            "3f90d9d99d2d701856ca5888fc6b9169"
        );
    }

    #[test]
    fn upsert_id_is_stable() {
        assert_eq!(
            upsert_olake_id(&[KeyValue::Long(1)]),
            "b7558a21244999dab39e10a660f2264f"
        );
        assert_eq!(
            upsert_olake_id(&[KeyValue::String("Mw==")]),
            "38fb311ac7ed2092c0a89e4c546ae0f2"
        );
        assert_eq!(
            upsert_olake_id(&[KeyValue::Long(7), KeyValue::String("eu")]),
            "c1583542fd398fd8d78cc392dfce2109"
        );
    }

    #[test]
    fn encodings_are_as_documented() {
        let mut out = Vec::new();
        encode_append(&mut out, "ab", -1, 258);
        assert_eq!(
            out,
            [b'A', 0, 0, 0, 2, b'a', b'b', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 1, 2]
        );
        encode_key(
            &mut out,
            &[
                KeyValue::Null,
                KeyValue::Int(1),
                KeyValue::Boolean(true),
                KeyValue::String("é"),
            ],
        );
        assert_eq!(
            out,
            [b'K', 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 3, 1, 4, 0, 0, 0, 2, 0xc3, 0xa9]
        );
    }

    #[test]
    fn olake_id_bytes_and_hex_round_trip_and_refuse_anything_else() {
        let hex = b"000102030405060708090a0b0c0d0eff";
        let bytes = olake_id_bytes(hex).unwrap();
        assert_eq!(bytes[15], 0xff);
        assert_eq!(&olake_id_hex(&bytes), hex);
        assert_eq!(
            olake_id_bytes(b"000102030405060708090A0B0C0D0EFF"),
            Some(bytes)
        );
        for bad in [
            &b"xyz"[..],
            b"000102030405060708090a0b0c0d0eZZ",
            b"000102030405060708090a0b0c0d0e0 ",
        ] {
            assert_eq!(olake_id_bytes(bad), None, "{:?}", std::str::from_utf8(bad));
        }
        for n in [
            0u128,
            1,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        ] {
            let text = format!("{n:032x}");
            assert_eq!(olake_id_hex(&n.to_be_bytes()), text.as_bytes());
            assert_eq!(olake_id_bytes(text.as_bytes()), Some(n.to_be_bytes()));
        }
    }

    #[test]
    fn hex_matches_the_string_form() {
        let mut bytes = Vec::new();
        encode_append(&mut bytes, "t", 1, 2);
        assert_eq!(
            std::str::from_utf8(&hash_hex(&bytes)).unwrap(),
            append_olake_id("t", 1, 2)
        );
    }

    #[test]
    fn ids_separate_what_they_should() {
        assert_ne!(
            append_olake_id("orders", 0, 1),
            append_olake_id("orders", 1, 0)
        );
        assert_ne!(append_olake_id("a", 0, 1), append_olake_id("b", 0, 1));
        assert_eq!(
            upsert_olake_id(&[KeyValue::Int(5)]),
            upsert_olake_id(&[KeyValue::Long(5)])
        );
        assert_eq!(
            upsert_olake_id(&[KeyValue::Double(0.0)]),
            upsert_olake_id(&[KeyValue::Double(-0.0)])
        );
        assert_ne!(
            upsert_olake_id(&[KeyValue::String("1")]),
            upsert_olake_id(&[KeyValue::Long(1)])
        );
        // Lengths keep composite keys apart: ("ab", "c") vs ("a", "bc").
        assert_ne!(
            upsert_olake_id(&[KeyValue::String("ab"), KeyValue::String("c")]),
            upsert_olake_id(&[KeyValue::String("a"), KeyValue::String("bc")])
        );
    }
}

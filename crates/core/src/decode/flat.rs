//! The usual JSON message read without serde: one object of scalar values
//! whose fields are all columns.
//!
//! [`read`] walks the bytes once and appends each value straight into its
//! column, by the same type rules as the serde visitors in `seed.rs`. It
//! takes only what it is sure of: an object of known fields (no escapes in
//! their names), each value `null`, `true` / `false`, a number, or a string
//! (escapes other than surrogate pairs decoded), going into a column of a
//! scalar type that accepts it as it is. On anything else (a nested value,
//! a `json` column, an unknown or ignored field, a value its column
//! refuses, a number serde_json reads another way such as `-0` or an
//! integer beyond 64 bits, invalid UTF-8, a syntax error) it returns
//! `false` having changed nothing the caller cannot roll back, and the
//! serde path reads the message again: the same rows, or the error that
//! names the field. Floats are parsed by the standard library, correctly
//! rounded, as serde_json's `float_roundtrip` parses them.

use super::buffer::ColumnBuffer;
use super::seed::FieldIndex;
use crate::columns::ColumnType;
use crate::timestamp::parse_timestamp_micros_bytes;

/// Reads `value` as one flat object into a new row of `buffers` (the row
/// is not closed: nulls for absent columns and the metadata columns are
/// the caller's), marking each column it set with `fields.stamp`. `false`:
/// not read here (see the module docs); the caller truncates the columns
/// back and parses with serde.
pub(super) fn read(
    value: &[u8],
    buffers: &mut [ColumnBuffer],
    fields: &mut FieldIndex,
    scratch: &mut Vec<u8>,
) -> bool {
    let mut at = Cursor {
        bytes: value,
        pos: 0,
    };
    at.skip_whitespace();
    if !at.eat(b'{') {
        return false;
    }
    at.skip_whitespace();
    if at.eat(b'}') {
        return at.only_whitespace_left();
    }
    let stamp = fields.stamp;
    let mut position = 0;
    loop {
        at.skip_whitespace();
        if !at.eat(b'"') {
            return false;
        }
        let column = match at.hinted_name(fields, position) {
            Some(column) => column,
            None => {
                let Some(name) = at.plain_string() else {
                    return false;
                };
                let Some(column) = fields.lookup_bytes(position, name) else {
                    return false;
                };
                column
            }
        };
        at.skip_whitespace();
        if !at.eat(b':') {
            return false;
        }
        at.skip_whitespace();
        let buffer = &mut buffers[column];
        if fields.seen[column] == stamp {
            // A duplicate key: the last value wins.
            buffer.pop();
        } else {
            fields.seen[column] = stamp;
        }
        if !value_into(&mut at, buffer, scratch) {
            return false;
        }
        position += 1;
        at.skip_whitespace();
        match at.next() {
            Some(b',') => {}
            Some(b'}') => return at.only_whitespace_left(),
            _ => return false,
        }
    }
}

/// Whether `name` reads the same in a JSON message, quoted as it is.
pub(super) fn verbatim(name: &str) -> bool {
    name.bytes().all(|b| b != b'"' && b != b'\\' && b >= 0x20)
}

/// `a == b`, inlined for the short slices field names are.
#[inline(always)]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a8, mut b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let word = |w: &[u8]| u64::from_ne_bytes(w.try_into().expect("8 bytes"));
    for (x, y) in a8.by_ref().zip(b8.by_ref()) {
        if word(x) != word(y) {
            return false;
        }
    }
    a8.remainder()
        .iter()
        .zip(b8.remainder())
        .all(|(x, y)| x == y)
}

/// One value into `buffer`, or `false`.
fn value_into(at: &mut Cursor<'_>, buffer: &mut ColumnBuffer, scratch: &mut Vec<u8>) -> bool {
    match at.peek() {
        Some(b'n') => {
            let null = at.literal(b"null");
            if null {
                buffer.push_null();
            }
            null
        }
        Some(b't') => at.literal(b"true") && push_bool(buffer, true),
        Some(b'f') => at.literal(b"false") && push_bool(buffer, false),
        Some(b'"') => {
            at.pos += 1;
            match at.string(scratch) {
                Some(Text::Input(start, end)) => push_text(buffer, &at.bytes[start..end]),
                Some(Text::Scratch) => push_text(buffer, scratch),
                None => false,
            }
        }
        Some(b'-' | b'0'..=b'9') => match at.number() {
            Some(number) => push_number(buffer, number),
            None => false,
        },
        _ => false,
    }
}

fn push_bool(buffer: &mut ColumnBuffer, value: bool) -> bool {
    if buffer.ty != ColumnType::Boolean {
        return false;
    }
    buffer.push_bool(value);
    true
}

/// A string's UTF-8 bytes (checked) into a `string` or `timestamptz`
/// column.
fn push_text(buffer: &mut ColumnBuffer, text: &[u8]) -> bool {
    match buffer.ty {
        ColumnType::String => buffer.push_utf8(text).is_ok(),
        ColumnType::TimestampTz => match parse_timestamp_micros_bytes(text) {
            Some(micros) => {
                buffer.push_i64(micros);
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// A JSON number as serde_json hands it to a visitor.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Number {
    /// A non-negative integer (`visit_u64`).
    Unsigned(u64),
    /// A negative integer (`visit_i64`), never zero.
    Negative(i64),
    /// A number with a fraction or an exponent (`visit_f64`), finite.
    Float(f64),
}

/// The rules of `ValueSeed`'s `visit_u64`, `visit_i64` and `visit_f64`
/// for the values they accept; `false` for what they refuse.
fn push_number(buffer: &mut ColumnBuffer, number: Number) -> bool {
    let integer = match number {
        Number::Unsigned(v) => i64::try_from(v).ok(),
        Number::Negative(v) => Some(v),
        Number::Float(v) => {
            return match buffer.ty {
                ColumnType::Double => {
                    buffer.push_f64(v);
                    true
                }
                ColumnType::Float if v.abs() <= f64::from(f32::MAX) => {
                    buffer.push_f32(v as f32);
                    true
                }
                _ => false,
            }
        }
    };
    // An unsigned value beyond i64 fits no column but `double` / `float`:
    // rare enough to leave to serde.
    let Some(v) = integer else {
        return false;
    };
    match buffer.ty {
        ColumnType::Long => buffer.push_i64(v),
        ColumnType::Double if (v as f64) as i128 == i128::from(v) => buffer.push_f64(v as f64),
        ColumnType::Float => buffer.push_f32(v as f32),
        ColumnType::Int => match i32::try_from(v) {
            Ok(v) => buffer.push_i32(v),
            Err(_) => return false,
        },
        _ => return false,
    }
    true
}

/// Where a string's text is.
enum Text {
    /// `bytes[start..end]` of the message.
    Input(usize, usize),
    /// The scratch buffer (the string had escapes).
    Scratch,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    #[inline]
    fn eat(&mut self, expected: u8) -> bool {
        let hit = self.peek() == Some(expected);
        self.pos += usize::from(hit);
        hit
    }

    #[inline]
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    fn only_whitespace_left(&mut self) -> bool {
        self.skip_whitespace();
        self.pos == self.bytes.len()
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        let hit = self.bytes[self.pos..].starts_with(word);
        if hit {
            self.pos += word.len();
        }
        hit
    }

    /// The column the previous messages named at `position`, when this
    /// key (after its opening quote) is that column's name and its closing
    /// quote: no scan for the quote, no hash lookup.
    #[inline]
    fn hinted_name(&mut self, fields: &FieldIndex, position: usize) -> Option<usize> {
        let column = *fields.hint.get(position)?;
        let name = fields.names.get(column)?.as_bytes();
        let end = self.pos + name.len();
        if self.bytes.get(end) != Some(&b'"')
            || !fields.verbatim[column]
            || !same_bytes(&self.bytes[self.pos..end], name)
        {
            return None;
        }
        self.pos = end + 1;
        Some(column)
    }

    /// The rest of a string (after its opening quote) with no escapes, as
    /// checked UTF-8 bytes; `None` at an escape, a control character,
    /// invalid UTF-8 or the end of the input.
    #[inline]
    fn plain_string(&mut self) -> Option<&[u8]> {
        let start = self.pos;
        let (end, ascii) = self.scan_plain()?;
        if self.bytes[end] != b'"' {
            return None;
        }
        self.pos = end + 1;
        let text = &self.bytes[start..end];
        (ascii || std::str::from_utf8(text).is_ok()).then_some(text)
    }

    /// From `pos`, the index of the first `"`, `\` or control character,
    /// and whether every byte before it was ASCII; `None` at the input's
    /// end.
    #[inline]
    fn scan_plain(&self) -> Option<(usize, bool)> {
        let mut high = 0u8;
        for (i, &b) in self.bytes[self.pos..].iter().enumerate() {
            if b == b'"' || b == b'\\' || b < 0x20 {
                return Some((self.pos + i, high < 0x80));
            }
            high |= b;
        }
        None
    }

    /// The rest of a string after its opening quote, its escapes decoded
    /// into `scratch` when it has any; `None` where serde_json would fail
    /// or where this reader leaves it to serde (a `\u` surrogate).
    fn string(&mut self, scratch: &mut Vec<u8>) -> Option<Text> {
        let start = self.pos;
        let (end, ascii) = self.scan_plain()?;
        if self.bytes[end] == b'"' {
            self.pos = end + 1;
            let text = &self.bytes[start..end];
            return (ascii || std::str::from_utf8(text).is_ok()).then_some(Text::Input(start, end));
        }
        scratch.clear();
        scratch.extend_from_slice(&self.bytes[start..end]);
        self.pos = end;
        loop {
            match self.next()? {
                b'"' => break,
                b'\\' => self.escape(scratch)?,
                b if b < 0x20 => return None,
                b => scratch.push(b),
            }
        }
        std::str::from_utf8(scratch)
            .is_ok()
            .then_some(Text::Scratch)
    }

    /// One escape after its backslash, decoded into `scratch`.
    fn escape(&mut self, scratch: &mut Vec<u8>) -> Option<()> {
        let decoded = match self.next()? {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let hex = self.bytes.get(self.pos..self.pos + 4)?;
                let mut code = 0u32;
                for &h in hex {
                    code = code * 16 + char::from(h).to_digit(16)?;
                }
                self.pos += 4;
                // Surrogates (pairs or lone) are serde's to judge.
                let c = char::from_u32(code)?;
                let mut utf8 = [0u8; 4];
                scratch.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                return Some(());
            }
            _ => return None,
        };
        scratch.push(decoded);
        Some(())
    }

    /// A JSON number at `pos`, as serde_json would hand it to a visitor;
    /// `None` for invalid syntax and for what this reader leaves to serde
    /// (`-0`, integers beyond 64 bits, numbers beyond f64's range).
    fn number(&mut self) -> Option<Number> {
        let start = self.pos;
        let negative = self.eat(b'-');
        let digits_start = self.pos;
        // Every digit, integer part and fraction, while they fit.
        let mut mantissa = 0u64;
        let mut overflow = false;
        let int_digits = self.mantissa_digits(&mut mantissa, &mut overflow);
        if int_digits == 0 || (int_digits > 1 && self.bytes[digits_start] == b'0') {
            return None;
        }
        let mut float = false;
        let mut exponent = 0i64;
        if self.eat(b'.') {
            float = true;
            let fraction_digits = self.mantissa_digits(&mut mantissa, &mut overflow);
            if fraction_digits == 0 {
                return None;
            }
            exponent = -(fraction_digits as i64);
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            float = true;
            self.pos += 1;
            let sign = match self.peek() {
                Some(b'-') => -1,
                Some(b'+') => 1,
                _ => 0,
            };
            self.pos += usize::from(sign != 0);
            let digits = self.pos;
            let mut written = 0i64;
            while let Some(d @ b'0'..=b'9') = self.peek() {
                written = (written * 10 + i64::from(d - b'0')).min(1 << 20);
                self.pos += 1;
            }
            if self.pos == digits {
                return None;
            }
            exponent += if sign < 0 { -written } else { written };
        }
        if float {
            return self.float(start, negative, mantissa, overflow, exponent);
        }
        if overflow {
            return None;
        }
        if !negative {
            return Some(Number::Unsigned(mantissa));
        }
        // `-0` is a float to serde_json (-0.0); i64::MIN is left to it too.
        match i64::try_from(mantissa) {
            Ok(v) if v != 0 => Some(Number::Negative(-v)),
            _ => None,
        }
    }

    /// Digits at `pos` appended to `mantissa` (`overflow` once it cannot
    /// hold them); how many.
    #[inline]
    fn mantissa_digits(&mut self, mantissa: &mut u64, overflow: &mut bool) -> usize {
        let start = self.pos;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            match mantissa
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(d - b'0')))
            {
                Some(v) => *mantissa = v,
                None => *overflow = true,
            }
            self.pos += 1;
        }
        self.pos - start
    }

    /// `mantissa * 10^exponent`, correctly rounded. A mantissa of at most
    /// 2^53 and a power of ten of at most 10^22 are both exact doubles, so
    /// one multiplication or division rounds correctly (Clinger's fast
    /// path); anything else is parsed from the text by the standard
    /// library, also correctly rounded.
    fn float(
        &self,
        start: usize,
        negative: bool,
        mantissa: u64,
        overflow: bool,
        exponent: i64,
    ) -> Option<Number> {
        const POW10: [f64; 23] = [
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
            1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
        ];
        if !overflow && mantissa <= 1 << 53 && (-22..=22).contains(&exponent) {
            let m = mantissa as f64;
            let v = match usize::try_from(exponent) {
                Ok(e) => m * POW10[e],
                Err(_) => m / POW10[exponent.unsigned_abs() as usize],
            };
            return Some(Number::Float(if negative { -v } else { v }));
        }
        let text = std::str::from_utf8(&self.bytes[start..self.pos]).ok()?;
        let v: f64 = text.parse().ok()?;
        v.is_finite().then_some(Number::Float(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn number(text: &str) -> Option<Number> {
        let mut at = Cursor {
            bytes: text.as_bytes(),
            pos: 0,
        };
        let n = at.number()?;
        (at.pos == text.len()).then_some(n)
    }

    #[test]
    fn numbers_are_read_as_serde_json_hands_them_to_visitors() {
        assert_eq!(number("0"), Some(Number::Unsigned(0)));
        assert_eq!(
            number("18446744073709551615"),
            Some(Number::Unsigned(u64::MAX))
        );
        assert_eq!(number("-1"), Some(Number::Negative(-1)));
        assert_eq!(
            number("-9223372036854775807"),
            Some(Number::Negative(-i64::MAX))
        );
        assert_eq!(number("1.5e3"), Some(Number::Float(1500.0)));
        assert_eq!(number("-0.0"), Some(Number::Float(-0.0)));
        assert_eq!(number("1E2"), Some(Number::Float(100.0)));
        assert_eq!(number("4.9e-324"), Some(Number::Float(4.9e-324)));
        // Left to serde: its own readings, and its errors.
        for text in [
            "-0",
            "-9223372036854775808",
            "18446744073709551616",
            "1e309",
            "01",
            "1.",
            "-",
            "1e",
            "1e+",
        ] {
            assert_eq!(number(text), None, "{text}");
        }
    }

    #[test]
    fn every_float_agrees_with_serde_json_float_roundtrip() {
        let texts = [
            "0.1",
            "2.2250738585072011e-308",
            "1.7976931348623157e308",
            "9007199254740993.0",
            "123456789012345678901234567890.5",
            "0.30000000000000004",
            "5e-324",
            "1e-400",
            "7.2057594037927933e16",
            "25.85",
            "-24.77",
            "9007199254740992.5",
            "9007199254740993e-22",
            "1e22",
            "1e23",
            "123.456e-20",
            "0.000000000000000000000001",
            "3.14159265358979323846",
            "1E+2",
            "-1e-0",
        ];
        for text in texts {
            let serde: f64 = serde_json::from_str(text).unwrap();
            match number(text) {
                Some(Number::Float(v)) => assert_eq!(v.to_bits(), serde.to_bits(), "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    /// Decimal text: digits, a point somewhere in them (or none), an
    /// exponent (or none), a sign (or none).
    fn decimal() -> impl Strategy<Value = String> {
        (
            any::<bool>(),
            "[1-9][0-9]{0,20}",
            0usize..22,
            prop::option::of(-330i32..330),
        )
            .prop_map(|(negative, digits, point, exponent)| {
                let mut text = String::new();
                if negative {
                    text.push('-');
                }
                let point = point.min(digits.len());
                if point == 0 {
                    text.push_str(&digits);
                    text.push_str(".0");
                } else {
                    text.push_str(&digits[..point]);
                    text.push('.');
                    text.push_str(&digits[point..]);
                    if point == digits.len() {
                        text.push('0');
                    }
                }
                if let Some(e) = exponent {
                    text.push_str(&format!("e{e}"));
                }
                text
            })
    }

    proptest! {
        #[test]
        fn floats_agree_with_serde_json_float_roundtrip(text in decimal()) {
            let serde: Result<f64, _> = serde_json::from_str(&text);
            match (number(&text), serde) {
                (Some(Number::Float(v)), Ok(s)) => prop_assert_eq!(v.to_bits(), s.to_bits(), "{}", text),
                // Beyond f64: serde's error, given back to it.
                (None, Err(_)) => {}
                (ours, theirs) => prop_assert!(false, "{}: {:?} vs {:?}", text, ours, theirs),
            }
        }

        #[test]
        fn shortest_float_texts_read_back_exactly(v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
            for text in [format!("{v:?}"), format!("{v:e}")] {
                let text = if text.contains(['.', 'e']) { text } else { format!("{text}.0") };
                let serde: f64 = serde_json::from_str(&text).unwrap();
                match number(&text) {
                    Some(Number::Float(ours)) => prop_assert_eq!(ours.to_bits(), serde.to_bits(), "{}", text),
                    other => prop_assert!(false, "{}: {:?}", text, other),
                }
            }
        }
    }
}

//! Avro binary encoding (specification 1.12, "Binary Encoding") read
//! straight into column buffers by a compiled [`Op`] tree: no value tree,
//! strings and bytes copied once, from the message into the column.

use super::plan::{FieldOp, Op};
use crate::decode::buffer::ColumnBuffer;

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// The body ended inside a value.
    Truncated,
    /// A varint longer than 10 bytes.
    Varint,
    /// A negative length or block count that is not allowed.
    Length(i64),
    /// A union branch index out of range.
    Union(i64),
    /// An enum symbol index out of range.
    Enum(i64),
    /// A string that is not UTF-8.
    Utf8,
    /// A boolean byte other than 0 or 1.
    Boolean(u8),
    /// A decimal with more digits than its precision, or more than 16 bytes.
    Decimal,
    /// A `uuid` string that is not a UUID.
    Uuid,
    /// A batch column would pass 2 GiB.
    Full,
    /// Bytes left after the value.
    Trailing(usize),
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bad::Truncated => f.write_str("the body ends inside a value (truncated)"),
            Bad::Varint => f.write_str("a variable-length integer runs past 10 bytes"),
            Bad::Length(n) => write!(f, "invalid length {n}"),
            Bad::Union(i) => write!(f, "union branch {i} does not exist"),
            Bad::Enum(i) => write!(f, "enum symbol {i} does not exist"),
            Bad::Utf8 => f.write_str("a string is not UTF-8"),
            Bad::Boolean(b) => write!(f, "boolean byte {b}"),
            Bad::Decimal => f.write_str("a decimal has more digits than its precision"),
            Bad::Uuid => f.write_str("a uuid string is not a UUID"),
            Bad::Full => f.write_str("the batch column is full"),
            Bad::Trailing(n) => write!(f, "{n} bytes left after the value"),
        }
    }
}

/// A read position in one message body.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    #[inline]
    pub fn long(&mut self) -> Result<i64, Bad> {
        let mut value: u64 = 0;
        for shift in (0..70).step_by(7) {
            let byte = *self.bytes.get(self.pos).ok_or(Bad::Truncated)?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err(Bad::Varint)
    }

    #[inline]
    pub(crate) fn int(&mut self) -> Result<i32, Bad> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| Bad::Varint)
    }

    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        let end = self.pos.checked_add(n).ok_or(Bad::Truncated)?;
        let out = self.bytes.get(self.pos..end).ok_or(Bad::Truncated)?;
        self.pos = end;
        Ok(out)
    }

    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], Bad> {
        let n = self.long()?;
        let n = usize::try_from(n).map_err(|_| Bad::Length(n))?;
        self.take(n)
    }

    #[inline]
    pub(crate) fn str(&mut self) -> Result<&'a str, Bad> {
        std::str::from_utf8(self.bytes()?).map_err(|_| Bad::Utf8)
    }

    #[inline]
    pub(crate) fn float(&mut self) -> Result<f32, Bad> {
        Ok(f32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    #[inline]
    pub(crate) fn double(&mut self) -> Result<f64, Bad> {
        Ok(f64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// The item count of the next array or map block (a negative count is
    /// followed by the block's size in bytes, which is skipped over).
    pub(crate) fn block(&mut self) -> Result<usize, Bad> {
        let n = self.long()?;
        if n < 0 {
            self.long()?;
        }
        let n = n.checked_abs().ok_or(Bad::Length(n))?;
        usize::try_from(n).map_err(|_| Bad::Length(n))
    }
}

/// Reads a record's fields into `buffers` (one per field op that has a
/// target); nulls go into `absent`. On error the field index is returned
/// with the reason, and the buffers hold a partial row (the caller
/// truncates).
pub fn read_fields(
    fields: &[FieldOp],
    absent: &[usize],
    cursor: &mut Cursor<'_>,
    buffers: &mut [ColumnBuffer],
) -> Result<(), (usize, Bad)> {
    for (i, field) in fields.iter().enumerate() {
        let result = match field.target {
            Some(t) => read(&field.op, cursor, &mut buffers[t]),
            None => skip(&field.op, cursor),
        };
        result.map_err(|e| (i, e))?;
    }
    for &a in absent {
        buffers[a].push_null();
    }
    Ok(())
}

/// Reads one value of `op` into `out`.
fn read(op: &Op, c: &mut Cursor<'_>, out: &mut ColumnBuffer) -> Result<(), Bad> {
    match op {
        Op::Null => out.push_null(),
        Op::Boolean => match c.take(1)?[0] {
            b @ (0 | 1) => out.push_bool(b == 1),
            b => return Err(Bad::Boolean(b)),
        },
        Op::Int => out.push_i32(c.int()?),
        Op::IntToLong => out.push_i64(i64::from(c.int()?)),
        Op::Long => out.push_i64(c.long()?),
        Op::Float => out.push_f32(c.float()?),
        Op::FloatToDouble => out.push_f64(f64::from(c.float()?)),
        Op::Double => out.push_f64(c.double()?),
        Op::String => out.push_str(c.str()?).map_err(|_| Bad::Full)?,
        Op::Bytes => out.push_bytes(c.bytes()?),
        Op::Fixed(n) => out.push_bytes(c.take(*n)?),
        Op::Enum(symbols) => {
            let i = c.long()?;
            let symbol = usize::try_from(i)
                .ok()
                .and_then(|i| symbols.get(i))
                .ok_or(Bad::Enum(i))?;
            out.push_str(symbol).map_err(|_| Bad::Full)?
        }
        Op::Decimal { fixed, precision } => {
            let bytes = match fixed {
                Some(n) => c.take(*n)?,
                None => c.bytes()?,
            };
            out.push_i128(decimal(bytes, *precision)?)
        }
        Op::UuidText => out.push_uuid(parse_uuid(c.str()?).ok_or(Bad::Uuid)?),
        Op::UuidFixed => out.push_uuid(c.take(16)?.try_into().expect("16 bytes")),
        Op::Date => out.push_i32(c.int()?),
        Op::TimeMillis => out.push_i64(i64::from(c.int()?) * 1000),
        Op::Micros => out.push_i64(c.long()?),
        Op::Millis => out.push_i64(c.long()?.checked_mul(1000).ok_or(Bad::Varint)?),
        Op::Optional { null_index, inner } => {
            let i = c.long()?;
            match i {
                0 | 1 if i == *null_index => out.push_null(),
                0 | 1 => read(inner, c, out)?,
                _ => return Err(Bad::Union(i)),
            }
        }
        Op::Union(branches) => read_union(branches, c, out)?,
        Op::Record { fields, absent } => {
            read_fields(fields, absent, c, out.struct_fields()).map_err(|(_, e)| e)?;
            out.close_row().map_err(|_| Bad::Full)?
        }
        Op::Array(items) => {
            let element = out.list_element();
            loop {
                let n = c.block()?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    read(items, c, element)?;
                }
            }
            out.close_row().map_err(|_| Bad::Full)?
        }
        Op::Map(values) => {
            let (keys, vals) = out.map_entries();
            loop {
                let n = c.block()?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    keys.push_str(c.str()?).map_err(|_| Bad::Full)?;
                    read(values, c, vals)?;
                }
            }
            out.close_row().map_err(|_| Bad::Full)?
        }
    }
    Ok(())
}

/// A union of several non-null types, into `struct<tag, field0, ...>`:
/// `branches[i]` is `None` for the null branch, else the struct child it
/// fills (the tag is child 0) and how.
fn read_union(
    branches: &[Option<(usize, Op)>],
    c: &mut Cursor<'_>,
    out: &mut ColumnBuffer,
) -> Result<(), Bad> {
    let i = c.long()?;
    let branch = usize::try_from(i)
        .ok()
        .and_then(|i| branches.get(i))
        .ok_or(Bad::Union(i))?;
    let Some((child, op)) = branch else {
        out.push_null();
        return Ok(());
    };
    let children = out.struct_fields();
    for (k, buffer) in children.iter_mut().enumerate() {
        if k == 0 {
            buffer.push_i32(*child as i32 - 1);
        } else if k == *child {
            read(op, c, buffer)?;
        } else {
            buffer.push_null();
        }
    }
    out.close_row().map_err(|_| Bad::Full)
}

/// Reads past one value of `op`.
fn skip(op: &Op, c: &mut Cursor<'_>) -> Result<(), Bad> {
    match op {
        Op::Null => {}
        Op::Boolean => {
            c.take(1)?;
        }
        Op::Int
        | Op::IntToLong
        | Op::Long
        | Op::Enum(_)
        | Op::Date
        | Op::TimeMillis
        | Op::Micros
        | Op::Millis => {
            c.long()?;
        }
        Op::Float | Op::FloatToDouble => {
            c.take(4)?;
        }
        Op::Double => {
            c.take(8)?;
        }
        Op::String | Op::Bytes | Op::UuidText | Op::Decimal { fixed: None, .. } => {
            c.bytes()?;
        }
        Op::Fixed(n) | Op::Decimal { fixed: Some(n), .. } => {
            c.take(*n)?;
        }
        Op::UuidFixed => {
            c.take(16)?;
        }
        Op::Optional { null_index, inner } => {
            let i = c.long()?;
            match i {
                0 | 1 if i == *null_index => {}
                0 | 1 => skip(inner, c)?,
                _ => return Err(Bad::Union(i)),
            }
        }
        Op::Union(branches) => {
            let i = c.long()?;
            match usize::try_from(i).ok().and_then(|i| branches.get(i)) {
                None => return Err(Bad::Union(i)),
                Some(None) => {}
                Some(Some((_, op))) => skip(op, c)?,
            }
        }
        Op::Record { fields, .. } => {
            for f in fields {
                skip(&f.op, c)?;
            }
        }
        Op::Array(items) => loop {
            let n = c.block()?;
            if n == 0 {
                break;
            }
            for _ in 0..n {
                skip(items, c)?;
            }
        },
        Op::Map(values) => loop {
            let n = c.block()?;
            if n == 0 {
                break;
            }
            for _ in 0..n {
                c.bytes()?;
                skip(values, c)?;
            }
        },
    }
    Ok(())
}

/// A big-endian two's-complement unscaled decimal, checked against its
/// precision.
fn decimal(bytes: &[u8], precision: u8) -> Result<i128, Bad> {
    if bytes.is_empty() {
        return Ok(0);
    }
    if bytes.len() > 16 {
        // Leading sign bytes may pad a value that still fits.
        let (pad, rest) = bytes.split_at(bytes.len() - 16);
        let sign = if rest[0] & 0x80 != 0 { 0xff } else { 0 };
        if pad.iter().any(|b| *b != sign) {
            return Err(Bad::Decimal);
        }
        return decimal(rest, precision);
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut full = [fill; 16];
    full[16 - bytes.len()..].copy_from_slice(bytes);
    let v = i128::from_be_bytes(full);
    if v.unsigned_abs() >= 10u128.pow(u32::from(precision)) {
        return Err(Bad::Decimal);
    }
    Ok(v)
}

/// The 16 bytes of a hyphenated (or plain) hex UUID.
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    let mut digits = text.bytes().filter(|b| *b != b'-');
    if text.len() != 36 && text.len() != 32 {
        return None;
    }
    for byte in &mut out {
        let hi = (digits.next()? as char).to_digit(16)?;
        let lo = (digits.next()? as char).to_digit(16)?;
        *byte = (hi * 16 + lo) as u8;
    }
    digits.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zigzag(v: i64) -> Vec<u8> {
        let mut n = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            if n < 0x80 {
                out.push(n as u8);
                return out;
            }
            out.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
    }

    #[test]
    fn varints_decode_zigzag_and_refuse_overlong() {
        for v in [0, -1, 1, 63, -64, 64, i64::MAX, i64::MIN, 1 << 40] {
            assert_eq!(Cursor::new(&zigzag(v)).long(), Ok(v), "{v}");
        }
        assert_eq!(Cursor::new(&[0x80; 11]).long(), Err(Bad::Varint));
        assert_eq!(Cursor::new(&[0x80]).long(), Err(Bad::Truncated));
    }

    #[test]
    fn decimals_are_twos_complement_and_checked_against_precision() {
        assert_eq!(decimal(&[0x04, 0xd2], 10), Ok(1234));
        assert_eq!(decimal(&[0xfb, 0x2e], 10), Ok(-1234));
        assert_eq!(decimal(&[0x04, 0xd2], 3), Err(Bad::Decimal));
        let mut padded = vec![0xff; 4];
        padded.extend_from_slice(&(-5i128).to_be_bytes());
        assert_eq!(decimal(&padded, 10), Ok(-5));
    }

    #[test]
    fn uuids_parse_hyphenated_or_plain() {
        let u = parse_uuid("123e4567-e89b-12d3-a456-426614174000").unwrap();
        assert_eq!(u[0], 0x12);
        assert_eq!(u[15], 0x00);
        assert_eq!(parse_uuid("123e4567e89b12d3a456426614174000"), Some(u));
        assert_eq!(parse_uuid("not-a-uuid"), None);
    }
}

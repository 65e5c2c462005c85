//! Protobuf wire format (protobuf.dev, "Encoding") read straight into
//! column buffers by a compiled [`MessageOp`].
//!
//! Fields may come in any order and more than once, so each message is
//! scanned once into a [`Frame`]: per field number the plan reads, the
//! chain of its occurrences (varint or fixed value, or the byte range of
//! a length-delimited one); unknown numbers are read past. Then each
//! field is pushed in declaration order: singular values take the last
//! occurrence, messages merge every occurrence (their ranges are scanned
//! one after the other, which is what the specification's merge means),
//! repeated fields take every one (packed runs unpacked). There is one
//! frame per nesting depth, reused from message to message: no allocation
//! in the steady state. Strings and bytes are copied once, from the
//! message into the column.

use std::fmt;

use super::plan::{FieldOp, MessageOp, Op, Shape, EGROUP, I32, I64, LEN, SGROUP, VARINT};
use super::schema::{ProtoEnum, Scalar};
use crate::decode::buffer::ColumnBuffer;

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// The body ended inside a value.
    Truncated,
    /// A varint longer than 10 bytes.
    Varint,
    /// A tag with field number 0 or beyond 2^29 - 1, or wire type 6 or 7.
    Tag(u64),
    /// A value sent with another wire type than the field's.
    WireType { found: u8, expected: u8 },
    /// An end-group tag without its start, or a group left open.
    Group,
    /// A string that is not UTF-8.
    Utf8,
    /// A timestamp beyond the microseconds a `long` holds.
    Timestamp,
    /// The message-index array before the message names no message.
    MessageIndex(String),
    /// A field number the schema does not have, unreadable.
    Unknown { number: u64, bad: Box<Bad> },
    /// A batch column would pass 2 GiB.
    Full,
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bad::Truncated => f.write_str("the body ends inside a value (truncated)"),
            Bad::Varint => f.write_str("a variable-length integer runs past 10 bytes"),
            Bad::Tag(tag) => write!(f, "invalid field tag {tag}"),
            Bad::WireType { found, expected } => write!(
                f,
                "wire type {found} ({}), but the field is {expected} ({})",
                wire_name(*found),
                wire_name(*expected)
            ),
            Bad::Group => f.write_str("unbalanced group tags"),
            Bad::Utf8 => f.write_str("a string is not UTF-8"),
            Bad::Timestamp => f.write_str("a timestamp is out of range"),
            Bad::MessageIndex(e) => write!(f, "message indexes: {e}"),
            Bad::Unknown { number, bad } => write!(f, "field number {number}: {bad}"),
            Bad::Full => f.write_str("the batch column is full"),
        }
    }
}

fn wire_name(wire: u8) -> &'static str {
    match wire {
        VARINT => "varint",
        I64 => "64-bit",
        LEN => "length-delimited",
        SGROUP => "group start",
        EGROUP => "group end",
        I32 => "32-bit",
        _ => "invalid",
    }
}

/// A failed read: the field at fault (a dotted path from the top-level
/// field, when known) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub field: Option<String>,
    pub bad: Bad,
}

impl Fault {
    fn of(bad: Bad) -> Self {
        Self { field: None, bad }
    }

    /// The fault as seen from the message that holds field `name`.
    fn within(mut self, name: &str) -> Self {
        self.field = Some(match self.field {
            Some(inner) => format!("{name}.{inner}"),
            None => name.to_owned(),
        });
        self
    }
}

impl From<Bad> for Fault {
    fn from(bad: Bad) -> Self {
        Self::of(bad)
    }
}

/// A read position in a byte range of the body.
struct Wire<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Wire<'a> {
    fn new(bytes: &'a [u8], (start, end): (usize, usize)) -> Self {
        Self {
            bytes,
            pos: start,
            end,
        }
    }

    fn done(&self) -> bool {
        self.pos >= self.end
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, Bad> {
        let mut value: u64 = 0;
        for shift in (0..70).step_by(7) {
            if self.pos >= self.end {
                return Err(Bad::Truncated);
            }
            let byte = self.bytes[self.pos];
            self.pos += 1;
            value |= u64::from(byte & 0x7f).wrapping_shl(shift);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Bad::Varint)
    }

    #[inline]
    fn fixed(&mut self, n: usize) -> Result<u64, Bad> {
        let start = self.pos;
        self.skip_bytes(n)?;
        let mut le = [0u8; 8];
        le[..n].copy_from_slice(&self.bytes[start..start + n]);
        Ok(u64::from_le_bytes(le))
    }

    fn skip_bytes(&mut self, n: usize) -> Result<(), Bad> {
        if self.end - self.pos < n {
            return Err(Bad::Truncated);
        }
        self.pos += n;
        Ok(())
    }

    /// A length-delimited value's range.
    #[inline]
    fn range(&mut self) -> Result<(usize, usize), Bad> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| Bad::Truncated)?;
        let start = self.pos;
        self.skip_bytes(n)?;
        Ok((start, self.pos))
    }

    /// A tag: field number and wire type.
    #[inline]
    fn tag(&mut self) -> Result<(u64, u8), Bad> {
        let tag = self.varint()?;
        let (number, wire) = (tag >> 3, (tag & 7) as u8);
        if number == 0 || number > (1 << 29) - 1 || wire > I32 {
            return Err(Bad::Tag(tag));
        }
        Ok((number, wire))
    }

    /// One value of `wire` type. Inlined: returned through memory, the
    /// entry cost a store-forwarding stall per field (profiled).
    #[inline(always)]
    fn value(&mut self, wire: u8) -> Result<Entry, Bad> {
        let mut entry = Entry {
            value: 0,
            start: 0,
            end: 0,
            wire,
            next: NONE,
        };
        match wire {
            VARINT => entry.value = self.varint()?,
            I64 => entry.value = self.fixed(8)?,
            I32 => entry.value = self.fixed(4)?,
            _ => (entry.start, entry.end) = self.range()?,
        }
        Ok(entry)
    }

    /// Reads past a value of an unknown field (a whole group, for a
    /// group start).
    fn skip(&mut self, wire: u8) -> Result<(), Bad> {
        match wire {
            VARINT => self.varint().map(drop),
            I64 => self.skip_bytes(8),
            I32 => self.skip_bytes(4),
            LEN => self.range().map(drop),
            SGROUP => self.skip_group(),
            _ => Err(Bad::Group),
        }
    }

    /// Reads past a group's fields and its end tag.
    fn skip_group(&mut self) -> Result<(), Bad> {
        let mut open = 1usize;
        while open > 0 {
            let (_, wire) = self.tag()?;
            match wire {
                SGROUP => open += 1,
                EGROUP => open -= 1,
                _ => self.skip(wire)?,
            }
        }
        Ok(())
    }
}

/// No occurrence (an empty chain).
const NONE: u32 = u32::MAX;

/// One occurrence of a field: its varint or fixed value, or the range of
/// its bytes in the body; the next occurrence of the same field.
#[derive(Debug, Clone, Copy)]
struct Entry {
    value: u64,
    start: usize,
    end: usize,
    wire: u8,
    next: u32,
}

impl Entry {
    fn range(&self) -> (usize, usize) {
        (self.start, self.end)
    }
}

/// One message's fields as scanned: per plan field, its first and last
/// occurrence; per oneof, the member sent last.
#[derive(Debug, Default)]
struct Frame {
    first: Vec<u32>,
    last: Vec<u32>,
    entries: Vec<Entry>,
    oneof_set: Vec<u32>,
}

impl Frame {
    fn reset(&mut self, fields: usize, oneofs: usize) {
        self.first.clear();
        self.first.resize(fields, NONE);
        self.last.clear();
        self.last.resize(fields, NONE);
        self.entries.clear();
        self.oneof_set.clear();
        self.oneof_set.resize(oneofs, NONE);
    }

    fn record(&mut self, field: usize, entry: Entry) {
        let at = self.entries.len() as u32;
        self.entries.push(entry);
        match self.last[field] {
            NONE => self.first[field] = at,
            last => self.entries[last as usize].next = at,
        }
        self.last[field] = at;
    }

    /// The occurrences of `field`, in wire order.
    fn chain(&self, field: usize) -> Chain<'_> {
        Chain {
            entries: &self.entries,
            at: self.first[field],
        }
    }

    /// Scans `range` of `body`, a message of `op`, adding to the chains.
    fn scan(&mut self, op: &MessageOp, body: &[u8], range: (usize, usize)) -> Result<(), Fault> {
        let mut wire = Wire::new(body, range);
        while !wire.done() {
            let (number, kind) = wire.tag()?;
            let Some(i) = op.numbers.get(number) else {
                wire.skip(kind).map_err(|bad| Bad::Unknown {
                    number,
                    bad: Box::new(bad),
                })?;
                continue;
            };
            let field = &op.fields[i];
            if !field.accepts(kind) {
                let expected = field.op.wire_type();
                let bad = Bad::WireType {
                    found: kind,
                    expected,
                };
                return Err(Fault::of(bad).within(&field.name));
            }
            let entry = wire
                .value(kind)
                .map_err(|bad| Fault::of(bad).within(&field.name))?;
            self.record(i, entry);
            if let Some(g) = field.oneof {
                self.oneof_set[g] = i as u32;
            }
        }
        Ok(())
    }
}

/// Iterates a field's occurrences.
#[derive(Clone)]
struct Chain<'f> {
    entries: &'f [Entry],
    at: u32,
}

impl<'f> Iterator for Chain<'f> {
    type Item = &'f Entry;

    fn next(&mut self) -> Option<&'f Entry> {
        let entry = self.entries.get(self.at as usize)?;
        self.at = entry.next;
        Some(entry)
    }
}

/// The reusable state of the reader: one frame per nesting depth, and
/// the message indexes of the current message.
#[derive(Debug, Default)]
pub struct Scratch {
    frames: Vec<Frame>,
    /// The message-index path of the current message.
    pub path: Vec<i32>,
}

impl Scratch {
    fn take(&mut self, depth: usize) -> Frame {
        if self.frames.len() <= depth {
            self.frames.resize_with(depth + 1, Frame::default);
        }
        std::mem::take(&mut self.frames[depth])
    }

    fn put_back(&mut self, depth: usize, frame: Frame) {
        self.frames[depth] = frame;
    }
}

/// Reads the message-index array at the start of a Confluent Protobuf
/// body into `path` (a zigzag varint count, then that many zigzag varint
/// indexes; a count of 0 means `[0]`); returns where the message starts.
pub fn message_indexes(body: &[u8], path: &mut Vec<i32>) -> Result<usize, Bad> {
    let mut wire = Wire::new(body, (0, body.len()));
    let bad = |e: &dyn fmt::Display| Bad::MessageIndex(e.to_string());
    let count = zigzag64(wire.varint().map_err(|e| bad(&e))?);
    path.clear();
    if count == 0 {
        path.push(0);
        return Ok(wire.pos);
    }
    if count < 0 || count as u64 > body.len() as u64 {
        return Err(bad(&format!("count {count} is not a count of indexes")));
    }
    for _ in 0..count {
        let index = zigzag64(wire.varint().map_err(|e| bad(&e))?);
        path.push(i32::try_from(index).map_err(|_| bad(&format!("index {index}")))?);
    }
    Ok(wire.pos)
}

/// Reads the top-level message `body` into `columns` following `op`.
/// On error the columns hold a partial row (the caller truncates).
pub fn read_message(
    op: &MessageOp,
    body: &[u8],
    scratch: &mut Scratch,
    columns: &mut [ColumnBuffer],
) -> Result<(), Fault> {
    let whole = [Entry {
        value: 0,
        start: 0,
        end: body.len(),
        wire: LEN,
        next: NONE,
    }];
    message_into(op, whole.iter(), body, scratch, 0, columns)
}

/// Reads a message sent as `occurrences` (merged in order) into `out`,
/// its fields' buffers, scanning at `depth`.
fn message_into<'e>(
    op: &MessageOp,
    mut occurrences: impl Iterator<Item = &'e Entry>,
    body: &[u8],
    scratch: &mut Scratch,
    depth: usize,
    out: &mut [ColumnBuffer],
) -> Result<(), Fault> {
    let mut frame = scratch.take(depth);
    frame.reset(op.fields.len(), op.oneofs);
    let result = occurrences
        .try_for_each(|e| frame.scan(op, body, e.range()))
        .and_then(|()| {
            for (i, field) in op.fields.iter().enumerate() {
                let target = &mut out[field.target];
                push_field(field, i, &frame, body, scratch, depth + 1, target)
                    .map_err(|f| f.within(&field.name))?;
            }
            Ok(())
        });
    scratch.put_back(depth, frame);
    result?;
    for &a in &op.absent {
        out[a].push_null();
    }
    Ok(())
}

/// Pushes field `i` of a scanned message into its buffer.
fn push_field(
    field: &FieldOp,
    i: usize,
    frame: &Frame,
    body: &[u8],
    scratch: &mut Scratch,
    depth: usize,
    out: &mut ColumnBuffer,
) -> Result<(), Fault> {
    match field.shape {
        Shape::Singular { presence } => {
            let lost_oneof = field.oneof.is_some_and(|g| frame.oneof_set[g] != i as u32);
            if frame.first[i] == NONE || lost_oneof {
                if presence {
                    out.push_null();
                    return Ok(());
                }
                return push_value(&field.op, std::iter::empty(), body, scratch, depth, out);
            }
            push_value(&field.op, frame.chain(i), body, scratch, depth, out)
        }
        Shape::Repeated => {
            let element = out.list_element();
            for entry in frame.chain(i) {
                if entry.wire == LEN && field.op.packable() {
                    push_packed(&field.op, entry.range(), body, element)?;
                } else {
                    push_value(
                        &field.op,
                        std::iter::once(entry),
                        body,
                        scratch,
                        depth,
                        element,
                    )?;
                }
            }
            out.close_row().map_err(|_| Bad::Full.into())
        }
        Shape::Map => {
            let Op::MapEntry(entry_op) = &field.op else {
                unreachable!("a map field reads map entries")
            };
            let (keys, values) = out.map_entries();
            for entry in frame.chain(i) {
                push_entry(entry_op, entry, body, scratch, depth, keys, values)?;
            }
            out.close_row().map_err(|_| Bad::Full.into())
        }
    }
}

/// One map entry into the key and value buffers.
fn push_entry(
    op: &MessageOp,
    entry: &Entry,
    body: &[u8],
    scratch: &mut Scratch,
    depth: usize,
    keys: &mut ColumnBuffer,
    values: &mut ColumnBuffer,
) -> Result<(), Fault> {
    let mut frame = scratch.take(depth);
    frame.reset(2, 0);
    let result = frame.scan(op, body, entry.range()).and_then(|()| {
        let [key, value] = &op.fields[..] else {
            unreachable!("a map entry has a key and a value")
        };
        push_field(key, 0, &frame, body, scratch, depth + 1, keys).map_err(|f| f.within("key"))?;
        push_field(value, 1, &frame, body, scratch, depth + 1, values)
            .map_err(|f| f.within("value"))
    });
    scratch.put_back(depth, frame);
    result
}

/// Pushes one value of `op` sent as `occurrences` (the last one wins;
/// messages merge them all; none: the default value).
fn push_value<'e>(
    op: &Op,
    occurrences: impl Iterator<Item = &'e Entry>,
    body: &[u8],
    scratch: &mut Scratch,
    depth: usize,
    out: &mut ColumnBuffer,
) -> Result<(), Fault> {
    match op {
        Op::Message(m) => {
            message_into(m, occurrences, body, scratch, depth, out.struct_fields())?;
            return out.close_row().map_err(|_| Bad::Full.into());
        }
        Op::Timestamp => out.push_i64(timestamp(occurrences, body)?),
        Op::Wrapper { scalar, widen } => {
            let (value, bytes) = wrapped(*scalar, occurrences, body)?;
            push_scalar(*scalar, *widen, value, bytes, out)?;
        }
        Op::Scalar { scalar, widen } => {
            let (value, bytes) = match occurrences.last() {
                Some(e) => (e.value, &body[e.start..e.end]),
                None => (0, &[][..]),
            };
            push_scalar(*scalar, *widen, value, bytes, out)?;
        }
        Op::Enum(e) => match occurrences.last() {
            Some(last) => push_enum(e, last.value as i32, out)?,
            None => out.push_str(&e.default).map_err(|_| Bad::Full)?,
        },
        Op::MapEntry(_) => unreachable!("map entries are read by push_entry"),
    }
    Ok(())
}

/// A packed run of `op` values.
fn push_packed(
    op: &Op,
    range: (usize, usize),
    body: &[u8],
    out: &mut ColumnBuffer,
) -> Result<(), Fault> {
    let mut wire = Wire::new(body, range);
    let kind = op.wire_type();
    while !wire.done() {
        let value = match kind {
            VARINT => wire.varint()?,
            I64 => wire.fixed(8)?,
            _ => wire.fixed(4)?,
        };
        match op {
            Op::Scalar { scalar, widen } => push_scalar(*scalar, *widen, value, &[], out)?,
            Op::Enum(e) => push_enum(e, value as i32, out)?,
            _ => unreachable!("only scalars and enums pack"),
        }
    }
    Ok(())
}

/// A scalar: `value` is the varint or fixed bits, `bytes` a string's or
/// bytes' content (0 and empty: the default).
#[inline]
fn push_scalar(
    scalar: Scalar,
    widen: bool,
    value: u64,
    bytes: &[u8],
    out: &mut ColumnBuffer,
) -> Result<(), Bad> {
    use Scalar::*;
    let int = |v: i32, out: &mut ColumnBuffer| {
        if widen {
            out.push_i64(i64::from(v))
        } else {
            out.push_i32(v)
        }
    };
    match scalar {
        // int32 is sent sign-extended to 64 bits; readers truncate.
        Int32 | Sfixed32 => int(value as i32, out),
        Sint32 => int(zigzag32(value as u32), out),
        Int64 | Sfixed64 => out.push_i64(value as i64),
        Sint64 => out.push_i64(zigzag64(value)),
        Uint32 | Fixed32 => out.push_i64(i64::from(value as u32)),
        Uint64 | Fixed64 => out.push_i128(i128::from(value)),
        Float if widen => out.push_f64(f64::from(f32::from_bits(value as u32))),
        Float => out.push_f32(f32::from_bits(value as u32)),
        Double => out.push_f64(f64::from_bits(value)),
        Bool => out.push_bool(value != 0),
        String => {
            let text = std::str::from_utf8(bytes).map_err(|_| Bad::Utf8)?;
            out.push_str(text).map_err(|_| Bad::Full)?
        }
        Bytes => out.push_bytes(bytes),
    }
    Ok(())
}

/// An enum value's name; a number the enum does not define, as text.
fn push_enum(e: &ProtoEnum, number: i32, out: &mut ColumnBuffer) -> Result<(), Bad> {
    let pushed = match e.name_of(number) {
        Some(name) => out.push_str(name),
        None => {
            let mut text = [0u8; 11];
            out.push_str(decimal_text(number, &mut text))
        }
    };
    pushed.map_err(|_| Bad::Full)
}

/// `n` in decimal digits, written into `buf`.
fn decimal_text(n: i32, buf: &mut [u8; 11]) -> &str {
    let mut at = buf.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    std::str::from_utf8(&buf[at..]).expect("ASCII digits")
}

/// A `google.protobuf.Timestamp` (seconds = 1, nanos = 2) in microseconds;
/// nanoseconds below a microsecond are dropped (floor).
fn timestamp<'e>(occurrences: impl Iterator<Item = &'e Entry>, body: &[u8]) -> Result<i64, Bad> {
    let (mut seconds, mut nanos) = (0i64, 0i64);
    for e in occurrences {
        let mut wire = Wire::new(body, e.range());
        while !wire.done() {
            match wire.tag()? {
                (1, VARINT) => seconds = wire.varint()? as i64,
                (2, VARINT) => nanos = i64::from(wire.varint()? as i32),
                (1 | 2, found) => {
                    return Err(Bad::WireType {
                        found,
                        expected: VARINT,
                    })
                }
                (_, kind) => wire.skip(kind)?,
            }
        }
    }
    seconds
        .checked_mul(1_000_000)
        .and_then(|micros| micros.checked_add(nanos.div_euclid(1000)))
        .ok_or(Bad::Timestamp)
}

/// A wrapper's value (field 1; absent: the default), as `(bits, bytes)`.
fn wrapped<'e, 'b>(
    scalar: Scalar,
    occurrences: impl Iterator<Item = &'e Entry>,
    body: &'b [u8],
) -> Result<(u64, &'b [u8]), Bad> {
    let expected = super::plan::scalar_wire_type(scalar);
    let (mut value, mut bytes) = (0, &[][..]);
    for e in occurrences {
        let mut wire = Wire::new(body, e.range());
        while !wire.done() {
            match wire.tag()? {
                (1, kind) if kind == expected => {
                    let v = wire.value(kind)?;
                    (value, bytes) = (v.value, &body[v.start..v.end]);
                }
                (1, found) => return Err(Bad::WireType { found, expected }),
                (_, kind) => wire.skip(kind)?,
            }
        }
    }
    Ok((value, bytes))
}

#[inline]
fn zigzag32(v: u32) -> i32 {
    (v >> 1) as i32 ^ -((v & 1) as i32)
}

#[inline]
fn zigzag64(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_indexes_read_the_shorthand_and_full_paths() {
        let mut path = Vec::new();
        assert_eq!(message_indexes(&[0, 8, 1], &mut path), Ok(1));
        assert_eq!(path, [0]);
        // Count 2 (zigzag 4), then 1 (2) and 0 (0).
        assert_eq!(message_indexes(&[4, 2, 0, 8], &mut path), Ok(3));
        assert_eq!(path, [1, 0]);
        assert!(message_indexes(&[4, 2], &mut path).is_err());
        assert!(message_indexes(&[1], &mut path).is_err());
        assert!(message_indexes(&[], &mut path).is_err());
        let huge = [0xfe, 0xff, 0xff, 0xff, 0x0f];
        assert!(message_indexes(&huge, &mut path).is_err());
    }

    #[test]
    fn varints_past_ten_bytes_and_bad_tags_are_refused() {
        let long = [0xff; 11];
        let mut wire = Wire::new(&long, (0, long.len()));
        assert_eq!(wire.varint(), Err(Bad::Varint));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Wire::new(&max, (0, 10)).varint(), Ok(u64::MAX));
        assert_eq!(Wire::new(&[0x00], (0, 1)).tag(), Err(Bad::Tag(0)));
        assert_eq!(Wire::new(&[0x0e], (0, 1)).tag(), Err(Bad::Tag(14)));
        let mut skip = Wire::new(&[0x0b, 0x08, 0x01, 0x0c, 0x7f], (0, 5));
        // A group (field 1) holding a varint field, then its end.
        assert_eq!(skip.tag(), Ok((1, SGROUP)));
        assert_eq!(skip.skip(SGROUP), Ok(()));
        assert_eq!(skip.pos, 4);
        let mut open = Wire::new(&[0x08, 0x01], (0, 2));
        assert_eq!(open.skip_group(), Err(Bad::Truncated));
    }

    #[test]
    fn enum_numbers_without_a_name_are_text() {
        let mut buf = [0u8; 11];
        assert_eq!(decimal_text(i32::MIN, &mut buf), "-2147483648");
        assert_eq!(decimal_text(0, &mut buf), "0");
        assert_eq!(decimal_text(907, &mut buf), "907");
        assert_eq!(zigzag32(u32::MAX), i32::MIN);
        assert_eq!(zigzag64(3), -2);
    }
}

//! A Kafka message as the decoder sees it: borrowed, never copied.

use std::fmt;

/// One Kafka message, borrowing every byte from the consumer's buffer.
#[derive(Debug, Clone, Copy)]
pub struct SourceRecord<'a> {
    /// The topic the message was read from.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its offset in that partition.
    pub offset: i64,
    /// The message timestamp in milliseconds since the epoch (create time or
    /// log append time, per the topic's `message.timestamp.type`); `None`
    /// when the message has none (Kafka's -1), which leaves
    /// `_kafka_timestamp` and `_cdc_timestamp` null.
    pub timestamp_ms: Option<i64>,
    /// The key bytes; `None` for a message without a key.
    pub key: Option<&'a [u8]>,
    /// The value bytes; `None` for a tombstone.
    pub value: Option<&'a [u8]>,
    /// The message's headers, read only when asked for.
    pub headers: Headers<'a>,
}

/// One Kafka header: a key and a value (which may be null), as the
/// producer wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// The key's bytes (Kafka's clients write UTF-8).
    pub key: &'a [u8],
    /// The value's bytes; `None` for a null value.
    pub value: Option<&'a [u8]>,
}

/// A client's own list of a message's headers (librdkafka's), read one at
/// a time without copying.
pub trait HeaderList {
    /// The header at `index` (in the message's order), `None` past the
    /// last; `Err` when the list cannot be read.
    fn get(&self, index: usize) -> Result<Option<Header<'_>>, MalformedHeaders>;
}

/// A message's headers could not be read: the record's bytes are not
/// Kafka's record format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the message's headers are malformed")]
pub struct MalformedHeaders;

/// A message's headers, in the message's order, repeated keys kept.
#[derive(Clone, Copy, Default)]
pub enum Headers<'a> {
    /// The message has no headers (or its reader does not read them).
    #[default]
    None,
    /// Kafka's record format, as a record batch holds them: a varint count,
    /// then per header a varint-length key and a varint-length value
    /// (-1: null).
    Wire(&'a [u8]),
    /// A client's list.
    List(&'a dyn HeaderList),
}

impl fmt::Debug for Headers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Headers::None => f.write_str("Headers::None"),
            Headers::Wire(bytes) => write!(f, "Headers::Wire({} bytes)", bytes.len()),
            Headers::List(_) => f.write_str("Headers::List"),
        }
    }
}

impl Headers<'_> {
    /// Calls `each` with every header, in order.
    pub fn for_each<E>(&self, mut each: impl FnMut(Header<'_>) -> Result<(), E>) -> Result<(), E>
    where
        E: From<MalformedHeaders>,
    {
        match *self {
            Headers::None => Ok(()),
            Headers::Wire(bytes) => {
                let mut r = WireReader(bytes);
                let count = r.varint()?;
                for _ in 0..count.max(0) {
                    let key = r.bytes()?.ok_or(MalformedHeaders)?;
                    let value = r.bytes()?;
                    each(Header { key, value })?;
                }
                Ok(())
            }
            Headers::List(list) => {
                let mut index = 0;
                while let Some(header) = list.get(index)? {
                    each(header)?;
                    index += 1;
                }
                Ok(())
            }
        }
    }

    /// `read` of the value of the last header named `key` (a repeated key's
    /// last value, as Kafka's clients read one), `None` without one.
    pub fn last<T>(
        &self,
        key: &str,
        read: impl Fn(Option<&[u8]>) -> T,
    ) -> Result<Option<T>, MalformedHeaders> {
        let mut found = None;
        self.for_each(|h| {
            if h.key == key.as_bytes() {
                found = Some(read(h.value));
            }
            Ok::<_, MalformedHeaders>(())
        })?;
        Ok(found)
    }
}

/// Reads Kafka's zig-zag varints and varint-length byte strings.
struct WireReader<'a>(&'a [u8]);

impl<'a> WireReader<'a> {
    fn varint(&mut self) -> Result<i64, MalformedHeaders> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.0.split_first().ok_or(MalformedHeaders)?;
            self.0 = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err(MalformedHeaders)
    }

    fn bytes(&mut self) -> Result<Option<&'a [u8]>, MalformedHeaders> {
        let length = self.varint()?;
        if length < 0 {
            return Ok(None);
        }
        let length = usize::try_from(length).map_err(|_| MalformedHeaders)?;
        if length > self.0.len() {
            return Err(MalformedHeaders);
        }
        let (bytes, rest) = self.0.split_at(length);
        self.0 = rest;
        Ok(Some(bytes))
    }
}

/// Kafka's record format of `headers` (count, then each key and value as
/// varint-length bytes, -1 for a null value), for tests that hand a
/// decoder a record with headers.
#[cfg(test)]
pub(crate) fn wire_headers(headers: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out.push((z as u8) | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    }
    let mut out = Vec::new();
    varint(&mut out, headers.len() as i64);
    for (key, value) in headers {
        varint(&mut out, key.len() as i64);
        out.extend_from_slice(key);
        match value {
            Some(v) => {
                varint(&mut out, v.len() as i64);
                out.extend_from_slice(v);
            }
            None => varint(&mut out, -1),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Headers as owned `(key, value)` pairs.
    type Owned = Vec<(Vec<u8>, Option<Vec<u8>>)>;

    fn read(headers: Headers<'_>) -> Result<Owned, MalformedHeaders> {
        let mut out = Vec::new();
        headers.for_each(|h| {
            out.push((h.key.to_vec(), h.value.map(<[u8]>::to_vec)));
            Ok::<_, MalformedHeaders>(())
        })?;
        Ok(out)
    }

    #[test]
    fn wire_headers_read_in_order_with_repeated_keys_and_null_values() {
        let bytes = wire_headers(&[
            (b"a", Some(b"1")),
            (b"b", None),
            (b"a", Some(b"")),
            (b"", Some(b"x")),
        ]);
        let got = read(Headers::Wire(&bytes)).unwrap();
        let want: Owned = vec![
            (b"a".to_vec(), Some(b"1".to_vec())),
            (b"b".to_vec(), None),
            (b"a".to_vec(), Some(Vec::new())),
            (Vec::new(), Some(b"x".to_vec())),
        ];
        assert_eq!(got, want);
        let last = Headers::Wire(&bytes).last("a", |v| v.map(<[u8]>::to_vec));
        assert_eq!(last, Ok(Some(Some(Vec::new()))));
        assert_eq!(
            Headers::Wire(&bytes).last("b", |v| v.is_none()),
            Ok(Some(true))
        );
        assert_eq!(Headers::Wire(&bytes).last("c", |_| ()), Ok(None));
        assert_eq!(read(Headers::None), Ok(Vec::new()));
    }

    #[test]
    fn cut_or_garbled_wire_headers_are_malformed_not_read_past() {
        let bytes = wire_headers(&[(b"key", Some(b"value"))]);
        for cut in 0..bytes.len() {
            assert_eq!(
                read(Headers::Wire(&bytes[..cut])),
                Err(MalformedHeaders),
                "cut at {cut}"
            );
        }
        // A null key is not Kafka's format.
        assert_eq!(read(Headers::Wire(&[2, 1, 2, b'v'])), Err(MalformedHeaders));
    }

    struct List(Vec<(&'static [u8], Option<&'static [u8]>)>);

    impl HeaderList for List {
        fn get(&self, index: usize) -> Result<Option<Header<'_>>, MalformedHeaders> {
            Ok(self.0.get(index).map(|&(key, value)| Header { key, value }))
        }
    }

    #[test]
    fn a_clients_list_reads_like_the_wire() {
        let list = List(vec![(b"a", Some(b"1")), (b"b", None)]);
        let bytes = wire_headers(&list.0);
        assert_eq!(read(Headers::List(&list)), read(Headers::Wire(&bytes)));
    }
}

//! Kafka's wire encoding: big-endian integers, zigzag varints, length-
//! prefixed strings and bytes, read from a slice without copying; and the
//! request side's few writes.

/// Bytes that are not what the protocol says they are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A field runs past the end of its frame, or a length is negative
    /// where none may be.
    #[error("a malformed response (a field runs past its end)")]
    Malformed,
    /// A record batch of message format v0 or v1 (written by a broker
    /// before Kafka 0.11 or with an old `log.message.format.version`).
    #[error(
        "a record batch of message format v{0}; only v2 (Kafka 0.11 and later) is read \
         here: set fetch = \"librdkafka\" in [source] for older formats"
    )]
    MessageFormat(i8),
    /// A compressed batch that did not decompress.
    #[error("a {0} compressed batch did not decompress: {1}")]
    Codec(&'static str, String),
}

/// Reads over one frame.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// Where the next read starts.
    pub fn position(&self) -> usize {
        self.at
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).ok_or(WireError::Malformed)?;
        let out = self.bytes.get(self.at..end).ok_or(WireError::Malformed)?;
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// An INT8.
    pub fn i8(&mut self) -> Result<i8, WireError> {
        Ok(i8::from_be_bytes(self.array()?))
    }
    /// An INT16.
    pub fn i16(&mut self) -> Result<i16, WireError> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    /// An INT32.
    pub fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    /// An INT64.
    pub fn i64(&mut self) -> Result<i64, WireError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// A STRING (INT16 length; -1 reads as empty).
    pub fn string(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.i16()?;
        self.take(usize::try_from(n).unwrap_or(0))
    }

    /// An array's INT32 element count (-1, a null array, reads as 0).
    pub fn count(&mut self) -> Result<usize, WireError> {
        Ok(usize::try_from(self.i32()?).unwrap_or(0))
    }

    /// A zigzag VARINT or VARLONG.
    pub fn varint(&mut self) -> Result<i64, WireError> {
        let (mut value, mut shift) = (0u64, 0u32);
        loop {
            let byte = *self.bytes.get(self.at).ok_or(WireError::Malformed)?;
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return Err(WireError::Malformed);
            }
        }
        Ok(((value >> 1) as i64) ^ -((value & 1) as i64))
    }

    /// A record's key or value: varint length, -1 for null.
    pub fn varbytes(&mut self) -> Result<Option<&'a [u8]>, WireError> {
        let n = self.varint()?;
        if n < 0 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|_| WireError::Malformed)?;
        self.take(n).map(Some)
    }
}

/// Appends a STRING (INT16 length).
pub fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

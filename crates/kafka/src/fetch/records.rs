//! Kafka record batches (message format v2), read in place: the 61-byte
//! batch header, the codec (none, gzip, snappy, lz4, zstd), control batches
//! (transaction markers) and the batches of aborted transactions, which a
//! `read_committed` reader never hands out; then each record's offset,
//! timestamp, key and value as slices of the batch (or of the decompressed
//! records).
//!
//! The layout is Kafka's (the protocol guide's "Record Batch"); CRCs are not
//! checked, as librdkafka does not by default (`check.crcs=false`): TCP and
//! the broker's own checks guard the bytes.

use std::collections::BTreeSet;
use std::io::Read;

use super::wire::{Reader, WireError};

/// Bytes of a batch header, from its base offset to its record count.
pub const BATCH_HEADER: usize = 61;
/// Bytes before a batch's length field counts: base offset + length.
const LOG_OVERHEAD: usize = 12;

/// A record batch's header fields that decide what it holds.
#[derive(Debug, Clone, Copy)]
pub struct BatchHeader {
    /// The first offset of the batch.
    pub base_offset: i64,
    /// The last offset the batch covers (records may have been compacted
    /// away, the offset is still used up).
    pub last_offset: i64,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    record_count: i32,
}

impl BatchHeader {
    fn codec(&self) -> u8 {
        (self.attributes & 0x7) as u8
    }
    fn log_append_time(&self) -> bool {
        self.attributes & 0x8 != 0
    }
    fn transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }
    fn control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
}

/// The complete batches at the start of `records` (a Fetch response's
/// records of one partition): each header with its record bytes (still
/// compressed when the batch is). A last batch cut off by the response's
/// size limit is left out; the next fetch asks for it again.
pub fn batches(records: &[u8]) -> Batches<'_> {
    Batches { rest: records }
}

/// Iterator of [`batches`].
pub struct Batches<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<(BatchHeader, &'a [u8]), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.len() < LOG_OVERHEAD {
            return None;
        }
        let mut r = Reader::new(self.rest);
        let parsed = (|| {
            let base_offset = r.i64()?;
            let length = r.i32()?;
            let total = LOG_OVERHEAD + usize::try_from(length).map_err(|_| WireError::Malformed)?;
            if self.rest.len() < total {
                return Ok(None);
            }
            if total < BATCH_HEADER {
                return Err(WireError::Malformed);
            }
            r.i32()?; // partition leader epoch
            let magic = r.i8()?;
            if magic != 2 {
                return Err(WireError::MessageFormat(magic));
            }
            r.i32()?; // crc
            let attributes = r.i16()?;
            let last_delta = r.i32()?;
            let base_timestamp = r.i64()?;
            let max_timestamp = r.i64()?;
            let producer_id = r.i64()?;
            r.i16()?; // producer epoch
            r.i32()?; // base sequence
            let record_count = r.i32()?;
            let header = BatchHeader {
                base_offset,
                last_offset: base_offset + i64::from(last_delta),
                attributes,
                base_timestamp,
                max_timestamp,
                producer_id,
                record_count,
            };
            Ok(Some((header, &self.rest[BATCH_HEADER..total], total)))
        })();
        match parsed {
            Ok(Some((header, body, total))) => {
                self.rest = &self.rest[total..];
                Some(Ok((header, body)))
            }
            Ok(None) => {
                self.rest = &[];
                None
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// One record handed out: its offset, timestamp, key and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Offset in the partition.
    pub offset: i64,
    /// Milliseconds since the epoch; `None` for Kafka's -1.
    pub timestamp_ms: Option<i64>,
    /// Key bytes (`None`: no key).
    pub key: Option<&'a [u8]>,
    /// Value bytes (`None`: a tombstone).
    pub value: Option<&'a [u8]>,
    /// The headers as the record holds them: their count, then each key
    /// and value (read by `topicberg_core::record::Headers::Wire`).
    pub headers: &'a [u8],
}

/// The `read_committed` filter of one partition's fetch: the response's
/// aborted transactions (producer id, first offset) and the producers whose
/// aborted transaction is open at the current batch (Kafka's consumer
/// rule: a transactional batch of such a producer is skipped until that
/// producer's ABORT marker).
#[derive(Debug, Default)]
pub struct TransactionFilter {
    /// Aborted transactions not reached yet, by first offset.
    pending: Vec<(i64, i64)>,
    aborted_producers: BTreeSet<i64>,
}

impl TransactionFilter {
    /// A filter over one response's aborted transactions of a partition,
    /// each `(producer_id, first_offset)`.
    pub fn new(mut aborted: Vec<(i64, i64)>) -> Self {
        // Popped from the end: the smallest first offset last.
        aborted.sort_by_key(|a| std::cmp::Reverse(a.1));
        TransactionFilter {
            pending: aborted,
            aborted_producers: BTreeSet::new(),
        }
    }

    /// Whether the records of `batch` are handed out: not a control batch,
    /// not part of an aborted transaction. `body` is the batch's record
    /// bytes (a control batch's one record says ABORT or COMMIT).
    pub fn keeps(&mut self, batch: &BatchHeader, body: &[u8]) -> Result<bool, WireError> {
        if self.pending.is_empty() && self.aborted_producers.is_empty() {
            return Ok(!batch.control());
        }
        while let Some(&(producer, first)) = self.pending.last() {
            if first > batch.last_offset {
                break;
            }
            self.aborted_producers.insert(producer);
            self.pending.pop();
        }
        if batch.control() {
            if control_is_abort(body)? {
                self.aborted_producers.remove(&batch.producer_id);
            }
            return Ok(false);
        }
        Ok(!(batch.transactional() && self.aborted_producers.contains(&batch.producer_id)))
    }
}

/// A control batch's record key: version (i16), then type (i16; 0 ABORT,
/// 1 COMMIT).
fn control_is_abort(body: &[u8]) -> Result<bool, WireError> {
    let mut r = Reader::new(body);
    r.varint()?; // record length
    r.i8()?; // attributes
    r.varint()?; // timestamp delta
    r.varint()?; // offset delta
    let key = r.varbytes()?.ok_or(WireError::Malformed)?;
    let mut k = Reader::new(key);
    k.i16()?; // version
    Ok(k.i16()? == 0)
}

/// The record bytes of `batch`, decompressed into `scratch` when the batch
/// is compressed (`scratch` is reused across batches).
pub fn record_bytes<'a>(
    batch: &BatchHeader,
    body: &'a [u8],
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], WireError> {
    let codec = batch.codec();
    if codec == 0 {
        return Ok(body);
    }
    scratch.clear();
    let failed =
        |codec: &'static str| move |e: std::io::Error| WireError::Codec(codec, e.to_string());
    match codec {
        1 => {
            flate2::read::MultiGzDecoder::new(body)
                .read_to_end(scratch)
                .map_err(failed("gzip"))?;
        }
        2 => snappy(body, scratch)?,
        3 => {
            lz4_flex::frame::FrameDecoder::new(body)
                .read_to_end(scratch)
                .map_err(failed("lz4"))?;
        }
        4 => {
            zstd::stream::read::Decoder::new(body)
                .and_then(|mut d| d.read_to_end(scratch))
                .map_err(failed("zstd"))?;
        }
        other => return Err(WireError::Codec("unknown", format!("codec id {other}"))),
    }
    Ok(scratch)
}

/// Kafka's snappy: either one raw block (librdkafka) or the framing of the
/// Java client's snappy-java stream (a magic header, then blocks each
/// prefixed with its compressed length).
fn snappy(body: &[u8], out: &mut Vec<u8>) -> Result<(), WireError> {
    const XERIAL: &[u8] = b"\x82SNAPPY\x00";
    let mut decoder = snap::raw::Decoder::new();
    let mut block = |compressed: &[u8], out: &mut Vec<u8>| -> Result<(), WireError> {
        let n = snap::raw::decompress_len(compressed)
            .map_err(|e| WireError::Codec("snappy", e.to_string()))?;
        let at = out.len();
        out.resize(at + n, 0);
        decoder
            .decompress(compressed, &mut out[at..])
            .map_err(|e| WireError::Codec("snappy", e.to_string()))?;
        Ok(())
    };
    if !body.starts_with(XERIAL) {
        return block(body, out);
    }
    // Magic (8 bytes), version and compatible version (4 each).
    let mut r = Reader::new(body.get(16..).ok_or(WireError::Malformed)?);
    while !r.is_empty() {
        let length = usize::try_from(r.i32()?).map_err(|_| WireError::Malformed)?;
        block(r.take(length)?, out)?;
    }
    Ok(())
}

/// Calls `each` with every record of `records` (a batch's record bytes,
/// decompressed), offsets and timestamps resolved from `batch`.
pub fn for_each_record<'a, E>(
    batch: &BatchHeader,
    records: &'a [u8],
    mut each: impl FnMut(Record<'a>) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<WireError>,
{
    let mut r = Reader::new(records);
    for _ in 0..batch.record_count.max(0) {
        r.varint()?; // record length
        r.i8()?; // attributes
        let timestamp_delta = r.varint()?;
        let offset = batch.base_offset + r.varint()?;
        let key = r.varbytes()?;
        let value = r.varbytes()?;
        let headers_from = r.position();
        for _ in 0..r.varint()? {
            r.varbytes()?;
            r.varbytes()?;
        }
        let headers = &records[headers_from..r.position()];
        let timestamp = if batch.log_append_time() {
            batch.max_timestamp
        } else {
            batch.base_timestamp + timestamp_delta
        };
        each(Record {
            offset,
            timestamp_ms: (timestamp >= 0).then_some(timestamp),
            key,
            value,
            headers,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;

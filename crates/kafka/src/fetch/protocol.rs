//! The Fetch request (v4, `read_committed`) and its response's layout, per
//! Kafka's protocol guide. v4 is the oldest version Kafka 4 serves and the
//! newest without tagged fields; every broker since 0.11 answers it.

use std::ops::Range;

use super::wire::{put_string, Reader, WireError};

const FETCH: i16 = 1;
const FETCH_VERSION: i16 = 4;
const READ_COMMITTED: u8 = 1;

/// How long the broker may hold a fetch that has no data yet.
pub const MAX_WAIT_MS: i32 = 100;
/// Bytes asked per partition (a first batch larger than this still comes).
pub const PARTITION_BYTES: i32 = 2 << 20;
/// Bytes asked per response.
pub const RESPONSE_BYTES: i32 = 8 << 20;

/// Writes a Fetch request for `positions` (partition, offset) of `topic`
/// into `out` (cleared first), with its size prefix.
pub fn fetch_request(
    out: &mut Vec<u8>,
    correlation: i32,
    client_id: &str,
    topic: &str,
    positions: &[(i32, i64)],
) {
    out.clear();
    out.extend_from_slice(&[0; 4]); // size, set below
    out.extend_from_slice(&FETCH.to_be_bytes());
    out.extend_from_slice(&FETCH_VERSION.to_be_bytes());
    out.extend_from_slice(&correlation.to_be_bytes());
    put_string(out, client_id);
    out.extend_from_slice(&(-1i32).to_be_bytes()); // replica id: a consumer
    out.extend_from_slice(&MAX_WAIT_MS.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes()); // min bytes
    out.extend_from_slice(&RESPONSE_BYTES.to_be_bytes());
    out.push(READ_COMMITTED);
    out.extend_from_slice(&1i32.to_be_bytes()); // one topic
    put_string(out, topic);
    out.extend_from_slice(&(positions.len() as i32).to_be_bytes());
    for &(partition, offset) in positions {
        out.extend_from_slice(&partition.to_be_bytes());
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&PARTITION_BYTES.to_be_bytes());
    }
    let size = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&size.to_be_bytes());
}

/// One partition's part of a Fetch response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionSection {
    /// The partition.
    pub partition: i32,
    /// The broker's error code for it (0: none).
    pub error: i16,
    /// Its high watermark.
    pub high_watermark: i64,
    /// Its last stable offset: `read_committed` reads stop here.
    pub last_stable_offset: i64,
    /// The aborted transactions among the records: (producer id, first
    /// offset).
    pub aborted: Vec<(i64, i64)>,
    /// Where its record batches are in the response.
    pub records: Range<usize>,
}

/// Reads a Fetch response (after its size prefix) into `sections`
/// (cleared first). The response must answer `correlation`.
pub fn read_fetch_response(
    response: &[u8],
    correlation: i32,
    sections: &mut Vec<PartitionSection>,
) -> Result<(), WireError> {
    sections.clear();
    let mut r = Reader::new(response);
    if r.i32()? != correlation {
        return Err(WireError::Malformed);
    }
    r.i32()?; // throttle time: a v4 response already waited it out
    for _ in 0..r.count()? {
        r.string()?; // the one topic asked
        for _ in 0..r.count()? {
            let partition = r.i32()?;
            let error = r.i16()?;
            let high_watermark = r.i64()?;
            let last_stable_offset = r.i64()?;
            let aborted = (0..r.count()?)
                .map(|_| Ok((r.i64()?, r.i64()?)))
                .collect::<Result<Vec<_>, WireError>>()?;
            let length = usize::try_from(r.i32()?).unwrap_or(0);
            let start = r.position();
            r.take(length)?;
            sections.push(PartitionSection {
                partition,
                error,
                high_watermark,
                last_stable_offset,
                aborted,
                records: start..start + length,
            });
        }
    }
    Ok(())
}

/// What to do about a partition's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionError {
    /// Ask for the leaders again and refetch (leadership moved, the broker
    /// is starting or stopping).
    Retry,
    /// The offset is gone: retention deleted it during the sync.
    OffsetOutOfRange,
    /// The principal may not read the topic.
    Unauthorized,
    /// Anything else: a failure of the sync.
    Fatal,
}

impl PartitionError {
    /// The class of a nonzero error code.
    pub fn of(code: i16) -> Self {
        match code {
            1 => PartitionError::OffsetOutOfRange,
            29 => PartitionError::Unauthorized,
            // UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
            // NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NETWORK_EXCEPTION,
            // KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
            // OFFSET_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE.
            3 | 5 | 6 | 7 | 9 | 13 | 56 | 74 | 75 | 78 => PartitionError::Retry,
            _ => PartitionError::Fatal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_reads_back_partition_by_partition() {
        let mut response = Vec::new();
        response.extend_from_slice(&7i32.to_be_bytes()); // correlation
        response.extend_from_slice(&0i32.to_be_bytes()); // throttle
        response.extend_from_slice(&1i32.to_be_bytes()); // topics
        put_string(&mut response, "trips");
        response.extend_from_slice(&2i32.to_be_bytes()); // partitions
        for (partition, records) in [(0i32, &b"abc"[..]), (3, &b""[..])] {
            response.extend_from_slice(&partition.to_be_bytes());
            response.extend_from_slice(&(partition as i16 * 2).to_be_bytes());
            response.extend_from_slice(&100i64.to_be_bytes());
            response.extend_from_slice(&90i64.to_be_bytes());
            response.extend_from_slice(&(partition / 3).to_be_bytes());
            if partition == 3 {
                response.extend_from_slice(&5i64.to_be_bytes());
                response.extend_from_slice(&80i64.to_be_bytes());
            }
            response.extend_from_slice(&(records.len() as i32).to_be_bytes());
            response.extend_from_slice(records);
        }
        let mut sections = Vec::new();
        read_fetch_response(&response, 7, &mut sections).unwrap();
        assert_eq!(sections.len(), 2);
        assert_eq!(&response[sections[0].records.clone()], b"abc");
        assert_eq!(sections[0].aborted, []);
        assert_eq!(sections[1].partition, 3);
        assert_eq!(sections[1].error, 6);
        assert_eq!(sections[1].aborted, [(5, 80)]);
        assert_eq!(sections[1].last_stable_offset, 90);
        assert!(sections[1].records.is_empty());
        assert_eq!(
            read_fetch_response(&response, 8, &mut sections),
            Err(WireError::Malformed),
            "another request's answer"
        );
        assert_eq!(
            read_fetch_response(&response[..response.len() - 10], 7, &mut sections),
            Err(WireError::Malformed)
        );
    }

    #[test]
    fn a_request_carries_every_position_and_its_size() {
        let mut out = Vec::new();
        fetch_request(&mut out, 3, "group", "t", &[(0, 10), (2, 20)]);
        let size = i32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
        assert_eq!(size, out.len() - 4);
        let mut r = Reader::new(&out[4..]);
        assert_eq!((r.i16().unwrap(), r.i16().unwrap()), (1, 4));
        assert_eq!(r.i32().unwrap(), 3);
        assert_eq!(r.string().unwrap(), b"group");
        assert_eq!(
            &out[out.len() - 16..out.len() - 4],
            &[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 20]
        );
    }

    #[test]
    fn leader_moves_are_retried_and_lost_offsets_are_not() {
        assert_eq!(PartitionError::of(6), PartitionError::Retry);
        assert_eq!(PartitionError::of(1), PartitionError::OffsetOutOfRange);
        assert_eq!(PartitionError::of(29), PartitionError::Unauthorized);
        assert_eq!(PartitionError::of(87), PartitionError::Fatal);
    }
}

//! How a table's partition ranges are shared among the drain threads.
//!
//! Whole partitions per thread leave threads idle whenever the partitions
//! do not divide evenly (5 partitions on 4 threads: one thread reads two
//! and the others wait for it; a 1-partition topic uses one thread). So
//! the offsets to read are cut into chunks of about equal size: a chunk is
//! a run of consecutive pieces, and a partition may be cut into pieces
//! read by different threads (each its own consumer, starting at its
//! piece's first offset). No chunk is made smaller than
//! [`MIN_CHUNK_MESSAGES`], so small syncs stay on one consumer.
//!
//! Afterwards the pieces of a partition are merged back into one
//! [`DrainedPartition`]: the next sync starts where the first piece that
//! stopped short of its end stopped (only the last piece can: a drain
//! stops early only at the end of the log), else at the last piece's end.

use topicberg_kafka::{DrainedPartition, PartitionRange};

/// The smallest chunk worth its own consumer.
pub const MIN_CHUNK_MESSAGES: i64 = 100_000;

/// [`MIN_CHUNK_MESSAGES`], or `TOPICBERG_MIN_CHUNK_MESSAGES` (a test hook:
/// the integration tests cut small topics into pieces with it).
pub fn min_chunk_messages() -> i64 {
    crate::hooks::hooks()
        .min_chunk_messages
        .unwrap_or(MIN_CHUNK_MESSAGES)
}

/// Cuts `ranges` (one topic) into at most `threads` chunks of about the
/// same number of offsets, none smaller than `min_chunk` unless there is
/// only one.
pub fn split_ranges(
    ranges: &[PartitionRange],
    threads: usize,
    min_chunk: i64,
) -> Vec<Vec<PartitionRange>> {
    let total: i64 = ranges.iter().map(|r| (r.end - r.start).max(0)).sum();
    if ranges.is_empty() {
        return Vec::new();
    }
    let by_size = (total / min_chunk.max(1)).max(1) as usize;
    let chunks = threads.max(1).min(by_size);
    if chunks == 1 {
        return vec![ranges.to_vec()];
    }
    let target = (total + chunks as i64 - 1) / chunks as i64;
    let mut out: Vec<Vec<PartitionRange>> = vec![Vec::new()];
    let mut room = target;
    for range in ranges {
        let mut start = range.start;
        while start < range.end {
            if room == 0 {
                out.push(Vec::new());
                room = target;
            }
            let take = (range.end - start).min(room);
            out.last_mut()
                .expect("one chunk at least")
                .push(PartitionRange {
                    topic: range.topic.clone(),
                    partition: range.partition,
                    start,
                    end: start + take,
                });
            start += take;
            room -= take;
        }
    }
    out
}

/// Merges the pieces of each partition (piece range, how it ended) into
/// one result per partition, sorted by topic and partition.
pub fn merge_pieces(mut pieces: Vec<(PartitionRange, DrainedPartition)>) -> Vec<DrainedPartition> {
    pieces.sort_by(|a, b| {
        (&a.0.topic, a.0.partition, a.0.start).cmp(&(&b.0.topic, b.0.partition, b.0.start))
    });
    let mut out: Vec<DrainedPartition> = Vec::new();
    // Whether the partition being merged had a piece stop short.
    let mut short = false;
    for (range, drained) in pieces {
        match out.last_mut() {
            Some(last) if last.topic == range.topic && last.partition == range.partition => {
                last.records += drained.records;
                last.bytes += drained.bytes;
                last.newest_timestamp_ms =
                    last.newest_timestamp_ms.max(drained.newest_timestamp_ms);
                if !short {
                    last.next_offset = drained.next_offset;
                    short = drained.next_offset < range.end;
                }
            }
            _ => {
                short = drained.next_offset < range.end;
                out.push(drained);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(partition: i32, start: i64, end: i64) -> PartitionRange {
        PartitionRange {
            topic: "t".into(),
            partition,
            start,
            end,
        }
    }

    #[test]
    fn five_partitions_on_four_threads_make_four_equal_chunks() {
        let ranges: Vec<_> = (0..5).map(|p| range(p, 0, 2_000_000)).collect();
        let chunks = split_ranges(&ranges, 4, MIN_CHUNK_MESSAGES);
        assert_eq!(chunks.len(), 4);
        for chunk in &chunks {
            let size: i64 = chunk.iter().map(|r| r.end - r.start).sum();
            assert_eq!(size, 2_500_000);
            // A partition appears at most once in a chunk (one consumer).
            let mut parts: Vec<i32> = chunk.iter().map(|r| r.partition).collect();
            parts.dedup();
            assert_eq!(parts.len(), chunk.len());
        }
        // Every offset exactly once.
        let mut all: Vec<(i32, i64, i64)> = chunks
            .concat()
            .iter()
            .map(|r| (r.partition, r.start, r.end))
            .collect();
        all.sort();
        for p in 0..5 {
            let pieces: Vec<_> = all.iter().filter(|r| r.0 == p).collect();
            assert_eq!(pieces.first().unwrap().1, 0);
            assert_eq!(pieces.last().unwrap().2, 2_000_000);
            assert!(pieces.windows(2).all(|w| w[0].2 == w[1].1));
        }
    }

    #[test]
    fn one_partition_is_cut_for_several_threads_and_small_syncs_stay_whole() {
        let chunks = split_ranges(&[range(0, 100, 1_000_100)], 2, MIN_CHUNK_MESSAGES);
        assert_eq!(chunks.len(), 2);
        assert_eq!((chunks[0][0].start, chunks[0][0].end), (100, 500_100));
        assert_eq!((chunks[1][0].start, chunks[1][0].end), (500_100, 1_000_100));
        let small = split_ranges(&[range(0, 0, 12), range(1, 5, 9)], 4, MIN_CHUNK_MESSAGES);
        assert_eq!(small, vec![vec![range(0, 0, 12), range(1, 5, 9)]]);
        let some = split_ranges(&[range(0, 0, 250_000)], 8, MIN_CHUNK_MESSAGES);
        assert_eq!(some.len(), 2);
    }

    fn drained(partition: i32, next_offset: i64, records: u64) -> DrainedPartition {
        DrainedPartition {
            topic: "t".into(),
            partition,
            next_offset,
            records,
            bytes: records * 10,
            newest_timestamp_ms: None,
        }
    }

    #[test]
    fn pieces_merge_into_one_partition_result() {
        let merged = merge_pieces(vec![
            (range(0, 50, 100), drained(0, 100, 50)),
            (range(1, 0, 10), drained(1, 10, 10)),
            (range(0, 0, 50), drained(0, 50, 50)),
        ]);
        assert_eq!(merged, vec![drained(0, 100, 100), drained(1, 10, 10)]);
    }

    #[test]
    fn a_piece_that_stopped_short_holds_the_partition_there() {
        // The first piece ended at the end of the log before its end (it
        // cannot, in practice, when a later piece has messages); the next
        // sync resumes there rather than skip what it did not read.
        let merged = merge_pieces(vec![
            (range(0, 0, 50), drained(0, 40, 40)),
            (range(0, 50, 100), drained(0, 100, 50)),
        ]);
        assert_eq!(merged, vec![drained(0, 40, 90)]);
    }
}

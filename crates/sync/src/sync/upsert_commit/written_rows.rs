//! The written rows' new places, for the key index: each written key's
//! data file and position, counted from the winners file (keys in key
//! order, with their held row and stamp) and the winning rows' ranks.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use topicberg_iceberg::key_index::{NewRow, Stamp};

use crate::sync::failure::UpsertError;
use crate::sync::upsert::{KeyHash, RowSet};

/// Bytes of a winners file entry: the key, the held row (`u32`), the
/// stamp's timestamp (`i64`) and partition (`i32`), little-endian.
pub(super) const WINNER_BYTES: usize = 32;

/// A winners file entry.
pub(super) fn encode_winner(key: &KeyHash, row: u32, stamp: Stamp) -> [u8; WINNER_BYTES] {
    let mut out = [0u8; WINNER_BYTES];
    out[..16].copy_from_slice(key);
    out[16..20].copy_from_slice(&row.to_le_bytes());
    out[20..28].copy_from_slice(&stamp.timestamp.to_le_bytes());
    out[28..].copy_from_slice(&stamp.partition.to_le_bytes());
    out
}

fn decode_winner(entry: &[u8; WINNER_BYTES]) -> (KeyHash, u32, Stamp) {
    let mut key = [0u8; 16];
    key.copy_from_slice(&entry[..16]);
    let row = u32::from_le_bytes(entry[16..20].try_into().expect("4 bytes"));
    let stamp = Stamp {
        timestamp: i64::from_le_bytes(entry[20..28].try_into().expect("8 bytes")),
        partition: i32::from_le_bytes(entry[28..].try_into().expect("4 bytes")),
    };
    (key, row, stamp)
}

/// The position of a held row among the written (winning) rows: per 64
/// rows, their winners' bits and the winners before them, side by side
/// (one cache line read per row; rows come in key order, so at random).
pub(super) struct RowRanks {
    blocks: Vec<[u64; 2]>,
}

impl RowRanks {
    pub(super) fn new(winners: &RowSet) -> Self {
        let mut count = 0u64;
        let blocks = winners
            .words()
            .iter()
            .map(|word| {
                let block = [*word, count];
                count += u64::from(word.count_ones());
                block
            })
            .collect();
        RowRanks { blocks }
    }

    /// Winning rows before `row`.
    fn rank(&self, row: u32) -> u64 {
        let [word, before] = self.blocks[row as usize / 64];
        before + u64::from((word & ((1u64 << (row % 64)) - 1)).count_ones())
    }
}

/// Winners file entries read and ranked at a time: the ranks' memory
/// reads of one chunk are independent, so they overlap.
const RANK_CHUNK: usize = 4096;

/// The written rows' (key, data file number, position) in key order, read
/// back from the winners file: a row's place among the written rows is
/// its rank, and the data files hold the written rows in order.
pub(super) struct WrittenRows {
    keys: BufReader<File>,
    path: PathBuf,
    ranks: RowRanks,
    /// Written rows before each data file, and after the last.
    starts: Vec<u64>,
    /// The chunk read last: (key, rank, stamp), and how many were handed
    /// out.
    chunk: Vec<(KeyHash, u64, Stamp)>,
    next: usize,
}

/// A chunk of written rows, or why the winners file could not be read.
type WrittenChunk = Result<Vec<NewRow>, UpsertError>;

impl WrittenRows {
    pub(super) fn open(path: &Path, ranks: RowRanks, counts: &[u64]) -> Result<Self, UpsertError> {
        let file = File::open(path).map_err(UpsertError::winners_file(path))?;
        let mut starts = vec![0u64];
        for count in counts {
            starts.push(starts.last().expect("one at least") + count);
        }
        Ok(WrittenRows {
            keys: BufReader::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
            ranks,
            starts,
            chunk: Vec::with_capacity(RANK_CHUNK),
            next: 0,
        })
    }

    /// Reads and ranks the next chunk of the winners file (empty at its end).
    fn read_chunk(&mut self) -> Result<(), UpsertError> {
        self.chunk.clear();
        self.next = 0;
        let mut entry = [0u8; WINNER_BYTES];
        while self.chunk.len() < RANK_CHUNK {
            match self.keys.read_exact(&mut entry) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(UpsertError::winners_file(&self.path)(e)),
            }
            let (key, row, stamp) = decode_winner(&entry);
            self.chunk.push((key, u64::from(row), stamp));
        }
        for (_, row, _) in &mut self.chunk {
            *row = self.ranks.rank(*row as u32);
        }
        Ok(())
    }
}

impl WrittenRows {
    /// The same rows, read and ranked a chunk ahead by a thread of
    /// `scope` while the caller takes them (the key index writes them).
    /// The thread ends when the rows do or the iterator is dropped.
    pub(super) fn in_background<'scope>(
        self,
        scope: &'scope std::thread::Scope<'scope, '_>,
    ) -> impl Iterator<Item = Result<NewRow, UpsertError>> + 'scope {
        let (tx, rx) = std::sync::mpsc::sync_channel::<WrittenChunk>(2);
        scope.spawn(move || {
            let mut rows = self.peekable();
            while rows.peek().is_some() {
                let chunk: WrittenChunk = rows.by_ref().take(RANK_CHUNK).collect();
                let failed = chunk.is_err();
                if tx.send(chunk).is_err() || failed {
                    return;
                }
            }
        });
        rx.into_iter().flat_map(|chunk| {
            let rows: Box<dyn Iterator<Item = _>> = match chunk {
                Ok(rows) => Box::new(rows.into_iter().map(Ok)),
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
            rows
        })
    }
}

impl Iterator for WrittenRows {
    type Item = Result<NewRow, UpsertError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next == self.chunk.len() {
            if let Err(e) = self.read_chunk() {
                return Some(Err(e));
            }
            if self.chunk.is_empty() {
                return None;
            }
        }
        let (key, at, stamp) = self.chunk[self.next];
        self.next += 1;
        // The data file whose rows include `at`.
        let file = self.starts.partition_point(|start| *start <= at) - 1;
        if file + 1 >= self.starts.len() {
            return Some(Err(UpsertError::RowBeyondFiles(at)));
        }
        Some(Ok(NewRow {
            key,
            file,
            pos: at - self.starts[file],
            stamp,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_rank_counts_the_winning_rows_before_it() {
        let rows = [0u32, 3, 63, 64, 65, 200];
        let mut winners = RowSet::new(201);
        rows.iter().for_each(|r| winners.insert(*r));
        let ranks = RowRanks::new(&winners);
        let got: Vec<u64> = rows.iter().map(|r| ranks.rank(*r)).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn written_rows_map_keys_in_key_order_to_their_file_and_position() {
        // Held rows 1, 4, 5 and 9 won; written in row order into two files
        // of 3 and 1 rows. The winners file lists them in key order.
        let mut winners = RowSet::new(10);
        [1u32, 4, 5, 9].iter().for_each(|r| winners.insert(*r));
        let ranks = RowRanks::new(&winners);
        let path = std::env::temp_dir().join(format!("winners-{}.bin", uuid::Uuid::new_v4()));
        let mut bytes = Vec::new();
        for (key, row) in [(1u8, 9u32), (2, 4), (3, 1), (4, 5)] {
            let stamp = Stamp {
                timestamp: i64::from(row) * 1_000,
                partition: i32::from(key),
            };
            bytes.extend_from_slice(&encode_winner(&[key; 16], row, stamp));
        }
        std::fs::write(&path, bytes).unwrap();
        let rows: Vec<_> = WrittenRows::open(&path, ranks, &[3, 1])
            .unwrap()
            .map(|r| {
                r.map(|r| {
                    (
                        r.key[0],
                        r.file,
                        r.pos,
                        r.stamp.timestamp,
                        r.stamp.partition,
                    )
                })
            })
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            vec![
                (1, 1, 0, 9_000, 1),
                (2, 0, 1, 4_000, 2),
                (3, 0, 0, 1_000, 3),
                (4, 0, 2, 5_000, 4)
            ]
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn written_rows_rank_across_chunks_of_the_winners_file() {
        // Odd held rows win: 3 * RANK_CHUNK of them, listed in reverse
        // (key order is not row order), in files of 5,000 rows.
        let n = (3 * RANK_CHUNK) as u32;
        let mut winners = RowSet::new(2 * n);
        let mut bytes = Vec::new();
        for i in (0..n).rev() {
            winners.insert(2 * i + 1);
            let stamp = Stamp {
                timestamp: i64::from(i),
                partition: 0,
            };
            bytes.extend_from_slice(&encode_winner(
                &u128::from(i).to_be_bytes(),
                2 * i + 1,
                stamp,
            ));
        }
        let ranks = RowRanks::new(&winners);
        let path = std::env::temp_dir().join(format!("winners-{}.bin", uuid::Uuid::new_v4()));
        std::fs::write(&path, bytes).unwrap();
        let counts: Vec<u64> = (0..u64::from(n).div_ceil(5000))
            .map(|f| (u64::from(n) - f * 5000).min(5000))
            .collect();
        let rows: Vec<_> = std::thread::scope(|scope| {
            WrittenRows::open(&path, ranks, &counts)
                .unwrap()
                .in_background(scope)
                .collect::<Result<_, _>>()
                .unwrap()
        });
        std::fs::remove_file(&path).unwrap();
        assert_eq!(rows.len(), n as usize);
        for row in rows {
            let i = u128::from_be_bytes(row.key) as u64;
            assert_eq!((row.file as u64, row.pos), (i / 5000, i % 5000));
            assert_eq!(row.stamp.timestamp, i as i64);
        }
    }
}

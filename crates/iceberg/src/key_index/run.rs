//! One sorted run of the key index: an immutable file of entries in
//! ascending key order, each key at most once.
//!
//! Layout (all integers little-endian):
//! - entries, 40 bytes each: the key (16 bytes), the data file id (`u32`,
//!   [`TOMBSTONE`] for a key deleted by this run), the row position (`u64`),
//!   the row's [`Stamp`] (timestamp `i64`, partition `i32`);
//! - fences: the first key of each block of [`BLOCK_ENTRIES`] entries;
//! - footer: the entry count (`u64`) and [`MAGIC`].
//!
//! A lookup finds the block by the fences (held in memory: 16 bytes per
//! 1,024 keys) and reads that one block (40 KiB); a merge streams the
//! entries block by block. Nothing else is held in memory.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{IndexedRow, Stamp};

/// Bytes of one entry.
pub(crate) const ENTRY_BYTES: usize = 40;
/// Entries per block (the unit a lookup reads).
pub(crate) const BLOCK_ENTRIES: usize = 1024;
/// The file id of an entry that deletes its key.
pub(crate) const TOMBSTONE: u32 = u32::MAX;
const MAGIC: &[u8; 8] = b"TBKRUN02";
const FOOTER_BYTES: u64 = 16;

/// One entry: a key and its row, or `None` (this run deletes the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: [u8; 16],
    pub row: Option<IndexedRow>,
}

impl Entry {
    fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut out = [0u8; ENTRY_BYTES];
        out[..16].copy_from_slice(&self.key);
        let row = self.row.unwrap_or(IndexedRow {
            file: TOMBSTONE,
            pos: 0,
            stamp: Stamp::UNKNOWN,
        });
        out[16..20].copy_from_slice(&row.file.to_le_bytes());
        out[20..28].copy_from_slice(&row.pos.to_le_bytes());
        out[28..36].copy_from_slice(&row.stamp.timestamp.to_le_bytes());
        out[36..].copy_from_slice(&row.stamp.partition.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Entry {
        let mut key = [0u8; 16];
        key.copy_from_slice(&bytes[..16]);
        let file = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
        let pos = u64::from_le_bytes(bytes[20..28].try_into().expect("8 bytes"));
        let timestamp = i64::from_le_bytes(bytes[28..36].try_into().expect("8 bytes"));
        let partition = i32::from_le_bytes(bytes[36..40].try_into().expect("4 bytes"));
        Entry {
            key,
            row: (file != TOMBSTONE).then_some(IndexedRow {
                file,
                pos,
                stamp: Stamp {
                    timestamp,
                    partition,
                },
            }),
        }
    }
}

/// Entries between two starts of the written bytes' writeback (7 MiB).
const WRITEBACK_ENTRIES: u64 = 1 << 18;

/// Writes a new run; entries must come in strictly ascending key order.
/// The file's writeback to disk is started as it grows, so the sync at
/// [`RunWriter::finish`] waits for little (it waited about 0.26 s for a
/// 9-million-key run).
pub(crate) struct RunWriter {
    out: BufWriter<File>,
    path: PathBuf,
    entries: u64,
    /// Bytes whose writeback was started.
    written_back: u64,
    fences: Vec<[u8; 16]>,
    last: Option<[u8; 16]>,
}

impl RunWriter {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            out: BufWriter::with_capacity(256 * 1024, File::create(path)?),
            path: path.to_path_buf(),
            entries: 0,
            written_back: 0,
            fences: Vec::new(),
            last: None,
        })
    }

    pub fn push(&mut self, entry: &Entry) -> std::io::Result<()> {
        if self.last.is_some_and(|last| last >= entry.key) {
            return Err(std::io::Error::other(format!(
                "{}: keys out of order",
                self.path.display()
            )));
        }
        if self.entries.is_multiple_of(BLOCK_ENTRIES as u64) {
            self.fences.push(entry.key);
        }
        self.out.write_all(&entry.encode())?;
        self.entries += 1;
        self.last = Some(entry.key);
        if self.entries.is_multiple_of(WRITEBACK_ENTRIES) {
            self.start_writeback();
        }
        Ok(())
    }

    /// Starts writing the bytes the file has so far to disk, without
    /// waiting (Linux; elsewhere the sync at the end does it all).
    fn start_writeback(&mut self) {
        let in_file = self.entries * ENTRY_BYTES as u64 - self.out.buffer().len() as u64;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let (from, len) = (self.written_back, in_file - self.written_back);
            // SAFETY: a plain syscall on an open descriptor; no memory is
            // passed. A failure only means the final sync does the work.
            unsafe {
                libc::sync_file_range(
                    self.out.get_ref().as_raw_fd(),
                    from as libc::off64_t,
                    len as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                );
            }
        }
        self.written_back = in_file;
    }

    /// Writes the fences and footer and syncs the file; the entry count.
    pub fn finish(mut self) -> std::io::Result<u64> {
        for fence in &self.fences {
            self.out.write_all(fence)?;
        }
        self.out.write_all(&self.entries.to_le_bytes())?;
        self.out.write_all(MAGIC)?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(self.entries)
    }
}

/// A run, open for lookups and merges.
#[derive(Debug)]
pub(crate) struct Run {
    pub seq: u64,
    pub path: PathBuf,
    file: File,
    entries: u64,
    fences: Vec<[u8; 16]>,
}

impl Run {
    /// Opens a run, checking its footer and size.
    pub fn open(path: &Path, seq: u64) -> std::io::Result<Run> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let bad = |why: &str| std::io::Error::other(format!("{}: {why}", path.display()));
        if len < FOOTER_BYTES {
            return Err(bad("too short for a run"));
        }
        let mut footer = [0u8; FOOTER_BYTES as usize];
        file.read_exact_at(&mut footer, len - FOOTER_BYTES)?;
        if &footer[8..] != MAGIC {
            return Err(bad("not a run of the key index"));
        }
        let entries = u64::from_le_bytes(footer[..8].try_into().expect("8 bytes"));
        let blocks = entries.div_ceil(BLOCK_ENTRIES as u64);
        let entry_bytes = entries.checked_mul(ENTRY_BYTES as u64);
        if entry_bytes.and_then(|b| b.checked_add(blocks * 16 + FOOTER_BYTES)) != Some(len) {
            return Err(bad("its size does not match its entry count"));
        }
        let mut raw = vec![0u8; blocks as usize * 16];
        file.read_exact_at(&mut raw, entries * ENTRY_BYTES as u64)?;
        let fences = raw
            .chunks_exact(16)
            .map(|c| c.try_into().expect("16 bytes"))
            .collect();
        Ok(Run {
            seq,
            path: path.to_path_buf(),
            file,
            entries,
            fences,
        })
    }

    /// Entries (keys and tombstones).
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// The block that would hold `key`, if any.
    pub fn block_of(&self, key: &[u8; 16]) -> Option<usize> {
        self.fences.partition_point(|f| f <= key).checked_sub(1)
    }

    /// Reads block `block` into `buf`.
    pub fn read_block(&self, block: usize, buf: &mut Vec<u8>) -> std::io::Result<()> {
        let first = (block * BLOCK_ENTRIES) as u64;
        let n = (self.entries - first).min(BLOCK_ENTRIES as u64) as usize;
        buf.resize(n * ENTRY_BYTES, 0);
        self.file.read_exact_at(buf, first * ENTRY_BYTES as u64)
    }

    /// Whether `key` lies between the first and last keys of a block read
    /// by [`Self::read_block`] (then no other block can hold it).
    pub fn covers(block: &[u8], key: &[u8; 16]) -> bool {
        let n = block.len();
        n >= ENTRY_BYTES
            && block[..16] <= key[..]
            && key[..] <= block[n - ENTRY_BYTES..n - ENTRY_BYTES + 16]
    }

    /// The entry of `key` in a block read by [`Self::read_block`].
    pub fn find_in_block(block: &[u8], key: &[u8; 16]) -> Option<Entry> {
        let n = block.len() / ENTRY_BYTES;
        let at = |i: usize| &block[i * ENTRY_BYTES..(i + 1) * ENTRY_BYTES];
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match at(mid)[..16].cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(Entry::decode(at(mid))),
            }
        }
        None
    }

    /// The entries in key order, read a block at a time.
    pub fn iter(&self) -> RunIter<'_> {
        RunIter {
            run: self,
            block: 0,
            buf: Vec::new(),
            at: 0,
        }
    }
}

/// Streams a run's entries.
pub(crate) struct RunIter<'a> {
    run: &'a Run,
    block: usize,
    buf: Vec<u8>,
    at: usize,
}

impl Iterator for RunIter<'_> {
    type Item = std::io::Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.buf.len() {
            if (self.block * BLOCK_ENTRIES) as u64 >= self.run.entries {
                return None;
            }
            if let Err(e) = self.run.read_block(self.block, &mut self.buf) {
                self.block = usize::MAX / BLOCK_ENTRIES;
                return Some(Err(e));
            }
            self.block += 1;
            self.at = 0;
        }
        let entry = Entry::decode(&self.buf[self.at..self.at + ENTRY_BYTES]);
        self.at += ENTRY_BYTES;
        Some(Ok(entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[12..].copy_from_slice(&i.to_be_bytes());
        k
    }

    fn row(i: u32) -> IndexedRow {
        IndexedRow {
            file: i % 3,
            pos: u64::from(i) * 10,
            stamp: Stamp {
                timestamp: i64::from(i) * 1_000 - 7,
                partition: (i % 12) as i32,
            },
        }
    }

    #[test]
    fn a_run_written_is_found_block_by_block_and_streamed_back() {
        let dir = std::env::temp_dir().join(format!("tb-run-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.run");
        let mut w = RunWriter::create(&path).unwrap();
        let n = BLOCK_ENTRIES as u32 * 3 + 7;
        for i in 0..n {
            let row = (i % 5 != 0).then_some(row(i));
            w.push(&Entry {
                key: key(i * 2),
                row,
            })
            .unwrap();
        }
        assert!(w
            .push(&Entry {
                key: key(0),
                row: None
            })
            .is_err());
        assert_eq!(w.finish().unwrap(), u64::from(n));
        let run = Run::open(&path, 1).unwrap();
        let mut buf = Vec::new();
        for i in [0, 1, 2, 1023, 2048, n * 2 - 2, n * 2 - 1, n * 2] {
            let found = run.block_of(&key(i)).and_then(|b| {
                run.read_block(b, &mut buf).unwrap();
                Run::find_in_block(&buf, &key(i))
            });
            let want = (i % 2 == 0 && i / 2 < n).then(|| Entry {
                key: key(i),
                row: (i / 2 % 5 != 0).then_some(row(i / 2)),
            });
            assert_eq!(found, want, "key {i}");
        }
        let all: Vec<Entry> = run.iter().map(Result::unwrap).collect();
        assert_eq!(all.len(), n as usize);
        assert!(all.windows(2).all(|w| w[0].key < w[1].key));
        // A truncated file is refused.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
        assert!(Run::open(&path, 1).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! A follower's local spill: while the catalog or the object store is down,
//! the follower keeps reading its partitions ahead into files on this
//! machine, up to a bound, and the rounds after the outage read those
//! ranges from the files instead of Kafka (through the same batch reader).
//!
//! The spill is a cache of Kafka, never a record of progress: offsets move
//! only with a table's commit; a range is read from the spill only when
//! the spill holds it from the range's first offset on, and from Kafka
//! otherwise; what a commit covers is deleted ([`Spill::release`]); the
//! folder is emptied when a follower starts. So a lost or partial spill
//! costs a read from Kafka again, never a message.
//!
//! What is kept is Kafka's own bytes: each Fetch response's record batches
//! for a partition, as the broker sent them, with the response's aborted
//! transactions; reading them back goes through the drain's codecs,
//! `read_committed` filter and offset checks unchanged. Filling it is the
//! batch reader's ([`crate::fill_spill`]).
//!
//! On disk, `<folder>/<n>.spill`, one file (a segment) per partition per
//! fill, each a sequence of frames: `from: i64, next: i64, aborted: u32,
//! len: u32` (little endian), the aborted transactions (producer id, first
//! offset: 16 bytes each), then `len` bytes of record batches.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::{KafkaError, KafkaErrorKind};

/// A frame's fixed header: from, next, aborted count, length.
const HEADER: usize = 8 + 8 + 4 + 4;

/// A follower's spill folder; see the module doc.
#[derive(Debug)]
pub struct Spill {
    folder: PathBuf,
    limit: u64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Each partition's segments, in offset order and contiguous.
    partitions: BTreeMap<(String, i32), Vec<Segment>>,
    bytes: u64,
    /// Names the next segment file.
    serial: u64,
    /// A fetch did not fit in what is left: full until a commit frees
    /// some or the follower's tables commit again ([`Spill::reopen`]).
    refused: bool,
}

/// One file of one partition's frames.
#[derive(Debug, Clone)]
struct Segment {
    path: PathBuf,
    frames: Vec<Frame>,
    bytes: u64,
}

/// Where a frame is in its segment, and the offsets it moves over.
#[derive(Debug, Clone, Copy)]
struct Frame {
    from: i64,
    next: i64,
    pos: u64,
}

impl Segment {
    fn from(&self) -> i64 {
        self.frames.first().map_or(i64::MAX, |f| f.from)
    }

    fn next(&self) -> i64 {
        self.frames.last().map_or(i64::MIN, |f| f.next)
    }
}

/// What the spill holds of one topic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpilledTopic {
    /// Bytes in the spill's files.
    pub bytes: u64,
    /// Offsets the spill moves over, summed over the partitions (records,
    /// plus transaction markers).
    pub offsets: u64,
}

impl Spill {
    /// An empty spill in `folder` (what it held before is deleted), holding
    /// at most about `limit` bytes.
    pub fn create(folder: &Path, limit: u64) -> Result<Spill, KafkaError> {
        if folder.exists() {
            std::fs::remove_dir_all(folder).map_err(|e| disk("emptying", folder, e))?;
        }
        std::fs::create_dir_all(folder).map_err(|e| disk("creating", folder, e))?;
        Ok(Spill {
            folder: folder.to_path_buf(),
            limit,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most the spill holds, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes in the spill now.
    pub fn bytes(&self) -> u64 {
        self.state().bytes
    }

    /// Whether the spill holds its limit, or the last fill's next fetch
    /// did not fit in what was left: fetching ahead stops.
    pub fn full(&self) -> bool {
        let state = self.state();
        state.refused || state.bytes >= self.limit
    }

    /// The next fetch does not fit: the spill counts as full.
    pub(crate) fn refuse_more(&self) {
        self.state().refused = true;
    }

    /// The tables committed again: the next outage may read ahead into
    /// what is left.
    pub fn reopen(&self) {
        self.state().refused = false;
    }

    /// What the spill holds of each topic.
    pub fn topics(&self) -> BTreeMap<String, SpilledTopic> {
        let mut out: BTreeMap<String, SpilledTopic> = BTreeMap::new();
        for ((topic, _), segments) in &self.state().partitions {
            let entry = out.entry(topic.clone()).or_default();
            for segment in segments {
                entry.bytes += segment.bytes;
                entry.offsets += (segment.next() - segment.from()).max(0) as u64;
            }
        }
        out
    }

    /// The offsets `[from, next)` the spill holds of a partition.
    pub fn range(&self, topic: &str, partition: i32) -> Option<(i64, i64)> {
        let state = self.state();
        let segments = state.partitions.get(&(topic.to_string(), partition))?;
        Some((segments.first()?.from(), segments.last()?.next()))
    }

    /// Deletes what the spill holds of a partition below `committed` (the
    /// partition's next offset in its table, after a commit).
    pub fn release(&self, topic: &str, partition: i32, committed: i64) {
        let mut state = self.state();
        let key = (topic.to_string(), partition);
        let Some(segments) = state.partitions.get_mut(&key) else {
            return;
        };
        let mut freed = 0;
        segments.retain(|s| {
            let keep = s.next() > committed;
            if !keep {
                freed += s.bytes;
                let _ = std::fs::remove_file(&s.path);
            }
            keep
        });
        if segments.is_empty() {
            state.partitions.remove(&key);
        }
        state.bytes = state.bytes.saturating_sub(freed);
        state.refused &= freed == 0;
    }

    /// Deletes everything the spill holds (a partition it could not read
    /// back; the next round reads Kafka).
    pub fn clear(&self) {
        let mut state = self.state();
        for segment in state.partitions.values().flatten() {
            let _ = std::fs::remove_file(&segment.path);
        }
        state.partitions.clear();
        state.bytes = 0;
        state.refused = false;
    }

    /// A new segment for `partition`, starting where the spill ends.
    pub(crate) fn writer(&self, topic: &str, partition: i32) -> Result<SegmentWriter, KafkaError> {
        let serial = {
            let mut state = self.state();
            state.serial += 1;
            state.serial
        };
        let path = self.folder.join(format!("{serial}.spill"));
        let file = File::create(&path).map_err(|e| disk("creating", &path, e))?;
        Ok(SegmentWriter {
            key: (topic.to_string(), partition),
            file: BufWriter::with_capacity(1 << 20, file),
            segment: Segment {
                path,
                frames: Vec::new(),
                bytes: 0,
            },
        })
    }

    /// Adds a written segment to the spill (an empty one is deleted).
    pub(crate) fn keep(&self, writer: SegmentWriter) -> Result<u64, KafkaError> {
        let SegmentWriter { key, file, segment } = writer;
        let path = segment.path.clone();
        if let Err(e) = file.into_inner() {
            let _ = std::fs::remove_file(&path);
            return Err(disk("writing", &path, e.into_error()));
        }
        if segment.frames.is_empty() {
            let _ = std::fs::remove_file(&path);
            return Ok(0);
        }
        let mut state = self.state();
        let added = segment.bytes;
        let segments = state.partitions.entry(key).or_default();
        if segments
            .last()
            .is_some_and(|last| last.next() != segment.from())
        {
            // Not contiguous with what is held (a commit moved past it):
            // the older segments can no longer serve a range's start.
            for old in segments.drain(..) {
                let _ = std::fs::remove_file(&old.path);
            }
        }
        segments.push(segment);
        state.bytes = state.partitions.values().flatten().map(|s| s.bytes).sum();
        Ok(added)
    }

    /// A reader of a partition's frames from `from` on, when the spill
    /// holds `from` (its first frame starts at or before it, its last ends
    /// after it).
    pub(crate) fn reader(&self, topic: &str, partition: i32, from: i64) -> Option<FrameReader> {
        let state = self.state();
        let segments = state.partitions.get(&(topic.to_string(), partition))?;
        let (first, last) = (segments.first()?, segments.last()?);
        if first.from() > from || last.next() <= from {
            return None;
        }
        let frames = segments
            .iter()
            .flat_map(|s| s.frames.iter().map(move |f| (s.path.clone(), *f)))
            .filter(|(_, f)| f.next > from)
            .collect();
        Some(FrameReader {
            frames,
            at: 0,
            open: None,
            records: Vec::new(),
            aborted: Vec::new(),
        })
    }
}

/// Writes one segment's frames.
pub(crate) struct SegmentWriter {
    key: (String, i32),
    file: BufWriter<File>,
    segment: Segment,
}

impl SegmentWriter {
    /// Appends the record batches a fetch returned for `from..next`.
    pub(crate) fn append(
        &mut self,
        from: i64,
        next: i64,
        aborted: &[(i64, i64)],
        records: &[u8],
    ) -> Result<(), KafkaError> {
        let mut header = [0u8; HEADER];
        header[0..8].copy_from_slice(&from.to_le_bytes());
        header[8..16].copy_from_slice(&next.to_le_bytes());
        header[16..20].copy_from_slice(&(aborted.len() as u32).to_le_bytes());
        header[20..24].copy_from_slice(&(records.len() as u32).to_le_bytes());
        let path = &self.segment.path;
        let mut write = |bytes: &[u8]| {
            self.file
                .write_all(bytes)
                .map_err(|e| disk("writing", path, e))
        };
        write(&header)?;
        for (producer, first) in aborted {
            write(&producer.to_le_bytes())?;
            write(&first.to_le_bytes())?;
        }
        write(records)?;
        self.segment.frames.push(Frame {
            from,
            next,
            pos: self.segment.bytes,
        });
        self.segment.bytes += frame_size(aborted, records);
        Ok(())
    }
}

/// The bytes a frame of `records` takes in its segment.
pub(crate) fn frame_size(aborted: &[(i64, i64)], records: &[u8]) -> u64 {
    (HEADER + aborted.len() * 16 + records.len()) as u64
}

/// One frame read back.
pub(crate) struct SpilledFrame<'a> {
    /// The offset the partition is read from after these records.
    pub next: i64,
    /// The aborted transactions of the fetch.
    pub aborted: &'a [(i64, i64)],
    /// The record batches.
    pub records: &'a [u8],
}

/// Reads a partition's frames in order, into reused buffers.
pub(crate) struct FrameReader {
    frames: Vec<(PathBuf, Frame)>,
    at: usize,
    open: Option<(PathBuf, File)>,
    records: Vec<u8>,
    aborted: Vec<(i64, i64)>,
}

impl FrameReader {
    /// The next frame, `None` after the last.
    pub(crate) fn next_frame(&mut self) -> Result<Option<SpilledFrame<'_>>, KafkaError> {
        let Some((path, frame)) = self.frames.get(self.at).cloned() else {
            return Ok(None);
        };
        self.at += 1;
        if self.open.as_ref().is_none_or(|(open, _)| *open != path) {
            let file = File::open(&path).map_err(|e| disk("opening", &path, e))?;
            self.open = Some((path.clone(), file));
        }
        let (_, file) = self.open.as_mut().expect("opened above");
        let read = |e| disk("reading", &path, e);
        file.seek(SeekFrom::Start(frame.pos)).map_err(read)?;
        let mut header = [0u8; HEADER];
        file.read_exact(&mut header).map_err(read)?;
        let field = |at: usize| i64::from_le_bytes(header[at..at + 8].try_into().expect("8"));
        let count = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4"));
        if field(0) != frame.from || field(8) != frame.next {
            return Err(disk(
                "reading",
                &path,
                std::io::Error::other("a frame's offsets differ from what was written"),
            ));
        }
        let (aborted, len) = (count(16) as usize, count(20) as usize);
        let mut pairs = vec![0u8; aborted * 16];
        file.read_exact(&mut pairs).map_err(read)?;
        self.aborted.clear();
        self.aborted.extend(pairs.chunks_exact(16).map(|p| {
            let half = |at: usize| i64::from_le_bytes(p[at..at + 8].try_into().expect("8"));
            (half(0), half(8))
        }));
        self.records.resize(len, 0);
        file.read_exact(&mut self.records).map_err(read)?;
        Ok(Some(SpilledFrame {
            next: frame.next,
            aborted: &self.aborted,
            records: &self.records,
        }))
    }
}

/// A failure of the spill's files.
fn disk(step: &str, path: &Path, e: std::io::Error) -> KafkaError {
    KafkaError::new(
        KafkaErrorKind::Spill,
        format!("{step} the spill file {}", path.display()),
        e,
    )
}

#[cfg(test)]
mod tests;

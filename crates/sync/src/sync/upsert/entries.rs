//! The (key, version, row) entry of every message of an upsert sync, and
//! the winner per key found from them with memory bounded by a constant.
//!
//! Entries are kept in memory up to [`MEMORY_ENTRIES`]; past that, all of
//! them go to 256 bucket files on local disk by the key's first byte (so a
//! bucket holds about 1/256 of the keys). Resolving reads one bucket at a
//! time, sorts it by key (stable, so a key's entries stay in arrival order)
//! and folds each key's entries into its winner: keys come out in
//! ascending order, which also makes the key index lookups sequential.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::{KeyHash, Part, Slot, SpillError, Version, VersionOrder};

/// Entries held in memory before spilling to the bucket files (40 MiB).
pub const MEMORY_ENTRIES: usize = 1 << 20;

/// [`MEMORY_ENTRIES`], or `TOPICBERG_UPSERT_MEMORY_ENTRIES` (a test hook:
/// the integration tests make small syncs spill with it).
fn memory_entries() -> usize {
    crate::hooks::hooks()
        .upsert_memory_entries
        .unwrap_or(MEMORY_ENTRIES)
}
const BUCKETS: usize = 256;
const ENTRY_BYTES: usize = 40;
/// The row number standing for a tombstone.
const TOMBSTONE: u32 = u32::MAX;

/// One message of the sync: its key, where it is in the stream and which
/// held row it is (or a tombstone).
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub key: KeyHash,
    pub version: Version,
    pub row: u32,
}

impl Entry {
    pub fn slot(&self) -> Slot {
        if self.row == TOMBSTONE {
            Slot::Tombstone
        } else {
            Slot::Row(self.row)
        }
    }

    pub fn row_or_tombstone(slot: Slot) -> u32 {
        match slot {
            Slot::Row(row) => row,
            Slot::Tombstone => TOMBSTONE,
        }
    }

    fn encode(&self, out: &mut [u8; ENTRY_BYTES]) {
        out[..16].copy_from_slice(&self.key);
        out[16..24].copy_from_slice(&self.version.timestamp.to_le_bytes());
        out[24..32].copy_from_slice(&self.version.offset.to_le_bytes());
        out[32..36].copy_from_slice(&self.version.partition.to_le_bytes());
        out[36..40].copy_from_slice(&self.row.to_le_bytes());
    }

    fn decode(b: &[u8; ENTRY_BYTES]) -> Self {
        let mut key = [0u8; 16];
        key.copy_from_slice(&b[..16]);
        let i64_at = |i: usize| i64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Entry {
            key,
            version: Version {
                timestamp: i64_at(16),
                offset: i64_at(24),
                partition: u32_at(32) as i32,
            },
            row: u32_at(36),
        }
    }
}

/// Every entry of one upsert table's sync.
pub(super) struct Entries {
    dir: PathBuf,
    limit: usize,
    memory: Vec<Entry>,
    /// The bucket files' writers while entries are taken; closed (and the
    /// memory released) once the winners are asked for.
    buckets: Option<Vec<BufWriter<File>>>,
    /// Whether entries went to the bucket files.
    spilled: bool,
    count: u64,
    /// How one key's versions are ordered.
    order: VersionOrder,
}

impl Entries {
    pub fn new(dir: &Path, order: VersionOrder) -> Self {
        Entries {
            order,
            dir: dir.to_path_buf(),
            limit: memory_entries(),
            memory: Vec::new(),
            buckets: None,
            spilled: false,
            count: 0,
        }
    }

    /// Entries taken so far.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether entries went to disk.
    pub fn spilled(&self) -> bool {
        self.spilled
    }

    pub fn push(&mut self, entry: Entry) -> Result<(), SpillError> {
        self.memory.push(entry);
        self.count += 1;
        if self.memory.len() >= self.limit {
            self.spill()?;
        }
        Ok(())
    }

    fn bucket_path(&self, bucket: usize) -> PathBuf {
        self.dir.join(format!("entries-{bucket:03}"))
    }

    fn spill(&mut self) -> Result<(), SpillError> {
        if self.buckets.is_none() {
            let mut files = Vec::with_capacity(BUCKETS);
            for bucket in 0..BUCKETS {
                let path = self.bucket_path(bucket);
                // Appended to: the folder is new, and entries taken after
                // the writers were closed add to what is there.
                let file = File::options()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| SpillError::io(&path, e))?;
                files.push(BufWriter::with_capacity(64 * 1024, file));
            }
            self.buckets = Some(files);
            self.spilled = true;
        }
        let dir = self.dir.clone();
        let buckets = self.buckets.as_mut().expect("opened above");
        let mut bytes = [0u8; ENTRY_BYTES];
        for entry in self.memory.drain(..) {
            entry.encode(&mut bytes);
            buckets[entry.key[0] as usize]
                .write_all(&bytes)
                .map_err(|e| SpillError::io(&dir, e))?;
        }
        Ok(())
    }

    /// Calls `f` with every key's winning entry, keys in ascending order,
    /// and all of the key's entries (in arrival order).
    /// Can be called again (a commit attempt that must be recomputed).
    pub fn for_each_winner<E: From<SpillError>>(
        &mut self,
        mut f: impl FnMut(&KeyHash, Slot, Version, &[Part], &[Entry]) -> Result<(), E>,
    ) -> Result<(), E> {
        if !self.spilled() {
            let mut sorted = self.memory.clone();
            return resolve_sorted(&mut sorted, self.order, &mut f);
        }
        if !self.memory.is_empty() {
            self.spill()?;
        }
        // The in-memory entries (up to 40 MiB) and the writers' buffers (16
        // MiB) are released before the winning rows are written.
        self.memory = Vec::new();
        for mut file in self.buckets.take().into_iter().flatten() {
            file.flush().map_err(|e| SpillError::io(&self.dir, e))?;
        }
        // One thread reads and sorts the next bucket while this one folds
        // the last into winners and hands them to `f`.
        let paths: Vec<PathBuf> = (0..BUCKETS).map(|b| self.bucket_path(b)).collect();
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            scope.spawn(move || {
                for path in paths {
                    let bucket = read_bucket(&path).map(|mut bucket| {
                        bucket.sort_by_key(|e| e.key);
                        bucket
                    });
                    let failed = bucket.is_err();
                    if tx.send(bucket).is_err() || failed {
                        return;
                    }
                }
            });
            for bucket in rx {
                fold_sorted(&bucket.map_err(E::from)?, self.order, &mut f)?;
            }
            Ok(())
        })
    }
}

/// Whether a key's entries hold a row (not only tombstones).
pub(super) fn had_row(group: &[Entry]) -> bool {
    group.iter().any(|e| e.slot() != Slot::Tombstone)
}

/// A bucket file's entries, in the order they were written.
fn read_bucket(path: &Path) -> Result<Vec<Entry>, SpillError> {
    let file = File::open(path).map_err(|e| SpillError::io(path, e))?;
    let len = file.metadata().map_err(|e| SpillError::io(path, e))?.len() as usize;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut bucket = Vec::with_capacity(len / ENTRY_BYTES);
    let mut bytes = [0u8; ENTRY_BYTES];
    loop {
        match reader.read_exact(&mut bytes) {
            Ok(()) => bucket.push(Entry::decode(&bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(bucket),
            Err(e) => return Err(SpillError::io(path, e)),
        }
    }
}

/// Sorts entries by key (stable: a key's entries keep their arrival order)
/// and hands each key's winner to `f`.
fn resolve_sorted<E>(
    entries: &mut [Entry],
    order: VersionOrder,
    f: &mut impl FnMut(&KeyHash, Slot, Version, &[Part], &[Entry]) -> Result<(), E>,
) -> Result<(), E> {
    entries.sort_by_key(|e| e.key);
    fold_sorted(entries, order, f)
}

/// The later of two entries of one key by arrival: within a partition
/// the higher offset, and a tombstone keeps the higher of the two orders
/// (a Kafka tombstone after a change stream's delete, which has no log
/// position of its own, orders as the delete did against the key's other
/// partitions); across partitions [`Version::supersedes`].
fn later(winner: Entry, next: Entry) -> Entry {
    let (a, b) = (winner.version, next.version);
    if a.partition != b.partition {
        return if b.supersedes(&a) { next } else { winner };
    }
    let mut later = if b.offset > a.offset { next } else { winner };
    if later.slot() == Slot::Tombstone {
        later.version.timestamp = a.timestamp.max(b.timestamp);
    }
    later
}

/// `part` followed on its partition by `next` (a higher offset), by
/// `order_by`: a tombstone deletes what came before it and carries the
/// highest value it deleted; a row after a tombstone stands (the key was
/// deleted, then written again); between two rows the higher value wins
/// (the later offset when either has none, or on a tie).
fn step(part: &mut Part, next: Entry) {
    let v = next.version;
    match (part.slot, next.slot()) {
        (_, Slot::Tombstone) => {
            let carried = part.version.timestamp.max(v.timestamp);
            *part = Part {
                slot: Slot::Tombstone,
                version: Version {
                    timestamp: carried,
                    ..v
                },
                reset: true,
            };
        }
        (Slot::Tombstone, slot) => {
            *part = Part {
                slot,
                version: v,
                reset: true,
            }
        }
        (Slot::Row(_), slot) => {
            let by_value = part.version.known() && v.known();
            if !by_value || (v.timestamp, v.offset) > (part.version.timestamp, part.version.offset)
            {
                part.slot = slot;
                part.version = v;
            }
        }
    }
}

/// Hands each key's winner to `f`, from entries sorted by key (stable);
/// by `order_by` also each partition's last word ([`Part`], in partition
/// order), which the commit weighs against the table's row.
fn fold_sorted<E>(
    entries: &[Entry],
    order: VersionOrder,
    f: &mut impl FnMut(&KeyHash, Slot, Version, &[Part], &[Entry]) -> Result<(), E>,
) -> Result<(), E> {
    let mut group: Vec<Entry> = Vec::new();
    let mut parts: Vec<Part> = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let key = entries[i].key;
        let j = i + entries[i..].iter().take_while(|e| e.key == key).count();
        if order == VersionOrder::Arrival {
            let winner = entries[i + 1..j]
                .iter()
                .fold(entries[i], |w, e| later(w, *e));
            f(&key, winner.slot(), winner.version, &[], &entries[i..j])?;
            i = j;
            continue;
        }
        group.clear();
        group.extend_from_slice(&entries[i..j]);
        group.sort_by_key(|e| (e.version.partition, e.version.offset));
        parts.clear();
        for e in &group {
            match parts.last_mut() {
                Some(p) if p.version.partition == e.version.partition => step(p, *e),
                _ => parts.push(Part {
                    slot: e.slot(),
                    version: e.version,
                    reset: false,
                }),
            }
        }
        let winner = parts
            .iter()
            .copied()
            .reduce(|w, p| {
                if p.version.supersedes(&w.version) {
                    p
                } else {
                    w
                }
            })
            .expect("a key has an entry");
        f(&key, winner.slot, winner.version, &parts, &entries[i..j])?;
        i = j;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: u8, offset: i64, row: u32) -> Entry {
        let mut k = [0u8; 16];
        k[0] = key.wrapping_mul(37);
        k[15] = key;
        Entry {
            key: k,
            version: Version {
                timestamp: 0,
                partition: 0,
                offset,
            },
            row,
        }
    }

    #[test]
    fn a_kafka_tombstone_after_a_delete_orders_as_the_delete_across_partitions() {
        let at = |timestamp, partition, offset, row| Entry {
            key: [7; 16],
            version: Version {
                timestamp,
                partition,
                offset,
            },
            row,
        };
        let tombstone = Entry::row_or_tombstone(Slot::Tombstone);
        // Partition 0: the row (position 10), its delete (30), then the
        // Kafka tombstone without a position. Partition 1: an older row
        // (20), arriving in any order against them.
        let delete = at(30, 0, 2, tombstone);
        let kafka_tombstone = at(i64::MIN, 0, 3, tombstone);
        let older = at(20, 1, 9, 1);
        for order in [
            [at(10, 0, 1, 0), delete, older, kafka_tombstone],
            [kafka_tombstone, older, at(10, 0, 1, 0), delete],
            [older, kafka_tombstone, delete, at(10, 0, 1, 0)],
        ] {
            let mut won = Vec::new();
            fold_sorted(&order, VersionOrder::Arrival, &mut |_, slot, v, _, _| {
                won.push((slot, v.timestamp));
                Ok::<_, SpillError>(())
            })
            .unwrap();
            assert_eq!(won, [(Slot::Tombstone, 30)], "{order:?}");
        }
        // A row after the delete, on the other partition, stays.
        let newer = at(40, 1, 9, 1);
        let mut won = Vec::new();
        fold_sorted(
            &[delete, newer, kafka_tombstone],
            VersionOrder::Arrival,
            &mut |_, slot, _, _, _| {
                won.push(slot);
                Ok::<_, SpillError>(())
            },
        )
        .unwrap();
        assert_eq!(won, [Slot::Row(1)]);
    }

    /// A message of one key: partition, offset, value, row (`None`: a
    /// tombstone).
    type Message = (i32, i64, i64, Option<u32>);

    /// By `order_by`: the outcome of `messages` synced in two syncs split
    /// at `cut`, the first sync's outcome becoming the table's row.
    fn by_value_in_two_syncs(messages: &[Message], cut: usize) -> Option<u32> {
        let entry = |&(partition, offset, timestamp, row): &Message| Entry {
            key: [9; 16],
            version: Version {
                timestamp,
                partition,
                offset,
            },
            row: Entry::row_or_tombstone(row.map_or(Slot::Tombstone, Slot::Row)),
        };
        let mut table: Option<(u32, super::super::Stamp)> = None;
        for sync in [&messages[..cut], &messages[cut..]] {
            if sync.is_empty() {
                continue;
            }
            let entries: Vec<Entry> = sync.iter().map(entry).collect();
            let mut decided = None;
            fold_sorted(&entries, VersionOrder::Field, &mut |_, _, _, parts, _| {
                decided = Some(super::super::decide_by_value(parts, table.map(|t| t.1)));
                Ok::<_, SpillError>(())
            })
            .unwrap();
            match decided.unwrap() {
                super::super::Decision::Keep => {}
                super::super::Decision::Take(part) => {
                    table = match part.slot {
                        Slot::Row(row) => Some((row, part.version.stamp())),
                        Slot::Tombstone => None,
                    }
                }
            }
        }
        table.map(|t| t.0)
    }

    #[test]
    fn by_order_by_every_split_of_the_same_messages_ends_on_the_same_row() {
        const T: Option<u32> = None;
        // The one known exception: a key deleted by one sync is not
        // remembered, so another partition's older value read by the next
        // sync writes it again (the third case cut after the tombstone).
        let forgotten = |messages: &[Message], cut: usize| {
            cut == 2 && messages.get(2) == Some(&(1, 0, 6, Some(3)))
        };
        let cases: [(&[Message], Option<u32>); 5] = [
            // A late, older value on the same partition loses.
            (&[(0, 0, 7, Some(1)), (0, 1, 5, Some(2))], Some(1)),
            // Deleted, then written again with a lower value: it stands.
            (
                &[(0, 0, 7, Some(1)), (0, 1, i64::MIN, T), (0, 2, 5, Some(2))],
                Some(2),
            ),
            // A tombstone carries the value it deleted against another
            // partition's older value.
            (
                &[(0, 0, 7, Some(1)), (0, 1, i64::MIN, T), (1, 0, 6, Some(3))],
                None,
            ),
            (
                &[(0, 0, 7, Some(1)), (0, 1, i64::MIN, T), (1, 0, 8, Some(3))],
                Some(3),
            ),
            // Across partitions the higher value, whatever the order read.
            (
                &[(1, 0, 9, Some(3)), (0, 0, 7, Some(1)), (0, 1, 8, Some(2))],
                Some(3),
            ),
        ];
        for (messages, expected) in cases {
            for cut in 0..=messages.len() {
                let expected = match forgotten(messages, cut) {
                    true => Some(3),
                    false => expected,
                };
                assert_eq!(
                    by_value_in_two_syncs(messages, cut),
                    expected,
                    "{messages:?} cut at {cut}"
                );
            }
        }
    }

    fn winners(entries: &mut Entries) -> Vec<(KeyHash, Slot)> {
        let mut out = Vec::new();
        entries
            .for_each_winner(|k, s, _, _, _| {
                out.push((*k, s));
                Ok::<_, SpillError>(())
            })
            .unwrap();
        out
    }

    #[test]
    fn each_key_says_whether_it_had_a_row_or_only_tombstones() {
        let tombstone = Entry::row_or_tombstone(Slot::Tombstone);
        for order in [VersionOrder::Arrival, VersionOrder::Field] {
            let mut entries = vec![
                entry(1, 0, 0),
                entry(1, 1, tombstone),
                entry(2, 2, tombstone),
                entry(3, 3, 1),
            ];
            let mut seen = Vec::new();
            resolve_sorted(&mut entries, order, &mut |k, s, _, _, group| {
                seen.push((k[15], s, had_row(group)));
                Ok::<_, SpillError>(())
            })
            .unwrap();
            seen.sort_by_key(|(k, ..)| *k);
            assert_eq!(
                seen,
                [
                    (1, Slot::Tombstone, true),
                    (2, Slot::Tombstone, false),
                    (3, Slot::Row(1), true)
                ],
                "{order:?}"
            );
        }
    }

    #[test]
    fn entries_round_trip_through_their_bytes() {
        let e = Entry {
            key: [7; 16],
            version: Version {
                timestamp: -5,
                partition: 3,
                offset: 1 << 40,
            },
            row: TOMBSTONE,
        };
        let mut b = [0u8; ENTRY_BYTES];
        e.encode(&mut b);
        let d = Entry::decode(&b);
        assert_eq!((d.key, d.version, d.row), (e.key, e.version, e.row));
    }

    #[test]
    fn spilled_entries_give_the_same_winners_as_in_memory_ones() {
        let dir = std::env::temp_dir().join(format!(
            "topicberg-entries-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut memory = Entries::new(&dir, VersionOrder::Arrival);
        let mut spilled = Entries::new(&dir, VersionOrder::Arrival);
        // 3 versions of each of 200 keys, the middle one (highest offset) wins.
        let mut row = 0;
        for round in [1i64, 3, 2] {
            for key in 0..200u8 {
                let e = entry(key, round, row);
                memory.push(e).unwrap();
                spilled.push(e).unwrap();
                if row % 97 == 0 {
                    spilled.spill().unwrap();
                }
                row += 1;
            }
        }
        assert!(spilled.spilled() && !memory.spilled());
        let a = winners(&mut memory);
        let b = winners(&mut spilled);
        assert_eq!(a.len(), 200);
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[0].0 < w[1].0), "keys ascending");
        assert!(a
            .iter()
            .all(|(_, s)| matches!(s, Slot::Row(r) if (200..400).contains(r))));
        // Resolving twice gives the same answer (a recomputed commit).
        assert_eq!(winners(&mut spilled), b);
        // An entry taken after the winners were asked for (the bucket
        // writers closed) adds to the spilled ones: key 0's new winner.
        spilled.push(entry(0, 9, 600)).unwrap();
        let again = winners(&mut spilled);
        assert_eq!(again.len(), 200);
        assert!(again.contains(&(entry(0, 9, 600).key, Slot::Row(600))));
        assert_eq!(
            again.iter().filter(|(_, s)| *s == Slot::Row(600)).count(),
            1
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! One committer per table among a job's workers.
//!
//! When several followers of a job share its partitions through the
//! consumer group, each append table is committed by one of them: the
//! worker the group gave the table topic's partition 0 (its
//! [`Role::Committer`]). The others ([`Role::Writer`]) read and write
//! their partitions as usual, then hand the files over as a file set in
//! the table's pending folder (`topicberg_iceberg::file_sets`) instead of
//! committing; the committer takes every set that continues the table's
//! offsets into its own round's snapshot. So a table gets at most one
//! snapshot per round of its committer, whatever the number of workers.
//!
//! The table's offsets stay the only truth and the fence: a set lands only
//! on the offsets it starts from, so two sets of one range (a worker that
//! lost the partition and the one that got it) never both land. A writer
//! keeps the sets it handed over and not yet seen committed
//! ([`HandedSets`]) and plans its next round from their end; a set that
//! vanished without its range reaching the table (dropped as stale by the
//! committer) sends its partitions back to the table's offsets.
//!
//! An upsert table's writers hand over *staged* sets: the round's winning
//! rows per key and winning tombstones, which the committer takes into its
//! own round's buffer, so one key rule and one key index settle every
//! worker's messages (`upsert_round.rs`).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Mutex;

use topicberg_iceberg::{
    Destination, FileSet, OffsetsAdvance, PendingSet, SetTombstone, TableHandle,
};

use super::plan::TableOffsets;

/// How many of a writer's sets may wait for the committer before the
/// writer stops reading that table (until the committer takes them).
pub(crate) const MAX_WAITING_SETS: usize = 4;

/// How long a set that does not continue the table's offsets may wait for
/// the sets before it; then the committer drops it and its writer reads
/// its range again.
const GAP_WAIT_MS: i64 = 120_000;

/// A worker's part in committing one table this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Not a worker of a group (a scheduled sync): commits its own
    /// snapshot.
    Alone,
    /// Owns the table topic's partition 0: commits its own data and the
    /// sets the others handed over, in one snapshot.
    Committer,
    /// Hands its files over to the committer.
    Writer,
}

impl Role {
    /// The role of a worker holding `lease` (`None`: not a member) in
    /// committing `topic`'s table; `handing`: the caller keeps handed sets
    /// (a follower).
    pub(crate) fn of(lease: Option<&topicberg_kafka::Lease>, handing: bool, topic: &str) -> Self {
        let Some(lease) = lease.filter(|_| handing) else {
            return Self::Alone;
        };
        match lease.assigned() {
            Some(assigned) if assigned.contains(&(topic.to_string(), 0)) => Self::Committer,
            _ => Self::Writer,
        }
    }
}

/// A partition's range: (first offset as the table recorded it when
/// planned, `None` for a partition the table never saw; next offset).
pub(crate) type Range = (Option<i64>, i64);

/// A set a writer handed over, as it remembers it.
#[derive(Debug, Clone)]
struct Handed {
    location: String,
    partitions: BTreeMap<i32, Range>,
}

/// A follower's sets handed over and not yet seen committed, per table
/// (`namespace.table`), kept from round to round; and the tables whose
/// pending folder it listed while it owned every partition of their topic.
#[derive(Debug, Default)]
pub struct HandedSets {
    handed: Mutex<BTreeMap<String, Vec<Handed>>>,
    listed_alone: Mutex<BTreeSet<String>>,
}

impl HandedSets {
    /// Whether `table` has sets of this worker whose ranges the table
    /// (`recorded`) does not hold yet; those that it holds are forgotten
    /// (committed), so a writer whose sets all landed lists nothing.
    pub(crate) fn waiting(&self, table: &str, topic: &str, recorded: &TableOffsets) -> bool {
        let mut all = self.lock();
        let Some(sets) = all.get_mut(table) else {
            return false;
        };
        sets.retain(|set| !landed(set, topic, recorded));
        !sets.is_empty()
    }

    /// Whether a set of `table` this worker handed over and still waits
    /// for is not among `existing` (the sets listed now).
    pub(crate) fn missing(&self, table: &str, existing: &HashSet<String>) -> bool {
        self.lock()
            .get(table)
            .is_some_and(|sets| sets.iter().any(|s| !existing.contains(&s.location)))
    }

    /// Where a writer's round of `table` starts: the table's offsets moved
    /// past each of its partitions' sets still waiting. `existing` are the
    /// sets in the table's pending folder now. A set that is gone and whose
    /// ranges the table holds was committed; one gone whose ranges it does
    /// not hold was dropped: its partitions (and the later sets of them)
    /// start from the table's offsets again. Also whether the writer has
    /// [`MAX_WAITING_SETS`] waiting (it then reads nothing of the table).
    pub(crate) fn plan_from(
        &self,
        table: &str,
        topic: &str,
        recorded: &TableOffsets,
        existing: &HashSet<String>,
    ) -> (TableOffsets, bool) {
        let mut all = self.lock();
        let sets = all.entry(table.to_string()).or_default();
        let mut broken: BTreeSet<i32> = BTreeSet::new();
        sets.retain(|set| {
            if landed(set, topic, recorded) {
                return false;
            }
            let in_gap = set.partitions.keys().any(|p| broken.contains(p));
            if in_gap || !existing.contains(&set.location) {
                broken.extend(set.partitions.keys());
                tracing::info!(
                    table, set = %set.location,
                    "a handed file set was dropped before it was committed: its partitions are read again from the table's offsets"
                );
                return false;
            }
            true
        });
        let mut from = recorded.clone();
        for set in sets.iter() {
            for (p, (_, end)) in &set.partitions {
                if from.get(topic, *p) < Some(*end) {
                    from.set(topic, *p, *end);
                }
            }
        }
        (from, sets.len() >= MAX_WAITING_SETS)
    }

    /// Remembers a set this worker handed over.
    pub(crate) fn push(&self, table: &str, location: String, partitions: BTreeMap<i32, Range>) {
        self.lock()
            .entry(table.to_string())
            .or_default()
            .push(Handed {
                location,
                partitions,
            });
    }

    /// Whether a committer of `table` lists its pending folder this round:
    /// always while other workers own partitions of the topic; once it
    /// owns them all, until a round took (or found) every set there
    /// ([`Self::listed_alone`]); then not while it keeps them all.
    pub(crate) fn must_list(&self, table: &str, owns_all: bool) -> bool {
        let mut listed = self.listed_alone.lock().unwrap_or_else(|p| p.into_inner());
        if !owns_all {
            listed.remove(table);
            return true;
        }
        !listed.contains(table)
    }

    /// A committer owning every partition of `table`'s topic left its
    /// pending folder empty.
    pub(crate) fn listed_alone(&self, table: &str) {
        let mut listed = self.listed_alone.lock().unwrap_or_else(|p| p.into_inner());
        listed.insert(table.to_string());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<Handed>>> {
        self.handed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether the table (`recorded`) holds every range of `set`.
fn landed(set: &Handed, topic: &str, recorded: &TableOffsets) -> bool {
    set.partitions
        .iter()
        .all(|(p, (_, end))| recorded.get(topic, *p) >= Some(*end))
}

/// The sets a committer takes into its snapshot this round, and those it
/// drops.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    /// The taken sets' data files.
    pub(crate) data_files: Vec<topicberg_iceberg::DataFile>,
    /// Each taken partition's range (chained sets merged).
    pub(crate) partitions: BTreeMap<i32, Range>,
    /// Messages the taken sets hold as rows.
    pub(crate) records: u64,
    /// The taken (staged) sets' winning tombstones.
    pub(crate) tombstones: Vec<SetTombstone>,
    /// The taken sets' locations, deleted after the commit.
    pub(crate) taken: Vec<String>,
    /// Sets that can never land (their range is in the table, or they
    /// waited too long for the sets before them), deleted now.
    pub(crate) stale: Vec<String>,
    /// Sets left to wait (for the sets before them, or for the committer
    /// to lose the partitions they hold), or that could not be read.
    pub(crate) waiting: usize,
}

/// Reads `handle`'s pending sets and chooses what a committer takes: in
/// the order they were written, every set of `topic` whose partitions all
/// start where the table (moved by the sets taken before it) stands and
/// are none of `own` (the committer's own partitions this round).
/// `staged`: the table is an upsert table, whose sets are staged (a set of
/// the other kind, from a writer that saw the table in the other mode, can
/// never land: it is dropped and read again).
pub(crate) async fn gather(
    destination: &Destination,
    handle: &TableHandle,
    topic: &str,
    recorded: &TableOffsets,
    own: &BTreeSet<i32>,
    staged: bool,
) -> Result<Gathered, topicberg_iceberg::IcebergError> {
    let pending = destination.pending_file_sets(handle).await?;
    if pending.is_empty() {
        return Ok(Gathered::default());
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let now_ms = now.map_or(0, |d| d.as_millis() as i64);
    Ok(choose(pending, topic, recorded, own, now_ms, staged))
}

fn choose(
    pending: Vec<PendingSet>,
    topic: &str,
    recorded: &TableOffsets,
    own: &BTreeSet<i32>,
    now_ms: i64,
    staged: bool,
) -> Gathered {
    let mut readable = Vec::new();
    let mut out = Gathered::default();
    for p in pending {
        match p.set {
            Ok(set) => readable.push((p.location, p.written_ms, set)),
            Err(e) => {
                out.waiting += 1;
                tracing::warn!(set = %p.location, error = %e, "a file set could not be read; it is left where it is")
            }
        }
    }
    let mut at: BTreeMap<i32, Option<i64>> = BTreeMap::new();
    let mut taken = vec![false; readable.len()];
    loop {
        let next = readable.iter().enumerate().find(|(i, (_, _, set))| {
            !taken[*i]
                && set.topic == topic
                && set.staged == staged
                && set.partitions.iter().all(|(p, (start, _))| {
                    !own.contains(p)
                        && *at.entry(*p).or_insert_with(|| recorded.get(topic, *p)) == *start
                })
        });
        let Some((i, (location, _, set))) = next else {
            break;
        };
        taken[i] = true;
        for (p, (start, end)) in &set.partitions {
            at.insert(*p, Some(*end));
            out.partitions
                .entry(*p)
                .and_modify(|r| r.1 = *end)
                .or_insert((*start, *end));
        }
        out.data_files.extend(set.data_files.iter().cloned());
        out.tombstones.extend(set.tombstones.iter().copied());
        out.records += set.records;
        out.taken.push(location.clone());
    }
    for (i, (location, written_ms, set)) in readable.iter().enumerate() {
        if taken[i] {
            continue;
        }
        let behind = set.topic != topic
            || set.staged != staged
            || set.partitions.iter().any(|(p, (start, _))| {
                let now = at
                    .get(p)
                    .copied()
                    .unwrap_or_else(|| recorded.get(topic, *p));
                now.is_some() && start.is_none_or(|s| Some(s) < now)
            });
        if behind || now_ms - written_ms > GAP_WAIT_MS {
            out.stale.push(location.clone());
        } else {
            out.waiting += 1;
        }
    }
    out
}

/// A writer's file set of one round: its partitions that moved.
pub(crate) fn file_set(
    advance: &OffsetsAdvance,
    data_files: Vec<topicberg_iceberg::DataFile>,
    records: u64,
) -> Option<FileSet> {
    let partitions: BTreeMap<i32, Range> = advance
        .partitions
        .iter()
        .filter(|(_, (start, end))| *start != Some(*end))
        .map(|(p, r)| (*p, *r))
        .collect();
    if partitions.is_empty() {
        return None;
    }
    Some(FileSet {
        topic: advance.topic.clone(),
        partitions,
        data_files,
        records,
        writer: writer_name(),
        staged: false,
        tombstones: Vec::new(),
    })
}

/// This process, as a set names its writer.
fn writer_name() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".to_string());
    format!("{host}/{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(location: &str, written_ms: i64, partitions: &[(i32, Option<i64>, i64)]) -> PendingSet {
        PendingSet {
            location: location.to_string(),
            written_ms,
            set: Ok(FileSet {
                topic: "t".to_string(),
                partitions: partitions.iter().map(|(p, s, e)| (*p, (*s, *e))).collect(),
                data_files: Vec::new(),
                records: 1,
                writer: "w".to_string(),
                staged: false,
                tombstones: Vec::new(),
            }),
        }
    }

    /// What an append table's committer with no partition of its own
    /// takes of `pending`.
    fn append_choice(pending: Vec<PendingSet>, table: &TableOffsets) -> Gathered {
        choose(pending, "t", table, &BTreeSet::new(), 1, false)
    }

    fn table_at(partitions: &[(i32, i64)]) -> TableOffsets {
        let mut offsets = TableOffsets::default();
        for (p, next) in partitions {
            offsets.set("t", *p, *next);
        }
        offsets
    }

    #[test]
    fn a_committer_takes_chained_sets_in_order_and_merges_their_ranges() {
        let pending = vec![
            set("a", 0, &[(1, Some(10), 20), (2, None, 5)]),
            set("b", 0, &[(1, Some(20), 30), (2, Some(5), 9)]),
        ];
        let got = append_choice(pending, &table_at(&[(1, 10)]));
        assert_eq!(got.taken, ["a", "b"]);
        assert_eq!(got.partitions[&1], (Some(10), 30));
        assert_eq!(got.partitions[&2], (None, 9));
        assert!(got.stale.is_empty());
    }

    #[test]
    fn an_upsert_tables_committer_takes_staged_sets_with_their_tombstones_and_drops_the_other_kind()
    {
        let tombstone = SetTombstone {
            key: [7; 16],
            timestamp: 5,
            partition: 2,
            offset: 6,
        };
        let mut staged = set("staged", 0, &[(2, Some(5), 9)]);
        if let Ok(set) = &mut staged.set {
            set.staged = true;
            set.tombstones = vec![tombstone];
        }
        let plain = set("plain", 0, &[(1, Some(10), 20)]);
        let table = table_at(&[(1, 10), (2, 5)]);
        let got = choose(vec![staged, plain], "t", &table, &BTreeSet::new(), 1, true);
        assert_eq!(got.taken, ["staged"]);
        assert_eq!(got.tombstones, vec![tombstone]);
        assert_eq!(got.stale, ["plain"], "a set of the other kind never lands");
        // And an append table's committer never takes a staged set.
        let mut staged = set("staged", 0, &[(2, Some(5), 9)]);
        if let Ok(set) = &mut staged.set {
            set.staged = true;
        }
        let got = choose(vec![staged], "t", &table, &BTreeSet::new(), 1, false);
        assert!(got.taken.is_empty());
        assert_eq!(got.stale, ["staged"]);
    }

    #[test]
    fn a_set_whose_range_the_table_holds_is_dropped_never_taken() {
        let pending = vec![
            set("old", 0, &[(1, Some(10), 20)]),
            set("new", 0, &[(1, Some(20), 25)]),
        ];
        let got = append_choice(pending, &table_at(&[(1, 20)]));
        assert_eq!(got.taken, ["new"]);
        assert_eq!(got.stale, ["old"]);
    }

    #[test]
    fn of_two_sets_of_one_range_only_the_first_lands() {
        let pending = vec![
            set("w1", 0, &[(1, Some(10), 20)]),
            set("w2", 0, &[(1, Some(10), 30)]),
        ];
        let got = append_choice(pending, &table_at(&[(1, 10)]));
        assert_eq!(got.taken, ["w1"]);
        assert_eq!(got.stale, ["w2"]);
    }

    #[test]
    fn a_set_on_the_committers_own_partitions_waits_and_a_gap_waits_until_too_old() {
        let pending = vec![
            set("own", 0, &[(0, Some(3), 4)]),
            set("gap", 0, &[(1, Some(50), 60)]),
        ];
        let own = BTreeSet::from([0]);
        let got = choose(pending, "t", &table_at(&[(0, 3), (1, 10)]), &own, 1, false);
        assert!(got.taken.is_empty() && got.stale.is_empty(), "{got:?}");
        let pending = vec![set("gap", 0, &[(1, Some(50), 60)])];
        let got = choose(
            pending,
            "t",
            &table_at(&[(1, 10)]),
            &own,
            GAP_WAIT_MS + 1,
            false,
        );
        assert_eq!(got.stale, ["gap"]);
    }

    #[test]
    fn a_writer_plans_past_its_waiting_sets_and_starts_over_when_one_was_dropped() {
        let handed = HandedSets::default();
        handed.push("ns.t", "a".into(), BTreeMap::from([(1, (Some(10), 20))]));
        handed.push("ns.t", "b".into(), BTreeMap::from([(1, (Some(20), 30))]));
        let both: HashSet<String> = ["a".to_string(), "b".to_string()].into();
        let (from, full) = handed.plan_from("ns.t", "t", &table_at(&[(1, 10)]), &both);
        assert_eq!((from.get("t", 1), full), (Some(30), false));
        // "a" landed: "b" still waits.
        let only_b: HashSet<String> = ["b".to_string()].into();
        let (from, _) = handed.plan_from("ns.t", "t", &table_at(&[(1, 20)]), &only_b);
        assert_eq!(from.get("t", 1), Some(30));
        // "b" vanished without landing: back to the table's offset.
        let (from, _) = handed.plan_from("ns.t", "t", &table_at(&[(1, 20)]), &HashSet::new());
        assert_eq!(from.get("t", 1), Some(20));
        assert!(!handed.waiting("ns.t", "t", &table_at(&[(1, 20)])));
        // Sets whose ranges the table holds are forgotten without a listing.
        handed.push("ns.t", "c".into(), BTreeMap::from([(1, (Some(20), 25))]));
        assert!(handed.waiting("ns.t", "t", &table_at(&[(1, 20)])));
        assert!(!handed.waiting("ns.t", "t", &table_at(&[(1, 25)])));
        // Four sets waiting: the writer reads nothing more of the table.
        let mut names = HashSet::new();
        for n in 0..MAX_WAITING_SETS as i64 {
            let name = format!("w{n}");
            let range = (Some(25 + n), 26 + n);
            handed.push("ns.t", name.clone(), BTreeMap::from([(1, range)]));
            names.insert(name);
        }
        let (from, full) = handed.plan_from("ns.t", "t", &table_at(&[(1, 25)]), &names);
        assert_eq!((from.get("t", 1), full), (Some(29), true));
    }

    #[test]
    fn a_committer_owning_every_partition_lists_once() {
        let handed = HandedSets::default();
        assert!(handed.must_list("ns.t", true));
        handed.listed_alone("ns.t");
        assert!(!handed.must_list("ns.t", true));
        assert!(handed.must_list("ns.t", false));
        assert!(handed.must_list("ns.t", true));
    }
}

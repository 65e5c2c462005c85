//! Upsert keys whose messages come through partitions that different
//! workers own (a payload key not aligned with the Kafka partitioning):
//! whichever worker commits last, the table keeps the row of the key's
//! latest message by the ordering rule (across partitions the later
//! message timestamp), never merely the last committed one. Values are
//! checked, not counts.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use crate::support::{
    figures_in_log, json_strings, metadata_files, plaintext, produce_timed, read_rows, Catalog, Rng,
};
use crate::workers::{Workers, PARTITIONS};

/// Keys of this test (the shared `produce` uses keys below 120).
const FIRST_KEY: u64 = 1_000;

/// One message of an upsert key: its partition, timestamp and seq.
struct Upsert {
    partition: i32,
    key: u64,
    timestamp_ms: i64,
    seq: u64,
}

/// Produces `messages` in order and makes the model hold, per key, the
/// seq of its latest message by the rule: the later timestamp across
/// partitions (the tests never give two partitions' messages of a key the
/// same timestamp), the later one produced within a partition.
fn produce(workers: &mut Workers, messages: &[Upsert], newest: &mut BTreeMap<u64, (i64, u64)>) {
    let values: Vec<(i32, String, String, i64)> = messages
        .iter()
        .map(|m| {
            let value = json!({"id": m.key, "seq": m.seq}).to_string();
            (m.partition, m.key.to_string(), value, m.timestamp_ms)
        })
        .collect();
    let timed: Vec<(i32, &str, &str, Option<i64>)> = values
        .iter()
        .map(|(p, k, v, t)| (*p, k.as_str(), v.as_str(), Some(*t)))
        .collect();
    produce_timed(&plaintext(), &workers.upserted, &timed);
    for m in messages {
        let wins = newest
            .get(&m.key)
            .is_none_or(|(timestamp, _)| m.timestamp_ms > *timestamp);
        if wins {
            newest.insert(m.key, (m.timestamp_ms, m.seq));
            workers.latest.insert(m.key, m.seq);
        }
    }
}

fn seq(workers: &mut Workers) -> u64 {
    workers.next_id += 1;
    workers.next_id
}

/// For each partition, another partition some other worker owns.
fn partners(owners: &BTreeMap<i32, usize>) -> Vec<(i32, i32)> {
    (0..PARTITIONS)
        .map(|p| {
            let other = (1..PARTITIONS)
                .map(|d| (p + d) % PARTITIONS)
                .find(|q| owners.get(q) != owners.get(&p))
                .unwrap_or_else(|| panic!("no partition of another worker: {owners:?}"));
            (p, other)
        })
        .collect()
}

#[test]
fn workers_keep_the_latest_row_of_a_key_whose_messages_come_through_partitions_of_different_workers(
) {
    let mut rng = Rng::seeded("TOPICBERG_WORKERS_SEED", "upsert keys across workers");
    let mut workers = Workers::with(3, "");
    workers.produce(&mut rng, 24);
    for n in 0..3 {
        workers.start(n);
    }
    workers.wait_balanced("three workers");
    workers.wait_visible("both tables created");
    let topic = workers.upserted.clone();
    let owners = workers.owners(&topic);
    assert_eq!(owners.len(), PARTITIONS as usize, "{owners:?}");
    let pairs = partners(&owners);
    eprintln!("owners {owners:?}, partition pairs of different workers {pairs:?}");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let base = now_ms - 600_000;
    let mut newest = BTreeMap::new();

    // Round 1: 48 keys, each on its first partition, at base + 10 s.
    let keys: Vec<u64> = (FIRST_KEY..FIRST_KEY + 48).collect();
    let first: Vec<Upsert> = keys
        .iter()
        .map(|&key| Upsert {
            partition: pairs[(key % PARTITIONS as u64) as usize].0,
            key,
            timestamp_ms: base + 10_000 + (key - FIRST_KEY) as i64,
            seq: seq(&mut workers),
        })
        .collect();
    produce(&mut workers, &first, &mut newest);
    workers.wait_visible("each key on a partition of one worker");

    // Round 2: each key again on a partition another worker owns, half
    // of them older than the table's row (it must stay), half newer. A
    // partition's last message is a newer one, so once the model shows it
    // the older ones before it were read and committed too.
    let second: Vec<Upsert> = keys
        .iter()
        .map(|&key| {
            let newer = (key - FIRST_KEY) / PARTITIONS as u64 % 2 == 1;
            Upsert {
                partition: pairs[(key % PARTITIONS as u64) as usize].1,
                key,
                timestamp_ms: base + if newer { 20_000 } else { 5_000 },
                seq: seq(&mut workers),
            }
        })
        .collect();
    produce(&mut workers, &second, &mut newest);
    workers.wait_visible("older messages from other workers' partitions kept out");
    // `_op_type` against the table as the committer found it: a key the
    // second message replaced was updated, one it left was only created.
    let table = workers.job.table(&topic);
    for row in read_rows("duckdb", Catalog::Seaweed, &table) {
        let id = row["id"].as_u64().unwrap();
        if (FIRST_KEY..FIRST_KEY + 48).contains(&id) {
            let replaced = (id - FIRST_KEY) / PARTITIONS as u64 % 2 == 1;
            let want = if replaced { "u" } else { "c" };
            assert_eq!(row["_op_type"], want, "{row}");
        }
    }

    // Round 3: 24 new keys, each produced on two partitions of different
    // workers at once, in a random order, the newer one at random: both
    // workers commit, in whatever order, and the newer row stays.
    let mut racing = Vec::new();
    for key in FIRST_KEY + 100..FIRST_KEY + 124 {
        let (p, q) = pairs[(key % PARTITIONS as u64) as usize];
        let times = [base + 30_000, base + 31_000];
        let newer_on_p = rng.below(2) == 0;
        let (tp, tq) = if newer_on_p {
            (times[1], times[0])
        } else {
            (times[0], times[1])
        };
        let mut two = [(p, tp), (q, tq)];
        if rng.below(2) == 0 {
            two.reverse();
        }
        for (partition, timestamp_ms) in two {
            racing.push(Upsert {
                partition,
                key,
                timestamp_ms,
                seq: seq(&mut workers),
            });
        }
    }
    produce(&mut workers, &racing, &mut newest);
    // A last message on every partition, newest of all: once the model
    // shows them, every message before them was committed.
    let last: Vec<Upsert> = (0..PARTITIONS)
        .map(|p| Upsert {
            partition: p,
            key: FIRST_KEY + 200 + p as u64,
            timestamp_ms: now_ms,
            seq: seq(&mut workers),
        })
        .collect();
    produce(&mut workers, &last, &mut newest);
    workers.wait_visible("the same round's two messages of a key on two workers");

    workers.stop_all();
    let kept_out: u64 = workers
        .logs
        .iter()
        .flat_map(|log| figures_in_log(log, 0, "committed upsert snapshot", "older_than_table"))
        .sum();
    assert!(
        kept_out >= 24,
        "the 24 older messages of round 2 reported as older than the table's rows: {kept_out}"
    );
    workers.check("pyiceberg", "at the end");
    workers.check("spark", "at the end");
    // The writers' staged files were deleted once their rows landed: every
    // file under the table's data/ is one of its snapshots' files.
    let files = metadata_files(Catalog::Seaweed, &table, &[]);
    let referenced: BTreeSet<String> = json_strings(&files["files_referenced"])
        .into_iter()
        .collect();
    let stray: Vec<String> = json_strings(&files["data_in_folder"])
        .into_iter()
        .filter(|f| !referenced.contains(f))
        .collect();
    assert!(stray.is_empty(), "files no snapshot names: {stray:?}");
}

//! Partitions cut into offset pieces read by different drain threads, and
//! an upsert sync whose messages spill to local disk and whose winning
//! rows are written by parallel writers: all with small limits
//! (`TOPICBERG_MIN_CHUNK_MESSAGES`, `TOPICBERG_UPSERT_MEMORY_ENTRIES`,
//! `TOPICBERG_UPSERT_SEGMENT_ROWS`) so a few thousand messages take the
//! paths a 10-million-message sync takes. Every message must land exactly once, every key keep its latest
//! message, and the next sync start where the pieces ended.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::support::{
    create_topic, group_offsets, plaintext, produce_to_partitions, read_rows, table_report,
    Catalog, Job, READERS,
};
use crate::testbed::unique_name;

const SMALL_LIMITS: [(&str, &str); 3] = [
    ("TOPICBERG_MIN_CHUNK_MESSAGES", "150"),
    ("TOPICBERG_UPSERT_MEMORY_ENTRIES", "300"),
    ("TOPICBERG_UPSERT_SEGMENT_ROWS", "200"),
];

fn sync_with_small_limits(job: &Job) -> Value {
    job.run_reported("sync", &SMALL_LIMITS)
}

/// `count` messages per partition: `(partition, key, {"id", "v", "p", "o"})`
/// with ids cycling through `keys` ids of that partition (so each key
/// repeats within the sync), "o" the message's index in its partition.
fn messages(
    partitions: i32,
    count: i64,
    keys: i64,
    version: i64,
    first: i64,
) -> Vec<(i32, String, String)> {
    let mut out = Vec::new();
    for p in 0..partitions {
        for i in first..first + count {
            let id = i64::from(p) * 1_000_000 + i % keys;
            out.push((
                p,
                id.to_string(),
                json!({"id": id, "v": version, "p": p, "o": i}).to_string(),
            ));
        }
    }
    out
}

/// The third upsert round: 50 messages to partition 1 only, updating keys
/// 200..250 of it.
fn third_round() -> Vec<(i32, String, String)> {
    messages(3, 50, 300, 3, 1_100)
        .into_iter()
        .filter(|(partition, ..)| *partition == 1)
        .collect()
}

#[test]
fn sync_split_partitions_and_spilled_upsert_keep_every_message_once_and_the_latest_per_key() {
    let kafka = plaintext();
    let one = unique_name("split_one");
    let three = unique_name("split_three");
    create_topic(&one, 1);
    create_topic(&three, 3);
    let streams =
        format!("[[streams]]\ntopic = \"{three}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    // `Job` sets `max_threads = 3`: three drain threads, and three data
    // file writers of the upsert's winning rows (each a run of the held
    // files).
    let job = Job::new(Catalog::Seaweed, &[&one, &three], "", &streams);

    // 1-partition append topic: 1,000 messages (about 3 pieces of 334 on 3
    // threads); 3-partition upsert topic: 700 messages each over 250 keys.
    produce_to_partitions(&kafka, &one, &messages(1, 1_000, 1_000_000, 1, 0));
    produce_to_partitions(&kafka, &three, &messages(3, 700, 250, 1, 0));
    let report = sync_with_small_limits(&job);
    assert_eq!(table_report(&report, &job.table(&one))["records"], 1_000);
    assert_eq!(table_report(&report, &job.table(&three))["records"], 2_100);
    let upsert_files = table_report(&report, &job.table(&three))["data_files"].clone();
    assert_eq!(upsert_files, 3, "one data file per writer");

    // More of both; the upsert keys repeat old ones and add new ones.
    produce_to_partitions(&kafka, &one, &messages(1, 500, 1_000_000, 2, 1_000));
    produce_to_partitions(&kafka, &three, &messages(3, 400, 300, 2, 700));
    let report = sync_with_small_limits(&job);
    assert_eq!(table_report(&report, &job.table(&one))["records"], 500);
    assert_eq!(table_report(&report, &job.table(&three))["records"], 1_200);

    // A few keys of one partition that the second sync wrote: only their
    // rows may retire, so a position mapped to the wrong row shows as a
    // lost or doubled key below.
    produce_to_partitions(&kafka, &three, &third_round());
    let report = sync_with_small_limits(&job);
    assert_eq!(table_report(&report, &job.table(&three))["records"], 50);

    // Append: every offset exactly once, in the right message.
    let rows = read_rows("duckdb", Catalog::Seaweed, &job.table(&one));
    let mut offsets: Vec<i64> = rows
        .iter()
        .map(|r| {
            assert_eq!(r["_kafka_offset"], r["o"], "{r}");
            r["_kafka_offset"].as_i64().unwrap()
        })
        .collect();
    offsets.sort_unstable();
    assert_eq!(offsets, (0..1_500).collect::<Vec<i64>>());

    // Upsert: one row per key, its latest message (the highest offset of
    // the key in its partition).
    let mut want: BTreeMap<i64, i64> = BTreeMap::new();
    for (_, _, value) in messages(3, 700, 250, 1, 0)
        .into_iter()
        .chain(messages(3, 400, 300, 2, 700))
        .chain(third_round())
    {
        let v: Value = serde_json::from_str(&value).unwrap();
        want.insert(v["id"].as_i64().unwrap(), v["o"].as_i64().unwrap());
    }
    // Not Trino (slow per query, and it reads v2 upsert tables in
    // sync_upsert), nor PyIceberg.
    for engine in READERS
        .into_iter()
        .filter(|e| !["trino", "pyiceberg"].contains(e))
    {
        let rows = read_rows(engine, Catalog::Seaweed, &job.table(&three));
        let mut got: BTreeMap<i64, i64> = BTreeMap::new();
        for r in &rows {
            let id = r["id"].as_i64().unwrap();
            assert!(
                got.insert(id, r["o"].as_i64().unwrap()).is_none(),
                "{engine}: key {id} has two rows"
            );
        }
        assert_eq!(got, want, "{engine}: the latest message per key");
    }

    // The group's offsets: the ends of the partitions.
    let group = job.group();
    assert_eq!(group_offsets(&kafka, &group, &one, 1), vec![Some(1_500)]);
    assert_eq!(
        group_offsets(&kafka, &group, &three, 3),
        vec![Some(1_100), Some(1_150), Some(1_100)]
    );
}

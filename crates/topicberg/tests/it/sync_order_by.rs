//! `order_by`: an upsert stream's version field decides which message of a
//! key wins, within a partition and across partitions, within a sync and
//! against the rows earlier syncs committed; a tombstone still deletes its
//! partition's earlier rows. The order is the table's for good: a changed
//! `order_by` fails the sync, and a field of another type cannot order.

use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{json, Value};

use crate::support::{create_topic, plaintext, read_rows, Catalog, Job};
use crate::testbed::unique_name;

/// `(partition, key, value)`; `None`: a tombstone. Partition 0's Kafka
/// timestamps are newer than partition 1's, whatever the versions say.
fn produce(topic: &str, messages: &[(i32, &str, Option<Value>)]) {
    let producer: BaseProducer = plaintext().client_config().create().expect("producer");
    for (partition, key, value) in messages {
        let value = value.as_ref().map(Value::to_string);
        let timestamp = 1_796_000_000_000 + if *partition == 0 { 9_000 } else { 1_000 };
        let mut record = BaseRecord::to(topic)
            .partition(*partition)
            .key(*key)
            .timestamp(timestamp);
        if let Some(v) = &value {
            record = record.payload(v);
        }
        producer.send(record).map_err(|(e, _)| e).expect("send");
    }
    producer.flush(Duration::from_secs(60)).expect("flushed");
}

fn row(version: Option<i64>, v: &str) -> Option<Value> {
    Some(match version {
        Some(n) => json!({"version": n, "v": v}),
        None => json!({"v": v}),
    })
}

/// `(key, v)` of every row, by key, as DuckDB reads the table.
fn rows(job: &Job, table: &str) -> Vec<(String, String)> {
    let name = format!("{}_topics.{table}", job.name);
    let mut rows: Vec<(String, String)> = read_rows("duckdb", Catalog::Seaweed, &name)
        .iter()
        .map(|r| {
            use base64::Engine as _;
            let key = base64::engine::general_purpose::STANDARD
                .decode(r["_kafka_key"].as_str().unwrap())
                .unwrap();
            (
                String::from_utf8(key).unwrap(),
                r["v"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn job(topic: &str, table: &str, order_by: &str) -> Job {
    Job::new(
        Catalog::Seaweed,
        &[topic],
        "",
        &format!(
            "[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"_kafka_key\"]\ntable = \"{table}\"\n{order_by}"
        ),
    )
}

fn expect(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn order_by_a_version_field_keeps_the_highest_version_wherever_and_whenever_it_arrives() {
    let topic = unique_name("order_by");
    let table = "versions";
    create_topic(&topic, 2);
    let job = job(&topic, table, "order_by = \"version\"\n");
    produce(
        &topic,
        &[
            // a: a late, older version on the same partition loses.
            (0, "a", row(Some(5), "a5")),
            (0, "a", row(Some(3), "a3")),
            // b: the higher version on the partition with older timestamps.
            (0, "b", row(Some(2), "b2")),
            (1, "b", row(Some(9), "b9")),
            // c: deleted by a tombstone after it on its partition.
            (0, "c", row(Some(4), "c4")),
            (0, "c", None),
            // d: a message without the field goes by offset on its
            // partition (as a tombstone does).
            (1, "d", row(Some(1), "d1")),
            (1, "d", row(None, "d-none")),
            // e and f: rows a later sync deletes.
            (0, "e", row(Some(7), "e7")),
            (0, "f", row(Some(7), "f7")),
        ],
    );
    job.sync();
    assert_eq!(
        rows(&job, table),
        expect(&[
            ("a", "a5"),
            ("b", "b9"),
            ("d", "d-none"),
            ("e", "e7"),
            ("f", "f7")
        ])
    );
    // Against the table's rows: a's older version from the other
    // partition and b's older one on b's own partition stay out; a higher
    // one replaces; c comes back.
    produce(
        &topic,
        &[
            (1, "a", row(Some(4), "a4")),
            (1, "b", row(Some(8), "b8")),
            (1, "d", row(Some(6), "d6")),
            (1, "c", row(Some(1), "c1")),
            // e: deleted, then written again with a lower value: it
            // stands. f: deleted; partition 1's older value stays out.
            (0, "e", None),
            (0, "e", row(Some(5), "e5")),
            (0, "f", None),
            (1, "f", row(Some(6), "f6")),
        ],
    );
    job.sync();
    assert_eq!(
        rows(&job, table),
        expect(&[
            ("a", "a5"),
            ("b", "b9"),
            ("c", "c1"),
            ("d", "d6"),
            ("e", "e5")
        ])
    );
    produce(&topic, &[(0, "a", row(Some(6), "a6"))]);
    job.sync();
    assert_eq!(rows(&job, table)[0], ("a".to_owned(), "a6".to_owned()));

    // The table keeps its order: another order_by, or none, fails.
    let text = std::fs::read_to_string(&job.path).unwrap();
    for changed in ["order_by = \"v\"\n", ""] {
        let edited = text.replace("order_by = \"version\"\n", changed);
        std::fs::write(&job.path, edited).unwrap();
        let stderr = job.sync_failing();
        assert!(
            stderr.contains("orders a key's messages by column \"version\"")
                && stderr.contains("topicberg.order-by"),
            "{stderr}"
        );
    }

    // A field that cannot order (a string) fails naming it.
    let strings = unique_name("order_by_text");
    create_topic(&strings, 1);
    produce(&strings, &[(0, "a", row(Some(1), "x"))]);
    let wrong = self::job(&strings, "texts", "order_by = \"v\"\n");
    let stderr = wrong.sync_failing();
    assert!(stderr.contains("order_by column \"v\" is Utf8"), "{stderr}");
    // A field the messages do not carry fails, naming it.
    let missing = self::job(&strings, "missing", "order_by = \"revision\"\n");
    let stderr = missing.sync_failing();
    assert!(
        stderr.contains("has no column \"revision\", which order_by names"),
        "{stderr}"
    );
}

//! Invalid messages end to end: `on_invalid = "fail" | "dlq" | "skip"`, a
//! null key on a `_kafka_key` upsert stream, and a crash between the
//! dead-letter commit and the table's commit.

use std::collections::BTreeSet;

use base64::Engine as _;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{json, Value};

use crate::support::{create_topic, read_rows, table_report, Catalog, Job};
use crate::testbed::unique_name;

/// A raw message: key and value bytes, either may be null.
type Raw = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Produces raw messages to partition 0, in order.
pub fn produce_raw(topic: &str, messages: &[Raw]) {
    let producer: BaseProducer = crate::support::plaintext()
        .client_config()
        .create()
        .unwrap();
    for (key, value) in messages {
        let mut record = BaseRecord::<Vec<u8>, Vec<u8>>::to(topic).partition(0);
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(v) = value {
            record = record.payload(v);
        }
        producer.send(record).map_err(|(e, _)| e).unwrap();
        producer.poll(std::time::Duration::ZERO);
    }
    producer.flush(std::time::Duration::from_secs(60)).unwrap();
}

fn good(id: i64) -> Raw {
    (
        Some(id.to_string().into_bytes()),
        Some(json!({"id": id, "amount": 1.5}).to_string().into_bytes()),
    )
}

/// Offsets 1..10 (after a good message at offset 0 that made the table):
/// good rows at even offsets; 1 not JSON, 3 an array, 5 a type mismatch,
/// 7 a tombstone, 9 not UTF-8.
fn mixed() -> (Vec<Raw>, BTreeSet<i64>) {
    let mut out = Vec::new();
    for offset in 1..10i64 {
        let key = Some(format!("k{offset}").into_bytes());
        let value: Option<Vec<u8>> = match offset {
            1 => Some(b"{not json".to_vec()),
            3 => Some(b"[1,2]".to_vec()),
            5 => Some(br#"{"id": 5, "amount": "lots"}"#.to_vec()),
            7 => None,
            9 => Some(vec![0xff, 0xfe, b'{']),
            _ => good(offset).1,
        };
        out.push((key, value));
    }
    (out, [1, 3, 5, 7, 9].into())
}

/// A job whose first sync made the table from one good message (offset 0).
fn job_with(topic: &str, on_invalid: &str, extra_topics: &[&str]) -> Job {
    let mut topics = vec![topic];
    topics.extend_from_slice(extra_topics);
    let streams = format!("[[streams]]\ntopic = \"{topic}\"\non_invalid = \"{on_invalid}\"\n");
    let job = Job::new(Catalog::Seaweed, &topics, "", &streams);
    produce_raw(topic, &[good(0)]);
    job.sync();
    job
}

fn offsets_of(rows: &[Value]) -> BTreeSet<i64> {
    rows.iter()
        .map(|r| r["_kafka_offset"].as_i64().unwrap())
        .collect()
}

#[test]
fn sync_on_invalid_fail_stops_only_that_table_and_names_the_message() {
    let topic = unique_name("garbage");
    let other = unique_name("clean");
    create_topic(&topic, 1);
    create_topic(&other, 1);
    let job = job_with(&topic, "fail", &[&other]);
    produce_raw(&topic, &[(None, Some(b"{not json".to_vec())), good(2)]);
    produce_raw(&other, &[good(0)]);
    let out = job.run("sync", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let wanted = format!("{topic}[0]@1: value is not JSON");
    assert!(text.contains(&wanted), "wanted {wanted:?} in:\n{text}");
    // Its table got nothing new; the other committed.
    let rows = read_rows("duckdb", Catalog::Seaweed, &job.table(&other));
    assert_eq!(rows.len(), 1);
    assert_eq!(
        read_rows("duckdb", Catalog::Seaweed, &job.table(&topic)).len(),
        1
    );
}

#[test]
fn sync_on_invalid_dlq_writes_raw_messages_to_the_dead_letter_table_exactly_once() {
    let topic = unique_name("garbage");
    create_topic(&topic, 1);
    let job = job_with(&topic, "dlq", &[]);
    let (messages, invalid) = mixed();
    produce_raw(&topic, &messages);
    let table = job.table(&topic);
    let dlq = format!("{table}__dlq");

    // Crash after the dead letters committed, before the table did.
    let out = job.run(
        "sync",
        &[],
        &[("TOPICBERG_FAULT", "after_dead_letter_commit")],
    );
    assert!(!out.status.success(), "the fault hook kills the sync");
    assert_eq!(
        offsets_of(&read_rows("duckdb", Catalog::Seaweed, &dlq)),
        invalid
    );
    assert_eq!(read_rows("duckdb", Catalog::Seaweed, &table).len(), 1);

    // The rerun commits the table and does not write the dead letters again.
    let report = job.sync();
    let t = table_report(&report, &table);
    assert_eq!(t["status"], "committed", "{t}");
    assert_eq!(t["records"], 4, "{t}");
    assert_eq!(t["dead_letter_records"], 5, "{t}");
    assert_eq!(t["dead_letter_table"], dlq.as_str(), "{t}");
    let rows = read_rows("duckdb", Catalog::Seaweed, &table);
    assert_eq!(offsets_of(&rows), [0, 2, 4, 6, 8].into());
    let dead = read_rows("duckdb", Catalog::Seaweed, &dlq);
    assert_eq!(dead.len(), 5, "no dead letter twice: {dead:?}");
    for d in &dead {
        let offset = d["_kafka_offset"].as_i64().unwrap();
        let (key, value) = &messages[offset as usize - 1];
        let b64 = |b: &Option<Vec<u8>>| {
            b.as_ref().map_or(Value::Null, |b| {
                base64::engine::general_purpose::STANDARD.encode(b).into()
            })
        };
        assert_eq!(d["_kafka_key_base64"], b64(key), "{d}");
        assert_eq!(d["_kafka_value_base64"], b64(value), "{d}");
        assert_eq!(d["_kafka_topic"], topic.as_str());
        assert_eq!(d["_kafka_partition"], 0);
        let error = d["_error"].as_str().unwrap();
        assert!(
            error.starts_with(&format!("{topic}[0]@{offset}: ")),
            "{error}"
        );
    }
    let error_of = |offset: i64| {
        dead.iter().find(|d| d["_kafka_offset"] == offset).unwrap()["_error"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(error_of(1).contains("value is not JSON"));
    assert!(error_of(3).contains("not a JSON object, found array"));
    assert!(error_of(5).contains(r#"field "amount": expected double, found string"#));
    assert!(error_of(7).contains("null value (tombstone)"));
    assert!(error_of(9).contains("invalid UTF-8"));
    let field = dead.iter().find(|d| d["_kafka_offset"] == 5).unwrap();
    assert_eq!(field["_error_field"], "amount");

    // More messages: only the new invalid one is added.
    produce_raw(&topic, &[good(10), (None, Some(b"oops".to_vec()))]);
    let report = job.sync();
    assert_eq!(table_report(&report, &table)["dead_letter_records"], 1);
    assert_eq!(read_rows("duckdb", Catalog::Seaweed, &dlq).len(), 6);
    assert_eq!(read_rows("duckdb", Catalog::Seaweed, &table).len(), 6);
}

#[test]
fn sync_on_invalid_skip_counts_and_logs_the_first_offsets_and_moves_on() {
    let topic = unique_name("garbage");
    create_topic(&topic, 1);
    let job = job_with(&topic, "skip", &[]);
    let (messages, _) = mixed();
    produce_raw(&topic, &messages);
    let report_path = job.path.with_file_name("skip.json");
    let out = job.run(
        "sync",
        &["--report-json", report_path.to_str().unwrap()],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("skipped invalid messages"), "{log}");
    for offset in [1, 3, 5, 7, 9] {
        assert!(
            log.contains(&format!("{topic}[0]@{offset}")),
            "offset {offset} named: {log}"
        );
    }
    let report: Value = serde_json::from_slice(&std::fs::read(&report_path).unwrap()).unwrap();
    let t = table_report(&report, &job.table(&topic));
    assert_eq!(t["skipped_records"], 5, "{t}");
    assert_eq!(t["records"], 4, "{t}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SKIPPED=5"), "{text}");
    // The offsets moved past the skipped messages: nothing is read again.
    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&topic))["records"], 0);
    assert_eq!(
        read_rows("duckdb", Catalog::Seaweed, &job.table(&topic)).len(),
        5
    );

    // Only invalid messages in a sync: the offsets still move.
    produce_raw(&topic, &[(None, Some(b"nope".to_vec()))]);
    let report = job.sync();
    assert_eq!(
        table_report(&report, &job.table(&topic))["skipped_records"],
        1
    );
    let report = job.sync();
    assert_eq!(
        table_report(&report, &job.table(&topic))["skipped_records"],
        0
    );
}

/// On a `_kafka_key` upsert stream a message without a key cannot be
/// placed: it is invalid (dead-lettered here), and so is a tombstone
/// without a key.
#[test]
fn sync_upsert_null_kafka_key_is_an_invalid_message() {
    let topic = unique_name("keyed");
    create_topic(&topic, 1);
    let value = |n: i64| Some(json!({"n": n}).to_string().into_bytes());
    produce_raw(
        &topic,
        &[
            (Some(b"a".to_vec()), value(0)),
            (None, value(1)),
            (Some(b"a".to_vec()), value(2)),
            (None, None),
        ],
    );
    let streams = format!(
        "[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"_kafka_key\"]\non_invalid = \"dlq\"\n"
    );
    let job = Job::new(Catalog::Seaweed, &[&topic], "", &streams);
    let report = job.sync();
    let table = job.table(&topic);
    assert_eq!(table_report(&report, &table)["dead_letter_records"], 2);
    let rows = read_rows("duckdb", Catalog::Seaweed, &table);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["n"], 2);
    let dead = read_rows("duckdb", Catalog::Seaweed, &format!("{table}__dlq"));
    assert_eq!(offsets_of(&dead), [1, 3].into());
    let null_key = dead.iter().find(|d| d["_kafka_offset"] == 1).unwrap();
    assert!(
        null_key["_error"]
            .as_str()
            .unwrap()
            .contains("dedup key value is null"),
        "{null_key}"
    );

    // With the default `fail`, the same message stops the table.
    let strict = Job::new(
        Catalog::Seaweed,
        &[&topic],
        "",
        &format!(
            "[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"_kafka_key\"]\n"
        ),
    );
    let out = strict.run("sync", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "{topic}[0]@1: field \"_kafka_key\": dedup key value is null"
        )),
        "{text}"
    );
}

//! The two ways messages are read (`source.fetch`): topicberg's own
//! record-batch reader (the default on PLAINTEXT) and librdkafka. Both read
//! every codec, skip aborted transactions and stop before an open one, and
//! land the same rows.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::Value;

use crate::support::{
    create_topic, group_offsets, plaintext, read_rows, table_report, Catalog, Job,
};
use crate::testbed::{command, get, unique_name};

/// A job on `topic` reading with `fetch` ("auto" or "librdkafka").
fn job_with_fetch(topic: &str, fetch: &str) -> Job {
    Job::new(
        Catalog::Seaweed,
        &[topic],
        &format!("fetch = \"{fetch}\"\n"),
        "",
    )
}

/// `(partition, offset) -> row` without the columns a sync stamps with its
/// own time, asserting no position twice.
fn rows_by_position(job: &Job, topic: &str) -> BTreeMap<(i64, i64), Value> {
    let mut out = BTreeMap::new();
    for mut row in read_rows("duckdb", Catalog::Seaweed, &job.table(topic)) {
        let object = row.as_object_mut().expect("a row is an object");
        object.retain(|k, _| !k.starts_with("_olake"));
        let position = (
            row["_kafka_partition"].as_i64().unwrap(),
            row["_kafka_offset"].as_i64().unwrap(),
        );
        assert!(out.insert(position, row).is_none(), "{position:?} twice");
    }
    out
}

fn producer(settings: &[(&str, &str)]) -> BaseProducer {
    let mut config = plaintext().client_config();
    config.set("linger.ms", "5");
    for (k, v) in settings {
        config.set(*k, *v);
    }
    config.create().expect("producer")
}

/// Sends `ids` as `{"id": i, "codec": ...}` to partition `i % partitions`.
fn send(producer: &BaseProducer, topic: &str, ids: std::ops::Range<i64>, tag: &str) {
    for id in ids {
        let (key, value) = (
            id.to_string(),
            format!(
                r#"{{"id":{id},"tag":"{tag}","pad":"{}"}}"#,
                "x".repeat((id % 50) as usize)
            ),
        );
        let record = BaseRecord::to(topic)
            .partition((id % 3) as i32)
            .key(&key)
            .payload(&value);
        producer.send(record).expect("queued");
        producer.poll(Duration::ZERO);
    }
}

/// `n` messages from the Java client (Kafka's own producer tool) with
/// `codec`, round robin over the partitions; values `{"id": -k, "tag": "java"}`.
fn java_produce(topic: &str, n: usize, codec: &str) {
    let dir = std::env::temp_dir().join(unique_name("java_payloads"));
    std::fs::create_dir_all(&dir).unwrap();
    let payloads = dir.join("payloads.txt");
    let lines: Vec<String> = (1..=50)
        .map(|k| format!(r#"{{"id":-{k},"tag":"java","pad":"{}"}}"#, "y".repeat(k)))
        .collect();
    std::fs::write(&payloads, lines.join("\n")).unwrap();
    let out = command("java")
        .args(["-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp"])
        .arg(format!("{}/*", get("TESTBED_KAFKA_LIB")))
        .args([
            "org.apache.kafka.tools.ProducerPerformance",
            "--topic",
            topic,
        ])
        .args(["--num-records", &n.to_string(), "--throughput", "-1"])
        .arg("--payload-file")
        .arg(&payloads)
        .args([
            "--producer-props",
            &format!("bootstrap.servers={}", get("TESTBED_KAFKA_BOOTSTRAP")),
        ])
        .args([
            &format!("compression.type={codec}"),
            "linger.ms=20",
            "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
        ])
        .output()
        .expect("java runs");
    assert!(
        out.status.success(),
        "the Java producer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Batches of every codec Kafka has, mixed in each partition, read by both
/// fetch methods: every message once, the same rows.
#[test]
fn sync_reads_every_codec_and_both_fetch_methods_land_the_same_rows() {
    let topic = unique_name("codecs");
    create_topic(&topic, 3);
    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    for (i, codec) in codecs.iter().enumerate() {
        let p = producer(&[("compression.type", codec)]);
        let first = i as i64 * 600;
        send(&p, &topic, first..first + 600, codec);
        p.flush(Duration::from_secs(60)).expect("acknowledged");
    }
    // The Java client frames snappy its own way (snappy-java's stream).
    let java_codecs = ["snappy", "lz4", "gzip", "zstd"];
    for codec in java_codecs {
        java_produce(&topic, 300, codec);
    }
    let batches = job_with_fetch(&topic, "auto");
    let librdkafka = job_with_fetch(&topic, "librdkafka");
    for (job, reader) in [
        (&batches, "topicberg's batch reader"),
        (&librdkafka, "librdkafka"),
    ] {
        let log = job.scratch_file("sync.log");
        let report = job.sync_logged(&log);
        let log = std::fs::read_to_string(&log).unwrap();
        assert!(
            log.contains(&format!("messages are read by {reader}")),
            "{log}"
        );
        let t = table_report(&report, &job.table(&topic));
        assert_eq!(t["records"], 3000 + 1200, "{t}");
        let offsets = group_offsets(&plaintext(), &job.group(), &topic, 3);
        let total: i64 = offsets.iter().map(|o| o.expect("committed")).sum();
        assert_eq!(total, 4200, "{offsets:?}");
    }
    let rows = rows_by_position(&batches, &topic);
    assert_eq!(rows.len(), 4200);
    let java = rows.values().filter(|r| r["tag"] == "java").count();
    assert_eq!(java, 1200, "the Java client's batches of every codec");
    let ids: Vec<i64> = rows
        .values()
        .filter(|r| r["tag"] != "java")
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, (0..3000).collect::<Vec<_>>(), "every id once");
    for codec in codecs {
        let n = rows.values().filter(|r| r["tag"] == codec).count();
        assert_eq!(n, 600, "{codec}");
    }
    assert!(
        rows.values().all(|r| r["_kafka_timestamp"].is_string()),
        "every message has its timestamp"
    );
    assert_eq!(rows, rows_by_position(&librdkafka, &topic), "same rows");
}

/// Committed transactions are read, aborted ones never; a sync stops
/// before a transaction still open (its last stable offset) and the next
/// sync reads it once committed. Both fetch methods agree.
#[test]
fn sync_reads_committed_transactions_only_and_stops_before_an_open_one() {
    let topic = unique_name("txn");
    create_topic(&topic, 3);
    let transactional = producer(&[("transactional.id", &unique_name("txn_producer"))]);
    let timeout = Duration::from_secs(30);
    transactional.init_transactions(timeout).expect("init");
    let plain = producer(&[]);
    let txn = |ids: std::ops::Range<i64>, tag: &str, commit: bool| {
        transactional.begin_transaction().expect("begin");
        send(&transactional, &topic, ids, tag);
        transactional.flush(timeout).expect("acknowledged");
        if commit {
            transactional.commit_transaction(timeout).expect("commit");
        } else {
            transactional.abort_transaction(timeout).expect("abort");
        }
    };
    txn(0..300, "committed", true);
    txn(300..600, "aborted", false);
    send(&plain, &topic, 600..630, "plain");
    plain.flush(timeout).expect("acknowledged");
    txn(630..900, "committed", true);
    transactional.begin_transaction().expect("begin");
    send(&transactional, &topic, 900..960, "open");
    transactional
        .flush(timeout)
        .expect("the open transaction's messages are written");

    let batches = job_with_fetch(&topic, "auto");
    let librdkafka = job_with_fetch(&topic, "librdkafka");
    let tags = |job: &Job| -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for r in rows_by_position(job, &topic).values() {
            *out.entry(r["tag"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        out
    };
    let expected = BTreeMap::from([("committed".to_string(), 570), ("plain".to_string(), 30)]);
    for job in [&batches, &librdkafka] {
        let report = job.sync();
        assert_eq!(
            table_report(&report, &job.table(&topic))["records"],
            600,
            "{report}"
        );
        assert_eq!(tags(job), expected);
    }
    let committed_before = group_offsets(&plaintext(), &batches.group(), &topic, 3);

    transactional
        .commit_transaction(timeout)
        .expect("commit the open one");
    for job in [&batches, &librdkafka] {
        let report = job.sync();
        let t = table_report(&report, &job.table(&topic));
        assert_eq!(t["records"], 60, "only the newly committed messages: {t}");
        let mut expected = expected.clone();
        expected.insert("open".to_string(), 60);
        assert_eq!(tags(job), expected);
    }
    let ids: Vec<i64> = rows_by_position(&batches, &topic)
        .values()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "no message twice");
    assert_eq!(
        rows_by_position(&batches, &topic),
        rows_by_position(&librdkafka, &topic),
        "same rows"
    );
    let after = group_offsets(&plaintext(), &batches.group(), &topic, 3);
    assert!(
        after.iter().zip(&committed_before).all(|(a, b)| a > b),
        "the second sync moved every partition past the commit marker: {committed_before:?} -> {after:?}"
    );
}

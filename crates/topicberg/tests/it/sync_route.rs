//! One topic routed to many tables by a `table` template: by a field of
//! the value and by a header, in append and upsert mode; a message that
//! names no table fails the sync naming it, or is passed with
//! `on_invalid = "skip"`; two texts that make one table name collide.

use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{json, Value};

use crate::support::{create_topic, plaintext, read_rows, Catalog, Job};
use crate::testbed::unique_name;

/// Produces `(key, value, tenant header)` messages to partition
/// `key % 2`.
fn produce(topic: &str, messages: &[(i64, Value, Option<&str>)]) {
    let producer: BaseProducer = plaintext().client_config().create().expect("producer");
    for (key, value, tenant) in messages {
        let (key, value) = (key.to_string(), value.to_string());
        let mut record = BaseRecord::to(topic)
            .key(&key)
            .payload(&value)
            .partition((key.parse::<i32>().unwrap()) % 2);
        if let Some(t) = tenant {
            record = record.headers(OwnedHeaders::new().insert(Header {
                key: "tenant",
                value: Some(*t),
            }));
        }
        producer.send(record).map_err(|(e, _)| e).expect("send");
    }
    producer.flush(Duration::from_secs(60)).expect("flushed");
}

/// `(id, v)` of a table's rows, by id.
fn rows(job: &Job, table: &str) -> Vec<(i64, String)> {
    let mut rows: Vec<(i64, String)> = read_rows("duckdb", Catalog::Seaweed, &job.table(table))
        .iter()
        .map(|r| {
            (
                r["id"].as_i64().unwrap(),
                r["v"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn job(topic: &str, stream: &str) -> Job {
    let streams = format!("[[streams]]\ntopic = \"{topic}\"\n{stream}");
    Job::new(Catalog::Seaweed, &[topic], "", &streams)
}

#[test]
fn one_topic_is_routed_to_a_table_per_field_value_and_per_header() {
    let topic = unique_name("route");
    create_topic(&topic, 2);
    let m = |id: i64, kind: &str, v: &str, tenant| {
        (id, json!({"id": id, "kind": kind, "v": v}), tenant)
    };
    produce(
        &topic,
        &[
            m(1, "Red", "a", Some("acme")),
            m(2, "blue", "b", Some("acme")),
            m(3, "Red", "c", Some("zeta")),
        ],
    );
    // By a field, upsert: a table per kind, each message once.
    let by_field = job(
        &topic,
        "mode = \"upsert\"\ndedup_keys = [\"id\"]\ntable = \"t_{kind}\"\n",
    );
    by_field.sync();
    assert_eq!(rows(&by_field, "t_red"), [(1, "a".into()), (3, "c".into())]);
    assert_eq!(rows(&by_field, "t_blue"), [(2, "b".into())]);
    // By a header, append.
    let by_header = job(&topic, "table = \"{header:tenant}_{topic}\"\n");
    by_header.sync();
    let acme = format!("acme_{topic}");
    assert_eq!(rows(&by_header, &acme), [(1, "a".into()), (2, "b".into())]);

    // A new kind, an update, and a message without `kind`: the field
    // route fails naming it and commits nothing; the header route takes
    // all three.
    produce(
        &topic,
        &[
            m(4, "green", "d", Some("zeta")),
            m(1, "Red", "a2", Some("acme")),
            (5, json!({"id": 5, "v": "e"}), Some("acme")),
        ],
    );
    let stderr = by_field.sync_failing();
    assert!(
        stderr.contains(&format!("{topic}[1]@"))
            && stderr.contains("field \"kind\"")
            && stderr.contains("on_invalid = \"skip\""),
        "{stderr}"
    );
    assert_eq!(rows(&by_field, "t_red"), [(1, "a".into()), (3, "c".into())]);
    by_header.sync();
    assert_eq!(
        rows(&by_header, &acme),
        [
            (1, "a".into()),
            (1, "a2".into()),
            (2, "b".into()),
            (5, "e".into())
        ]
    );
    assert_eq!(
        rows(&by_header, &format!("zeta_{topic}")),
        [(3, "c".into()), (4, "d".into())]
    );
    // Passed with `on_invalid = "skip"`: the rest lands, the new table too.
    let mut text = std::fs::read_to_string(&by_field.path).unwrap();
    text.push_str("on_invalid = \"skip\"\n");
    std::fs::write(&by_field.path, text).unwrap();
    by_field.sync();
    assert_eq!(
        rows(&by_field, "t_red"),
        [(1, "a2".into()), (3, "c".into())]
    );
    assert_eq!(rows(&by_field, "t_green"), [(4, "d".into())]);
    assert_eq!(rows(&by_field, "t_blue"), [(2, "b".into())]);

    // "RED" makes table t_red too, which "Red" named: a collision.
    produce(&topic, &[m(6, "RED", "f", None)]);
    let stderr = by_field.sync_failing();
    assert!(
        stderr.contains("\"t_Red\" and \"t_RED\" both name table t_red"),
        "{stderr}"
    );

    // A table another stream of the job writes: the routed table fails.
    let (routed, plain) = (unique_name("route_more"), unique_name("route_plain"));
    create_topic(&routed, 2);
    create_topic(&plain, 1);
    produce(&plain, &[(7, json!({"id": 7, "v": "g"}), None)]);
    produce(&routed, &[m(8, "yellow", "h", None)]);
    let streams = format!(
        "[[streams]]\ntopic = \"{routed}\"\ntable = \"t_{{kind}}\"\n\
         [[streams]]\ntopic = \"{plain}\"\ntable = \"t_yellow\"\n"
    );
    let shared = Job::new(Catalog::Seaweed, &[&routed, &plain], "", &streams);
    let stderr = shared.sync_failing();
    assert!(
        stderr.contains(&format!("table {}", shared.table("t_yellow")))
            && stderr.contains(&format!("written by topic {plain}")),
        "{stderr}"
    );
}

/// A sync killed between two routed tables' commits (and another before
/// the group's commit), then a whole one: every message once, in its
/// table (append mode, so a message written twice would show).
#[test]
fn a_routed_sync_killed_between_its_tables_commits_loses_and_duplicates_nothing() {
    use std::os::unix::process::ExitStatusExt;
    let topic = unique_name("route_kill");
    create_topic(&topic, 2);
    let m = |id: i64, kind: &str| {
        (
            id,
            json!({"id": id, "kind": kind, "v": format!("v{id}")}),
            None,
        )
    };
    let job = job(&topic, "table = \"k_{kind}\"\n");
    let mut expected: [Vec<(i64, String)>; 2] = [Vec::new(), Vec::new()];
    for (round, fault) in ["after_first_table_commit", "before_group_commit"]
        .iter()
        .enumerate()
    {
        let base = 10 * round as i64;
        let messages: Vec<_> = (0..6)
            .map(|i| m(base + i, ["a", "b"][i as usize % 2]))
            .collect();
        produce(&topic, &messages);
        for i in 0..6 {
            expected[i as usize % 2].push((base + i, format!("v{}", base + i)));
        }
        let out = job.run("sync", &[], &[("TOPICBERG_FAULT", fault)]);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGKILL),
            "killed at {fault}"
        );
        job.sync();
        for (kind, rows_expected) in ["a", "b"].iter().zip(&expected) {
            assert_eq!(
                &rows(&job, &format!("k_{kind}")),
                rows_expected,
                "after {fault}"
            );
        }
    }
}

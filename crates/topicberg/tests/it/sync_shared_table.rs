//! Several topics into one table: two `[[streams]]` entries that name one
//! table (as two shards of a database would) write it together, each topic
//! with its own offsets in the table, in upsert and append mode; a column
//! only one topic's messages carry appears; a sync killed between the two
//! topics' commits or before the group commit, then a whole sync, loses
//! and duplicates nothing; when both topics bring a new field in one sync
//! the second commit waits for the next sync, never writing one topic's
//! values into the other's column.

use std::os::unix::process::ExitStatusExt;

use serde_json::{json, Value};

use crate::support::{
    create_topic, group_offsets, plaintext, produce, read_rows, watermarks, Catalog, Job,
};
use crate::testbed::unique_name;

/// A job syncing `topics` into the one table `table`, each stream with
/// `stream` settings.
fn job(topics: &[&str], table: &str, stream: &str) -> Job {
    let streams: String = topics
        .iter()
        .map(|t| format!("[[streams]]\ntopic = \"{t}\"\ntable = \"{table}\"\n{stream}"))
        .collect();
    Job::new(Catalog::Seaweed, topics, "", &streams)
}

/// `(id, v, only_b)` messages keyed by id; `only_b` is a field of topic
/// B's messages only.
fn messages(ids: std::ops::Range<i64>, v: &str, only_b: bool) -> Vec<(String, String)> {
    ids.map(|id| {
        let mut value = json!({"id": id, "v": format!("{v}{id}")});
        if only_b {
            value["only_b"] = json!(format!("b{id}"));
        }
        (id.to_string(), value.to_string())
    })
    .collect()
}

/// The table's `(id, v, only_b)` rows by id, as DuckDB reads them.
fn rows(job: &Job, table: &str) -> Vec<(i64, String, Option<String>)> {
    let name = format!("{}_topics.{table}", job.name);
    let mut rows: Vec<_> = read_rows("duckdb", Catalog::Seaweed, &name)
        .iter()
        .map(|r: &Value| {
            (
                r["id"].as_i64().unwrap(),
                r["v"].as_str().unwrap().to_owned(),
                r["only_b"].as_str().map(str::to_owned),
            )
        })
        .collect();
    rows.sort();
    rows
}

/// The rows `(id, v)` expected, `only_b` for topic B's.
fn expect(ids: std::ops::Range<i64>, v: &str, only_b: bool) -> Vec<(i64, String, Option<String>)> {
    ids.map(|id| (id, format!("{v}{id}"), only_b.then(|| format!("b{id}"))))
        .collect()
}

/// Every partition of `topic` committed by the group up to its end.
fn assert_group_at_end(job: &Job, topic: &str, partitions: i32) {
    let connection = plaintext();
    let ends: Vec<Option<i64>> = (0..partitions)
        .map(|p| Some(watermarks(&connection, topic, p).1))
        .collect();
    assert_eq!(
        group_offsets(&connection, &job.group(), topic, partitions),
        ends,
        "{topic}: the group's offsets"
    );
}

#[test]
fn two_topics_upsert_into_one_table_and_a_kill_between_their_commits_loses_nothing() {
    let (a, b) = (unique_name("shard_a"), unique_name("shard_b"));
    create_topic(&a, 2);
    create_topic(&b, 3);
    let table = unique_name("shared");
    let job = job(
        &[&a, &b],
        &table,
        "mode = \"upsert\"\ndedup_keys = [\"id\"]\n",
    );
    produce(&a, &messages(1..21, "a", false));
    produce(&b, &messages(101..121, "b", true));
    let report = job.sync();
    let reported: Vec<&Value> = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["table"].as_str().unwrap().ends_with(&table))
        .collect();
    assert_eq!(reported.len(), 2, "one entry per topic: {report:#}");
    let mut expected = expect(1..21, "a", false);
    expected.extend(expect(101..121, "b", true));
    expected.sort();
    assert_eq!(rows(&job, &table), expected);

    for (round, fault) in ["after_first_table_commit", "before_group_commit"]
        .iter()
        .enumerate()
    {
        let v = format!("r{round}_");
        produce(&a, &messages(1..11, &format!("a{v}"), false));
        produce(&b, &messages(101..111, &format!("b{v}"), true));
        let out = job.run("sync", &[], &[("TOPICBERG_FAULT", fault)]);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGKILL),
            "killed at {fault}"
        );
        job.sync();
        let mut expected = expect(1..11, &format!("a{v}"), false);
        expected.extend(expect(11..21, "a", false));
        expected.extend(expect(101..111, &format!("b{v}"), true));
        expected.extend(expect(111..121, "b", true));
        expected.sort();
        assert_eq!(rows(&job, &table), expected, "after {fault}");
    }
    assert_group_at_end(&job, &a, 2);
    assert_group_at_end(&job, &b, 3);

    // Both topics bring a new field in one sync: the second commit finds
    // the schema changed under the files it wrote with its new column, and
    // commits nothing (its field id may be the other column's now); the
    // next sync writes it.
    let with = |id: i64, field: &str| {
        let value = json!({"id": id, "v": format!("n{id}"), field: format!("{field}{id}")});
        vec![(id.to_string(), value.to_string())]
    };
    produce(&a, &with(1, "new_a"));
    produce(&b, &with(101, "new_b"));
    let out = job.run("sync", &[], &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("another writer changed the table's schema"),
        "{said}"
    );
    job.sync();
    let name = format!("{}_topics.{table}", job.name);
    let read = read_rows("duckdb", Catalog::Seaweed, &name);
    let row = |id: i64| read.iter().find(|r| r["id"] == json!(id)).unwrap().clone();
    assert_eq!(
        (
            row(1)["v"].clone(),
            row(1)["new_a"].clone(),
            row(1)["new_b"].clone()
        ),
        (json!("n1"), json!("new_a1"), Value::Null)
    );
    assert_eq!(
        (
            row(101)["v"].clone(),
            row(101)["new_a"].clone(),
            row(101)["new_b"].clone()
        ),
        (json!("n101"), Value::Null, json!("new_b101"))
    );
    assert_eq!(read.len(), 40);
}

#[test]
fn two_topics_append_into_one_table_every_message_once() {
    let (a, b) = (unique_name("log_a"), unique_name("log_b"));
    create_topic(&a, 2);
    create_topic(&b, 2);
    let table = unique_name("shared_log");
    let job = job(&[&a, &b], &table, "");
    produce(&a, &messages(1..6, "a", false));
    produce(&b, &messages(101..104, "b", true));
    job.sync();
    produce(&a, &messages(6..8, "a", false));
    job.sync();
    let mut expected = expect(1..8, "a", false);
    expected.extend(expect(101..104, "b", true));
    expected.sort();
    assert_eq!(rows(&job, &table), expected);
    // A third sync with nothing new writes nothing twice.
    job.sync();
    assert_eq!(rows(&job, &table), expected);
}

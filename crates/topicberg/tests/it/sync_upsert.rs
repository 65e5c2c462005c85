//! `topicberg sync` in upsert mode: one row per key, old rows retired by
//! position deletes (v2), deletion vectors (v3) or equality deletes, read
//! the same by every engine.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::support::{
    create_topic, produce, read_lines, read_rows, sample_messages, table_report, try_read,
    versioned_messages, Catalog, Job, DV_READERS, READERS,
};
use crate::testbed::unique_name;

/// A job over `topics`, every one in upsert mode on `dedup`, for `engines`.
fn upsert_job(catalog: Catalog, topics: &[&str], dedup: &str, engines: &str) -> Job {
    let streams: String = topics
        .iter()
        .map(|t| {
            format!("[[streams]]\ntopic = \"{t}\"\nmode = \"upsert\"\ndedup_keys = [\"{dedup}\"]\n")
        })
        .collect();
    let job = Job::new(catalog, topics, "", &streams);
    let text = std::fs::read_to_string(&job.path).unwrap();
    let text = text.replacen('\n', &format!("\ntarget_engines = {engines}\n"), 1);
    std::fs::write(&job.path, text).unwrap();
    job
}

fn commit_report(report: &Value, table: &str) -> Value {
    table_report(report, table)["commit"].clone()
}

/// Latest value per id, from the messages produced (the model).
fn model(batches: &[Vec<(String, String)>]) -> BTreeMap<i64, Value> {
    let mut latest = BTreeMap::new();
    for (_, value) in batches.iter().flatten() {
        let v: Value = serde_json::from_str(value).unwrap();
        latest.insert(v["id"].as_i64().unwrap(), v);
    }
    latest
}

fn assert_rows_match_model(rows: &[Value], model: &BTreeMap<i64, Value>, what: &str) {
    let mut by_id = BTreeMap::new();
    for r in rows {
        assert!(
            by_id.insert(r["id"].as_i64().unwrap(), r).is_none(),
            "{what}: id {} twice",
            r["id"]
        );
    }
    assert_eq!(
        by_id.keys().collect::<Vec<_>>(),
        model.keys().collect::<Vec<_>>(),
        "{what}: keys"
    );
    for (id, expected) in model {
        for field in ["status", "city", "tier", "amount"] {
            if let Some(e) = expected.get(field) {
                assert_eq!(&by_id[id][field], e, "{what}: id {id} field {field}");
            }
        }
    }
}

/// The delete format the seeds' run expects.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Deletes {
    Position,
    Dv,
    Equality,
}

/// What PyIceberg 0.12's scan planning raises on equality delete files.
const EQUALITY_REFUSAL: &str = "PyIceberg does not yet support equality deletes";

fn seeds_upsert(catalog: Catalog, engines: &str, deletes: Deletes) {
    let customers = unique_name("customers");
    let orders = unique_name("orders");
    create_topic(&customers, 1);
    create_topic(&orders, 1);
    let first = (
        sample_messages("customers", "first"),
        sample_messages("orders", "first"),
    );
    produce(&customers, &first.0);
    produce(&orders, &first.1);
    let job = upsert_job(catalog, &[&customers, &orders], "id", engines);
    if deletes == Deletes::Equality {
        let text = std::fs::read_to_string(&job.path).unwrap();
        let text = text.replace(
            "dedup_keys = [\"id\"]\n",
            "dedup_keys = [\"id\"]\ndelete_format = \"equality\"\n",
        );
        assert_eq!(text.matches("delete_format").count(), 2, "{text}");
        std::fs::write(&job.path, text).unwrap();
    }
    let report = job.sync();
    assert_eq!(
        commit_report(&report, &job.table(&orders))["addedRecords"],
        40
    );

    let second = (
        sample_messages("customers", "second"),
        sample_messages("orders", "second"),
    );
    produce(&customers, &second.0);
    produce(&orders, &second.1);
    let report = job.sync();
    let o = commit_report(&report, &job.table(&orders));
    let c = commit_report(&report, &job.table(&customers));
    assert_eq!(o["addedDataFiles"], 1, "{o}");
    assert_eq!(o["addedRecords"], 8, "{o}");
    assert_eq!(c["addedRecords"], 4, "{c}");
    match deletes {
        Deletes::Position | Deletes::Dv => {
            assert_eq!(o["addedPositionalDeletes"], 3, "{o}");
            assert_eq!(c["addedPositionalDeletes"], 2, "{c}");
            assert_eq!(o["addedEqualityDeleteFiles"], 0, "{o}");
        }
        Deletes::Equality => {
            for (r, n) in [(&o, 3), (&c, 2)] {
                assert_eq!(r["addedEqualityDeleteFiles"], 1, "{r}");
                assert_eq!(r["addedEqualityDeletes"], n, "{r}");
                assert_eq!(r["addedPositionalDeleteFiles"], 0, "{r}");
                assert_eq!(r["addedPositionalDeletes"], 0, "{r}");
                assert_eq!(r["addedDVs"], 0, "{r}");
            }
        }
    }
    match deletes {
        Deletes::Dv => {
            assert_eq!(o["addedDVs"], 1, "{o}");
            assert_eq!(o["addedPositionalDeleteFiles"], 0, "{o}");
        }
        Deletes::Position => {
            assert_eq!(o["addedPositionalDeleteFiles"], 1, "{o}");
            assert_eq!(o["addedDVs"], 0, "{o}");
        }
        Deletes::Equality => {}
    }

    // PyIceberg refuses equality deletes in its scan planning, and so do
    // Polars and Daft, which plan with it; chDB (ClickHouse 26.9), Trino 476
    // and Daft 0.7.26 refuse deletion vectors.
    let engines_to_read: &[&str] = match deletes {
        Deletes::Position => &READERS,
        Deletes::Dv => &DV_READERS,
        Deletes::Equality => &["duckdb", "spark", "datafusion", "chdb", "trino"],
    };
    // Engines that cannot read these deletes refuse, never print rows.
    let refusals: &[(&str, &str)] = match deletes {
        Deletes::Position => &[],
        Deletes::Dv => &[
            ("chdb", "Position deletes are supported only"),
            ("trino", "Unexpected PUFFIN file format"),
            ("daft", "is not a valid parquet file"),
        ],
        Deletes::Equality => &[
            ("pyiceberg", EQUALITY_REFUSAL),
            ("polars", EQUALITY_REFUSAL),
            ("daft", EQUALITY_REFUSAL),
        ],
    };
    for (engine, says) in refusals {
        let refused = try_read(engine, catalog, &job.table(&orders));
        let why = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success() && why.contains(says),
            "{engine} must refuse these deletes, not print rows: {why}"
        );
    }
    for (topic, batches, expected) in [
        (&customers, vec![first.0.clone(), second.0.clone()], 10),
        (&orders, vec![first.1.clone(), second.1.clone()], 45),
    ] {
        let table = job.table(topic);
        let reference = read_lines("spark", catalog, &table);
        assert_eq!(
            reference.lines().count(),
            expected,
            "{table}: one row per key"
        );
        for engine in engines_to_read {
            assert_eq!(
                read_lines(engine, catalog, &table),
                reference,
                "{engine} differs from Spark on {table}"
            );
        }
        let rows = read_rows("duckdb", catalog, &table);
        assert_rows_match_model(&rows, &model(&batches), &table);
        let repeated = rows.iter().filter(|r| r["_op_type"] == "u").count();
        assert_eq!(
            repeated,
            if topic == &orders { 3 } else { 2 },
            "{table}: _op_type u for repeated keys"
        );
    }
}

#[test]
fn sync_upsert_seeds_with_position_deletes() {
    seeds_upsert(
        Catalog::Seaweed,
        r#"["spark","duckdb","trino"]"#,
        Deletes::Position,
    );
}

#[test]
fn sync_upsert_seeds_with_deletion_vectors_for_databricks() {
    // SeaweedFS's table bucket refuses *.puffin objects: DVs go to the
    // reference catalog (which validates every commit strictly).
    seeds_upsert(
        Catalog::Fixture,
        r#"["databricks","duckdb","spark"]"#,
        Deletes::Dv,
    );
}

#[test]
fn sync_upsert_seeds_with_equality_deletes() {
    // Equality delete files on `_olake_id`; PyIceberg (and Polars and Daft,
    // which plan with it) refuse them.
    seeds_upsert(Catalog::Seaweed, r#"["spark","duckdb"]"#, Deletes::Equality);
}

/// Produces `(key, value or tombstone)` messages.
fn produce_maybe_null(topic: &str, messages: &[(String, Option<String>)]) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = crate::support::plaintext()
        .client_config()
        .create()
        .unwrap();
    for (key, value) in messages {
        let mut record = BaseRecord::<String, String>::to(topic).key(key);
        if let Some(v) = value {
            record = record.payload(v);
        }
        producer.send(record).map_err(|(e, _)| e).unwrap();
        producer.poll(std::time::Duration::ZERO);
    }
    producer.flush(std::time::Duration::from_secs(60)).unwrap();
}

fn add_partitions(topic: &str, total: usize) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = crate::support::plaintext()
        .client_config()
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let results = rt
        .block_on(
            admin.create_partitions(&[NewPartitions::new(topic, total)], &AdminOptions::new()),
        )
        .unwrap();
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("adding partitions to {t}: {e}"));
    }
}

/// A deterministic stream of upserts and tombstones over `keys` keys.
struct Workload {
    seq: u64,
    keys: u64,
    model: BTreeMap<String, Option<u64>>,
}

impl Workload {
    fn round(&mut self, n: u64) -> Vec<(String, Option<String>)> {
        (0..n)
            .map(|_| {
                self.seq += 1;
                // A cheap fixed permutation so keys repeat unevenly.
                let key = format!("k{}", (self.seq * 7919) % self.keys);
                let value = if self.seq.is_multiple_of(11) {
                    None
                } else {
                    Some(format!(
                        r#"{{"key":"{key}","seq":{},"amount":{}.25}}"#,
                        self.seq,
                        self.seq % 97
                    ))
                };
                self.model
                    .insert(key.clone(), value.as_ref().map(|_| self.seq));
                (key, value)
            })
            .collect()
    }

    fn check(&self, rows: &[Value], what: &str) {
        let mut got = BTreeMap::new();
        for r in rows {
            let key = r["key"].as_str().unwrap().to_string();
            assert!(
                got.insert(key.clone(), r["seq"].as_u64().unwrap())
                    .is_none(),
                "{what}: key {key} twice"
            );
        }
        let want: BTreeMap<String, u64> = self
            .model
            .iter()
            .filter_map(|(k, v)| v.map(|v| (k.clone(), v)))
            .collect();
        assert_eq!(got.len(), want.len(), "{what}: row count");
        assert_eq!(got, want, "{what}: latest value per key");
    }
}

/// Several syncs of upserts and tombstones on a `_kafka_key` topic, with
/// crashes at every stage, a lost key index and a repartition in between;
/// after every sync the table equals "latest value per key".
///
/// `every_sync_readers` are compared with the model after every sync (DuckDB
/// always is); `final_readers` must equal DuckDB at the end.
fn upsert_model_run(
    catalog: Catalog,
    engines: &str,
    every_sync_readers: &[&str],
    final_readers: &[&str],
) {
    let topic = unique_name("upsert_model");
    create_topic(&topic, 3);
    let job = upsert_job(catalog, &[&topic], "_kafka_key", engines);
    let table = job.table(&topic);
    let mut work = Workload {
        seq: 0,
        keys: 300,
        model: BTreeMap::new(),
    };
    let check = |work: &Workload, what: &str| {
        for engine in std::iter::once(&"duckdb").chain(every_sync_readers) {
            work.check(
                &read_rows(engine, catalog, &table),
                &format!("{engine}, {what}"),
            );
        }
    };

    produce_maybe_null(&topic, &work.round(900));
    job.sync();
    check(&work, "after the first sync");

    for fault in [
        "after_records:200",
        "before_iceberg_commit",
        "before_key_index_update",
        "before_group_commit",
    ] {
        produce_maybe_null(&topic, &work.round(400));
        let out = job.run("sync", &[], &[("TOPICBERG_FAULT", fault)]);
        assert!(
            !out.status.success(),
            "the sync should have been killed at {fault}"
        );
        let left = spill_folders(&job);
        if fault.starts_with("after_records") {
            assert_eq!(
                left.len(),
                1,
                "a sync killed mid-drain leaves its spill folder"
            );
        }
        job.sync();
        check(&work, &format!("after a crash at {fault} and a rerun"));
        let left = spill_folders(&job);
        assert!(
            left.is_empty(),
            "spill folders left after a crash at {fault} and a rerun: {left:?}"
        );
    }

    std::fs::remove_dir_all(job.path.with_file_name(".topicberg-state"))
        .expect("the key index existed");
    produce_maybe_null(&topic, &work.round(300));
    job.sync();
    check(&work, "after the key index was deleted");

    add_partitions(&topic, 6);
    produce_maybe_null(&topic, &work.round(600));
    job.sync();
    check(&work, "after the topic was repartitioned");

    let reference = read_lines("duckdb", catalog, &table);
    for engine in final_readers {
        assert_eq!(
            read_lines(engine, catalog, &table),
            reference,
            "{engine} differs from DuckDB"
        );
    }
}

#[test]
fn sync_upsert_model_with_position_deletes_crashes_lost_index_and_repartition() {
    upsert_model_run(
        Catalog::Seaweed,
        r#"["spark","duckdb","pyiceberg"]"#,
        &["pyiceberg"],
        // Not Trino: slow per query; it reads v2 upsert tables above.
        &["spark", "polars", "datafusion", "chdb", "daft"],
    );
}

#[test]
fn sync_upsert_model_with_deletion_vectors_crashes_lost_index_and_repartition() {
    // Spark is the reference reader for deletion vectors: every sync.
    // chDB, Trino 476 and Daft refuse deletion vectors (asserted above).
    upsert_model_run(
        Catalog::Fixture,
        r#"["databricks","duckdb","spark"]"#,
        &["spark"],
        &["pyiceberg", "polars", "datafusion"],
    );
}

/// On a stream deduplicated on a payload field a tombstone cannot say which
/// row it deletes: the table's sync fails naming topic, partition and
/// offset, and nothing of that sync is committed for it.
#[test]
fn sync_upsert_tombstone_on_payload_key_fails_the_table_and_commits_nothing() {
    let topic = unique_name("tombstone_payload");
    create_topic(&topic, 1);
    produce_maybe_null(
        &topic,
        &[
            ("1".into(), Some(r#"{"id":1,"v":"a"}"#.into())),
            ("2".into(), Some(r#"{"id":2,"v":"b"}"#.into())),
        ],
    );
    let job = upsert_job(Catalog::Seaweed, &[&topic], "id", r#"["spark","duckdb"]"#);
    job.sync();
    produce_maybe_null(
        &topic,
        &[
            ("1".into(), Some(r#"{"id":1,"v":"c"}"#.into())),
            ("2".into(), None),
        ],
    );
    let out = job.run("sync", &[], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("{topic}[0]@3")),
        "names topic, partition, offset: {stdout}"
    );
    assert!(stdout.contains("tombstone"), "{stdout}");
    let rows = read_rows("duckdb", Catalog::Seaweed, &job.table(&topic));
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter().any(|r| r["id"] == 1 && r["v"] == "a"),
        "the update before the tombstone was not committed either: {rows:?}"
    );
    // The offsets did not move: the next sync reads the same messages again.
    let again = job.run("sync", &[], &[]);
    assert_eq!(again.status.code(), Some(1));
}

/// Regression: a position delete file names one data file ("file-scoped").
/// Polars 2.1 refuses one naming several ("position delete file not limited
/// to one data file"), which a sync retiring rows of two files wrote.
#[test]
fn sync_upsert_position_deletes_are_one_file_per_data_file_and_polars_reads_them() {
    let topic = unique_name("scoped_deletes");
    create_topic(&topic, 1);
    let job = upsert_job(Catalog::Seaweed, &[&topic], "id", r#"["spark", "polars"]"#);
    produce(&topic, &versioned_messages(0..10, "a"));
    job.sync();
    produce(&topic, &versioned_messages(10..20, "b"));
    job.sync();
    // Five rows of each earlier data file retire.
    produce(&topic, &versioned_messages(5..15, "c"));
    let report = job.sync();
    let commit = commit_report(&report, &job.table(&topic));
    assert_eq!(commit["addedPositionalDeleteFiles"], 2, "{commit}");
    assert_eq!(commit["addedPositionalDeletes"], 10, "{commit}");
    let want: BTreeMap<i64, String> = (0..20)
        .map(|i| {
            let version = match i {
                0..5 => "a",
                5..15 => "c",
                _ => "b",
            };
            (i, format!("{version}{i}"))
        })
        .collect();
    for engine in ["duckdb", "polars", "pyiceberg", "spark"] {
        let rows = read_rows(engine, Catalog::Seaweed, &job.table(&topic));
        let got: BTreeMap<i64, String> = rows
            .iter()
            .map(|r| {
                (
                    r["id"].as_i64().unwrap(),
                    r["v"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(rows.len(), 20, "{engine}: one row per key");
        assert_eq!(got, want, "{engine}: the latest message per key");
    }
}

/// The upsert spill folders under the job's state directory.
fn spill_folders(job: &Job) -> Vec<std::path::PathBuf> {
    let spill = job.path.with_file_name(".topicberg-state").join("spill");
    let Ok(entries) = std::fs::read_dir(&spill) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("upsert-"))
        .map(|e| e.path())
        .collect()
}

//! Several syncs of one job at the same time (a cron entry overlapping its
//! previous run, two `serve` instances, a Kubernetes CronJob): every
//! message lands once, every key keeps its latest message. Each process
//! has its own state folder (as on two machines), so the job lock does not
//! keep them apart: the commit check on the table's offsets does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    create_topic, group_offsets, plaintext, produce_to_partitions, read_rows, table_report,
    wait_until, Catalog, Job, READERS,
};
use crate::testbed::unique_name;

/// A copy of `job`'s file in a folder of its own: the same job (name,
/// consumer group, tables) with its own state folder, as another machine
/// running it would have.
fn copy_of(job: &Job, n: usize) -> Job {
    let dir = job.path.parent().unwrap().join(format!("machine-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("job.toml");
    std::fs::copy(&job.path, &path).unwrap();
    Job {
        name: job.name.clone(),
        path,
    }
}

/// Starts `topicberg sync` on `job` with `env`; its report and log go to
/// files beside the job file.
fn spawn(job: &Job, env: &[(&str, &str)]) -> (crate::support::Running, PathBuf, PathBuf) {
    let report = job.scratch_file("report.json");
    let log = job.scratch_file("sync.log");
    (job.spawn_sync_with(&report, &log, env), report, log)
}

fn finish(child: &mut crate::support::Running, report: &Path, log: &Path) -> Value {
    let status = child.wait().unwrap();
    let log = std::fs::read_to_string(log).unwrap_or_default();
    assert!(status.success(), "sync failed ({status}):\n{log}");
    serde_json::from_slice(&std::fs::read(report).expect("report written")).expect("report")
}

/// `count` messages per partition over `keys` ids per partition, version
/// `round`, `o` = the message's index in its partition.
fn messages(
    partitions: i32,
    first: i64,
    count: i64,
    keys: i64,
    round: i64,
) -> Vec<(i32, String, String)> {
    let mut out = Vec::new();
    for p in 0..partitions {
        for i in first..first + count {
            let id = i64::from(p) * 1_000_000 + i % keys;
            let value = json!({"id": id, "p": p, "o": i, "round": round});
            out.push((p, id.to_string(), value.to_string()));
        }
    }
    out
}

/// Append: every (partition, offset) produced exactly once.
fn assert_each_message_once(engine: &str, catalog: Catalog, table: &str, per_partition: i64) {
    let rows = read_rows(engine, catalog, table);
    let mut seen: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    for r in &rows {
        assert_eq!(r["_kafka_offset"], r["o"], "{engine}: {r}");
        let key = (r["p"].as_i64().unwrap(), r["o"].as_i64().unwrap());
        *seen.entry(key).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(
        twice.is_empty(),
        "{engine}: {table} holds messages twice: {twice:?}"
    );
    let want: Vec<(i64, i64)> = (0..3)
        .flat_map(|p| (0..per_partition).map(move |o| (p, o)))
        .collect();
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        want,
        "{engine}: {table}"
    );
}

/// Upsert: one row per key, its latest message.
fn assert_latest_per_key(engine: &str, catalog: Catalog, table: &str, want: &BTreeMap<i64, i64>) {
    let mut got: BTreeMap<i64, i64> = BTreeMap::new();
    for r in read_rows(engine, catalog, table) {
        let id = r["id"].as_i64().unwrap();
        let prior = got.insert(id, r["o"].as_i64().unwrap());
        assert!(
            prior.is_none(),
            "{engine}: key {id} has two rows in {table}"
        );
    }
    assert_eq!(&got, want, "{engine}: {table}: the latest message per key");
}

fn statuses(reports: &[Value], table: &str) -> Vec<String> {
    reports
        .iter()
        .map(|r| {
            table_report(r, table)["status"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn overlapping_syncs_of_one_job_commit_every_message_once_and_the_latest_per_key() {
    const PROCESSES: usize = 3;
    const ROUNDS: i64 = 3;
    const PER_ROUND: i64 = 200;
    let kafka = plaintext();
    let append = unique_name("overlap_append");
    let upsert = unique_name("overlap_upsert");
    create_topic(&append, 3);
    create_topic(&upsert, 3);
    let streams =
        format!("[[streams]]\ntopic = \"{upsert}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    let job = Job::new(Catalog::Seaweed, &[&append, &upsert], "", &streams);
    let machines: Vec<Job> = (0..PROCESSES).map(|n| copy_of(&job, n)).collect();

    let mut want: BTreeMap<i64, i64> = BTreeMap::new();
    let mut superseded = 0;
    for round in 0..ROUNDS {
        let first = round * PER_ROUND;
        produce_to_partitions(
            &kafka,
            &append,
            &messages(3, first, PER_ROUND, 1_000_000, round),
        );
        let upserts = messages(3, first, PER_ROUND, 70, round);
        produce_to_partitions(&kafka, &upsert, &upserts);
        for (_, _, value) in &upserts {
            let v: Value = serde_json::from_str(value).unwrap();
            want.insert(v["id"].as_i64().unwrap(), v["o"].as_i64().unwrap());
        }
        // All at once: each plans from the same offsets.
        let mut running: Vec<_> = machines.iter().map(|m| spawn(m, &[])).collect();
        let reports: Vec<Value> = running
            .iter_mut()
            .map(|(child, report, log)| finish(child, report, log))
            .collect();
        for table in [job.table(&append), job.table(&upsert)] {
            let statuses = statuses(&reports, &table);
            // Exactly one sync committed the round's messages; the others
            // found them committed (superseded) or, having started after
            // that commit, nothing new.
            let committed: i64 = reports
                .iter()
                .map(|r| table_report(r, &table))
                .filter(|t| t["status"] == "committed")
                .map(|t| t["records"].as_i64().unwrap())
                .sum();
            assert_eq!(
                committed,
                3 * PER_ROUND,
                "round {round} {table}: {statuses:?}"
            );
            superseded += statuses.iter().filter(|s| *s == "superseded").count();
            for s in &statuses {
                assert!(
                    ["committed", "superseded", "unchanged"].contains(&s.as_str()),
                    "{table}: {statuses:?}"
                );
            }
        }
    }
    eprintln!("overlapping syncs: {superseded} table commits superseded in {ROUNDS} rounds");

    let per_partition = ROUNDS * PER_ROUND;
    // Not Trino: slow per query, and it reads v2 upsert tables in sync_upsert.
    for engine in READERS.into_iter().filter(|e| *e != "trino") {
        assert_each_message_once(engine, Catalog::Seaweed, &job.table(&append), per_partition);
        assert_latest_per_key(engine, Catalog::Seaweed, &job.table(&upsert), &want);
    }
    for topic in [&append, &upsert] {
        assert_eq!(
            group_offsets(&kafka, &job.group(), topic, 3),
            vec![Some(per_partition); 3],
            "{topic}"
        );
    }
}

/// A sync paused just before its commit while another sync of the job
/// commits the same messages: it commits nothing (append, upsert and the
/// dead-letter table), says so, deletes its files and leaves the group
/// where the other sync put it. A third sync started on the same machine
/// meanwhile stops at once on the job lock.
#[test]
fn a_sync_whose_offsets_another_sync_committed_first_commits_nothing() {
    let kafka = plaintext();
    let append = unique_name("superseded_append");
    let upsert = unique_name("superseded_upsert");
    create_topic(&append, 3);
    create_topic(&upsert, 3);
    let streams = format!(
        "[[streams]]\ntopic = \"{append}\"\non_invalid = \"dlq\"\n\
         [[streams]]\ntopic = \"{upsert}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n"
    );
    let job = Job::new(Catalog::Fixture, &[&append, &upsert], "", &streams);
    let (paused_job, other_job) = (copy_of(&job, 0), copy_of(&job, 1));

    let mut first = messages(3, 0, 50, 1_000_000, 0);
    first.push((1, "bad".into(), "{not json".into()));
    produce_to_partitions(&kafka, &append, &first);
    let upserts = messages(3, 0, 50, 20, 0);
    produce_to_partitions(&kafka, &upsert, &upserts);
    // A first sync so that the upsert table has rows the next ones replace.
    other_job.sync();
    produce_to_partitions(&kafka, &append, &messages(3, 50, 50, 1_000_000, 1));
    let upserts2 = messages(3, 50, 50, 20, 1);
    produce_to_partitions(&kafka, &upsert, &upserts2);
    produce_to_partitions(&kafka, &append, &[(2, "bad".into(), "[1,".into())]);

    let release = job
        .path
        .with_file_name(format!("release-{}", unique_name("p")));
    let pause = format!("before_iceberg_commit:{}", release.display());
    let (mut paused, paused_report, paused_log) =
        spawn(&paused_job, &[("TOPICBERG_PAUSE", pause.as_str())]);
    let ready = release.with_extension("ready");
    wait_until(
        "the paused sync to reach its commit",
        Duration::from_secs(120),
        || ready.exists(),
    );

    // Same machine, same state folder: the job lock stops it at once.
    let out = paused_job.run("sync", &[], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{stderr}");
    assert!(
        stderr.contains("is already running elsewhere on this machine"),
        "{stderr}"
    );

    // Another machine: commits the same messages first.
    let report = other_job.sync();
    assert_eq!(table_report(&report, &job.table(&append))["records"], 150);
    assert_eq!(table_report(&report, &job.table(&upsert))["records"], 150);
    std::fs::write(&release, b"").unwrap();
    let report = finish(&mut paused, &paused_report, &paused_log);
    for table in [job.table(&append), job.table(&upsert)] {
        let t = table_report(&report, &table);
        assert_eq!(t["status"], "superseded", "{t}");
        let note = t["note"].as_str().unwrap();
        assert!(
            note.contains("another sync of this job committed first"),
            "{note}"
        );
        assert!(note.contains("partition 0: offsets 50..100"), "{note}");
        assert_eq!(t["snapshot_id"], Value::Null, "{t}");
        assert_eq!(t["orphan_files"], json!([]), "{t}");
    }

    // Every message once; the dead letters once; the latest per key.
    let mut want = BTreeMap::new();
    for (_, _, value) in upserts.iter().chain(&upserts2) {
        let v: Value = serde_json::from_str(value).unwrap();
        want.insert(v["id"].as_i64().unwrap(), v["o"].as_i64().unwrap());
    }
    // Not Trino: slow per query, and it reads v2 upsert tables in sync_upsert.
    for engine in ["duckdb", "spark", "polars", "datafusion", "chdb", "daft"] {
        let rows = read_rows(engine, Catalog::Fixture, &job.table(&append));
        assert_eq!(rows.len(), 300, "{engine}");
        assert_latest_per_key(engine, Catalog::Fixture, &job.table(&upsert), &want);
    }
    let dead = read_rows(
        "duckdb",
        Catalog::Fixture,
        &format!("{}__dlq", job.table(&append)),
    );
    let mut dead: Vec<(i64, i64)> = dead
        .iter()
        .map(|r| {
            (
                r["_kafka_partition"].as_i64().unwrap(),
                r["_kafka_offset"].as_i64().unwrap(),
            )
        })
        .collect();
    dead.sort_unstable();
    assert_eq!(dead, vec![(1, 50), (2, 100)]);
    assert_eq!(
        group_offsets(&kafka, &job.group(), &append, 3),
        vec![Some(100), Some(101), Some(101)]
    );
}

//! Syncs and `maintain` interleaved at random, either killed at random
//! points: upserts, updates and tombstones of existing keys on two upsert
//! tables (position deletes partitioned by a bucket of the value's `seq`,
//! so keys move between partitions; deletion vectors unpartitioned). After
//! every round a clean sync catches up and DuckDB must read one row per
//! live key with its latest value; at the end every reader does. Nothing
//! lost (a key missing or old), nothing duplicated (a key twice), nothing
//! resurrected (a tombstoned key back).
//!
//! The seed is printed; `TOPICBERG_MAINTAIN_SEED=<seed>` replays it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{create_topic, wait_until, Job, Rng};
use crate::testbed::{command, unique_name};

const ROUNDS: usize = 8;
const KEYS: u64 = 120;
const MESSAGES_PER_ROUND: u64 = 150;

/// Produces `(key, value or tombstone)` messages.
fn produce(topic: &str, messages: &[(String, Option<String>)]) {
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
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).unwrap();
}

/// Key -> the `seq` of its latest message, `None` when a tombstone.
#[derive(Default)]
struct Model {
    seq: u64,
    latest: BTreeMap<String, Option<u64>>,
}

impl Model {
    fn round(&mut self, rng: &mut Rng) -> Vec<(String, Option<String>)> {
        (0..MESSAGES_PER_ROUND)
            .map(|_| {
                self.seq += 1;
                let key = format!("k{}", rng.below(KEYS));
                // Tombstones only for keys that exist: a delete of a row.
                let live = self.latest.get(&key).is_some_and(Option::is_some);
                let value = if live && rng.below(8) == 0 {
                    None
                } else {
                    Some(format!(r#"{{"key":"{key}","seq":{}}}"#, self.seq))
                };
                self.latest
                    .insert(key.clone(), value.as_ref().map(|_| self.seq));
                (key, value)
            })
            .collect()
    }

    fn check(&self, rows: &[Value], what: &str) {
        let mut got = BTreeMap::new();
        for r in rows {
            let key = r["key"].as_str().unwrap().to_string();
            let prior = got.insert(key.clone(), r["seq"].as_u64().unwrap());
            assert!(prior.is_none(), "{what}: key {key} twice (duplicated)");
        }
        let want: BTreeMap<String, u64> = self
            .latest
            .iter()
            .filter_map(|(k, v)| v.map(|v| (k.clone(), v)))
            .collect();
        for key in got.keys() {
            assert!(
                want.contains_key(key),
                "{what}: key {key} is back after its tombstone (resurrected)"
            );
        }
        assert_eq!(got, want, "{what}: latest value per key (lost or stale)");
    }
}

fn spawn(job: &Job, args: &[&str], env: &[(String, String)], log: &Path) -> Child {
    let mut cmd = command(env!("CARGO_BIN_EXE_topicberg"));
    cmd.args(&args[..1])
        .arg("-c")
        .arg(&job.path)
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Waits for `child`; it must have succeeded unless it was to be killed.
fn finish(mut child: Child, killed: bool, what: &str, log: &Path) {
    let status = child.wait().unwrap();
    let text = std::fs::read_to_string(log).unwrap_or_default();
    if killed {
        // Killed by its fault point, or finished first: both are fine.
        return;
    }
    assert!(status.success(), "{what} failed:\n{text}");
}

const SYNC_FAULTS: [&str; 5] = [
    "after_records:100",
    "before_iceberg_commit",
    "after_first_table_commit",
    "before_key_index_update",
    "before_group_commit",
];
const MAINTAIN_FAULTS: [&str; 3] = [
    "before_compaction_commit",
    "after_compaction_commit",
    "random",
];

#[test]
fn syncs_and_maintain_interleaved_and_killed_at_random_lose_duplicate_and_resurrect_nothing() {
    let mut rng = Rng::seeded("TOPICBERG_MAINTAIN_SEED", "maintain random");
    let seed = rng.0;

    let topics = [unique_name("mrand_position"), unique_name("mrand_dv")];
    for topic in &topics {
        create_topic(topic, 3);
    }
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let job = Job::embedded(&names);
    job.append(&format!(
        "[[streams]]\ntopic = \"{}\"\nmode = \"upsert\"\ndedup_keys = [\"_kafka_key\"]\n\
         delete_format = \"position\"\npartition_by = [\"bucket(3, seq)\"]\n\
         [[streams]]\ntopic = \"{}\"\nmode = \"upsert\"\ndedup_keys = [\"_kafka_key\"]\n\
         delete_format = \"dv\"\n\
         [maintain]\nkeep_snapshots = 3\nmax_snapshot_age = \"0s\"\norphan_min_age = \"1d\"\n\
         min_input_files = 2\nmax_manifests = 4\n",
        topics[0], topics[1]
    ));
    let tables: Vec<String> = topics.iter().map(|t| job.table(t)).collect();
    let mut model = Model::default();
    let check = |model: &Model, engines: &[&str], what: &str| {
        for engine in engines {
            for table in &tables {
                // PyIceberg does not read deletion vectors.
                if *engine == "pyiceberg" && table.contains("_dv") {
                    continue;
                }
                let rows: Vec<Value> = job
                    .read_embedded(engine, table)
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
                model.check(
                    &rows,
                    &format!("seed {seed}, {what}, {engine} reading {table}"),
                );
            }
        }
    };

    let first = model.round(&mut rng);
    for topic in &topics {
        produce(topic, &first);
    }
    job.sync();
    let sync_log = job.scratch_file("sync.log");
    let maintain_log = job.scratch_file("maintain.log");
    // Every kind of round once, in a random order: (sync killed at a
    // random named point, maintain killed (`Some(None)`: at a random one
    // of its faults), the sync committing between the compaction's rewrite
    // and its commit).
    let mut scenarios: Vec<(bool, Option<Option<&str>>, bool)> = vec![
        (false, None, true),
        (true, None, true),
        (false, Some(Some("before_compaction_commit")), false),
        (false, Some(Some("after_compaction_commit")), false),
        (false, Some(Some("random")), false),
        (true, Some(None), false),
        (false, None, false),
        (true, Some(Some("random")), false),
    ];
    assert_eq!(scenarios.len(), ROUNDS);
    for i in (1..scenarios.len()).rev() {
        scenarios.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let (mut compactions, mut replans) = (0u64, 0u64);
    for round in 1..=ROUNDS {
        let batch = model.round(&mut rng);
        for topic in &topics {
            produce(topic, &batch);
        }
        let (sync_faulted, maintain_fault, paused) = scenarios[round - 1];
        let sync_fault = sync_faulted.then(|| SYNC_FAULTS[rng.below(5) as usize]);
        let maintain_fault =
            maintain_fault.map(|f| f.unwrap_or(MAINTAIN_FAULTS[rng.below(3) as usize]));
        // A SIGKILL at a random moment (not a named point): after this
        // many milliseconds, whatever maintain is doing.
        let maintain_kill_after = (maintain_fault == Some("random")).then(|| rng.below(2500));
        let mut maintain_env = Vec::new();
        if let Some(fault) = maintain_fault.filter(|f| *f != "random") {
            maintain_env.push(("TOPICBERG_FAULT".to_string(), fault.to_string()));
        }
        let release = job.scratch_file("release");
        let ready = release.with_extension("ready");
        if paused {
            maintain_env.push((
                "TOPICBERG_PAUSE".to_string(),
                format!("before_compaction_commit:{}", release.display()),
            ));
        }
        let report = job.scratch_file("maintain.json");
        let maintain = spawn(
            &job,
            &["maintain", "--report-json", report.to_str().unwrap()],
            &maintain_env,
            &maintain_log,
        );
        let mut sync_env = Vec::new();
        if let Some(fault) = sync_fault {
            sync_env.push(("TOPICBERG_FAULT".to_string(), fault.to_string()));
        }
        let mut maintain = maintain;
        // It pauses only when it has something to compact; otherwise it
        // finishes first and the round has no overlap.
        let mut overlapped = paused;
        if paused {
            wait_until(
                "the compaction to pause or maintain to end",
                Duration::from_secs(300),
                || ready.exists() || maintain.try_wait().unwrap().is_some(),
            );
            overlapped = ready.exists();
        }
        eprintln!(
            "round {round}: sync fault {sync_fault:?}, maintain fault {maintain_fault:?} \
             (random kill after {maintain_kill_after:?} ms), sync inside the compaction: \
             {overlapped}"
        );
        let sync = spawn(&job, &["sync"], &sync_env, &sync_log);
        if let Some(ms) = maintain_kill_after {
            // Not a synchronisation: the random moment of the fault.
            std::thread::sleep(Duration::from_millis(ms));
            let _ = maintain.kill();
        }
        finish(sync, sync_fault.is_some(), "the sync", &sync_log);
        if overlapped {
            std::fs::write(&release, b"").unwrap();
        }
        finish(
            maintain,
            maintain_fault.is_some(),
            "maintain",
            &maintain_log,
        );
        if maintain_fault.is_none() {
            let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
            let mut replanned = 0;
            let mut carried = 0;
            for t in report["tables"].as_array().unwrap() {
                let what = format!("seed {seed}, round {round}: {t}");
                assert_eq!(t["error"], Value::Null, "{what}");
                compactions += u64::from(t["compaction"]["snapshot_id"].is_i64());
                replanned += t["compaction"]["replanned"].as_u64().unwrap();
                carried += t["compaction"]["rows_carried"].as_u64().unwrap();
            }
            // The sync's deletes reached the files of the compaction that
            // paused (the first table's; the next one plans after it):
            // carried onto its new files, or planned again.
            if overlapped && sync_fault.is_none() {
                assert!(
                    replanned + carried >= 1,
                    "seed {seed}, round {round}: {report}"
                );
            }
            replans += replanned;
        }
        // A clean sync catches up with everything produced.
        job.sync();
        check(&model, &["duckdb"], &format!("after round {round}"));
    }

    eprintln!("{compactions} compactions committed, {replans} planned again");
    assert!(compactions >= 1, "seed {seed}: no compaction committed");

    // A last clean maintain leaves no delete files; the next sync still
    // keeps one row per key.
    let report = job.maintain(&[]);
    for t in report["tables"].as_array().unwrap() {
        assert_eq!(t["after"]["delete_files"], 0, "seed {seed}: {t}");
        assert!(
            t["after"]["manifests"].as_u64().unwrap() <= 4,
            "seed {seed}: {t}"
        );
    }
    let batch = model.round(&mut rng);
    for topic in &topics {
        produce(topic, &batch);
    }
    job.sync();
    check(
        &model,
        &["duckdb", "spark", "pyiceberg", "polars", "datafusion"],
        "at the end",
    );
}

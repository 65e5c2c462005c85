//! `topicberg maintain` on tables our syncs wrote: many small upsert syncs
//! (v2 position deletes, v3 deletion vectors) and an append table, then
//! `maintain` (compaction, snapshot expiry, orphan removal): every reader
//! reads the model's rows, the upsert tables are left with few data files
//! and no delete files, and the syncs after it go on (old keys updated:
//! the key index followed the rewrite without a rebuild). Orphans: what a
//! killed sync left, backdated past the window, is removed; a fresh
//! unreferenced file inside the window is kept. A sync committing between
//! a compaction's rewrite and its commit: the compaction is planned again,
//! nothing is lost, duplicated or resurrected. Partitioned upsert tables
//! whose keys move between partitions: one file per partition after it,
//! the manifests rewritten into one. Syncs past the manifest merge count:
//! their small manifests merged, every reader agreeing. On a REST catalog, the metadata files
//! of versions that left the table's metadata log are removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    create_topic, json_strings, metadata_files, plaintext, produce_to_partitions, read_lines,
    table_report, wait_until, Catalog, Job, DV_READERS, READERS,
};
use crate::testbed::unique_name;

const MAINTAIN: &str = "[maintain]\nkeep_snapshots = 2\nmax_snapshot_age = \"0s\"\norphan_min_age = \"1d\"\nmin_input_files = 2\n";

#[derive(Clone, Copy)]
enum Bed {
    Rest(Catalog),
    Embedded,
}

impl Bed {
    fn job(self, topics: &[&str], streams: &str) -> Job {
        let job = match self {
            Bed::Rest(catalog) => Job::new(catalog, topics, "", streams),
            Bed::Embedded => {
                let job = Job::embedded(topics);
                job.append(streams);
                job
            }
        };
        job.append(MAINTAIN);
        job
    }

    fn read(self, job: &Job, engine: &str, table: &str) -> Vec<Value> {
        let lines = match self {
            Bed::Rest(catalog) => read_lines(engine, catalog, table),
            Bed::Embedded => job.read_embedded(engine, table),
        };
        lines
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// `count` messages per partition (3) over `keys` ids per partition.
fn messages(first: i64, count: i64, keys: i64) -> Vec<(i32, String, String)> {
    let mut out = Vec::new();
    for p in 0..3 {
        for i in first..first + count {
            let id = i64::from(p) * 1_000_000 + i % keys;
            let value = json!({"id": id, "p": p, "o": i});
            out.push((p, id.to_string(), value.to_string()));
        }
    }
    out
}

/// Upsert tables, one per delete format, plus an append table.
struct Fixture {
    bed: Bed,
    job: Job,
    /// (topic, upsert)
    topics: Vec<(String, bool)>,
    produced: i64,
    /// Messages per partition produced since the last sync that committed.
    unsynced: i64,
    /// Their (partition, id, offset), added to the model once synced.
    pending: Vec<(i64, i64, i64)>,
    /// Append: every (partition, offset); upsert: id -> latest offset.
    appended: Vec<(i64, i64)>,
    latest: BTreeMap<i64, i64>,
}

impl Fixture {
    fn new(bed: Bed, formats: &[&str], with_append: bool) -> Self {
        Self::with_streams(bed, formats, with_append, "")
    }

    /// `extra`: more settings of every upsert stream (`partition_by`).
    fn with_streams(bed: Bed, formats: &[&str], with_append: bool, extra: &str) -> Self {
        let mut topics = Vec::new();
        if with_append {
            topics.push((unique_name("mnt_append"), false));
        }
        let mut streams = String::new();
        for format in formats {
            let topic = unique_name(&format!("mnt_upsert_{format}"));
            streams.push_str(&format!(
                "[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\ndelete_format = \"{format}\"\n{extra}"
            ));
            topics.push((topic, true));
        }
        for (topic, _) in &topics {
            create_topic(topic, 3);
        }
        let names: Vec<&str> = topics.iter().map(|(t, _)| t.as_str()).collect();
        let job = bed.job(&names, &streams);
        Fixture {
            bed,
            job,
            topics,
            produced: 0,
            unsynced: 0,
            pending: Vec::new(),
            appended: Vec::new(),
            latest: BTreeMap::new(),
        }
    }

    /// Produces `count` messages per partition to every topic.
    fn produce(&mut self, count: i64) {
        let batch = messages(self.produced, count, 40);
        for (topic, _) in &self.topics {
            produce_to_partitions(&plaintext(), topic, &batch);
        }
        for (p, _, value) in &batch {
            let v: Value = serde_json::from_str(value).unwrap();
            self.pending.push((
                i64::from(*p),
                v["id"].as_i64().unwrap(),
                v["o"].as_i64().unwrap(),
            ));
        }
        self.produced += count;
        self.unsynced += count;
    }

    /// Produces and syncs; every table committed every message.
    fn round(&mut self, count: i64) -> String {
        self.produce(count);
        let log = self.job.scratch_file("sync.log");
        let report = self.job.sync_logged(&log);
        for (topic, _) in &self.topics {
            let t = table_report(&report, &self.job.table(topic));
            assert_eq!(t["status"], "committed", "{t}");
            assert_eq!(t["records"], 3 * self.unsynced, "{t}");
        }
        self.unsynced = 0;
        for (p, id, o) in std::mem::take(&mut self.pending) {
            self.appended.push((p, o));
            self.latest.insert(id, o);
        }
        std::fs::read_to_string(&log).unwrap()
    }

    fn upsert_tables(&self) -> Vec<String> {
        self.topics
            .iter()
            .filter(|(_, u)| *u)
            .map(|(t, _)| self.job.table(t))
            .collect()
    }

    /// Every reader that reads these tables sees the model.
    fn check(&self, engines: &[&str]) {
        let mut appended = self.appended.clone();
        appended.sort_unstable();
        for engine in engines {
            for (topic, upsert) in &self.topics {
                let dv = topic.contains("_dv");
                // PyIceberg does not read deletion vectors, nor do the
                // readers left out of DV_READERS.
                if dv && (*engine == "pyiceberg" || !DV_READERS.contains(engine)) {
                    continue;
                }
                let table = self.job.table(topic);
                let rows = self.bed.read(&self.job, engine, &table);
                if *upsert {
                    let mut got = BTreeMap::new();
                    for r in &rows {
                        let id = r["id"].as_i64().unwrap();
                        let prior = got.insert(id, r["o"].as_i64().unwrap());
                        assert!(prior.is_none(), "{engine}: key {id} twice in {table}");
                    }
                    assert_eq!(got, self.latest, "{engine}: {table}");
                } else {
                    let mut got: Vec<(i64, i64)> = rows
                        .iter()
                        .map(|r| (r["p"].as_i64().unwrap(), r["o"].as_i64().unwrap()))
                        .collect();
                    got.sort_unstable();
                    assert_eq!(got, appended, "{engine}: {table}: every message once");
                }
            }
        }
    }

    /// Runs `topicberg maintain` (must succeed); its JSON report.
    fn maintain(&self, env: &[(&str, &str)]) -> Value {
        self.job.maintain(env)
    }

    /// The folder of an embedded-catalog table.
    fn table_folder(&self, table: &str) -> PathBuf {
        let (ns, name) = table.split_once('.').unwrap();
        self.job
            .path
            .with_file_name("warehouse")
            .join(ns)
            .join(name)
    }
}

fn entry<'a>(report: &'a Value, table: &str) -> &'a Value {
    report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == table)
        .unwrap_or_else(|| panic!("{table} not maintained: {report}"))
}

/// Sets every file under `folder` back two days (past the window).
fn backdate(folder: &Path) {
    let out = std::process::Command::new("find")
        .arg(folder)
        .args([
            "-type",
            "f",
            "-exec",
            "touch",
            "-d",
            "2 days ago",
            "{}",
            "+",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn compacted_then_synced(bed: Bed, formats: &[&str]) {
    let mut f = Fixture::new(bed, formats, true);
    for _ in 0..6 {
        f.round(20);
    }
    // A sync killed before its commit leaves data (and delete) files no
    // snapshot references.
    let mut orphan_folders = Vec::new();
    if let Bed::Embedded = bed {
        f.produce(10);
        let out = f
            .job
            .run("sync", &[], &[("TOPICBERG_FAULT", "before_iceberg_commit")]);
        assert!(!out.status.success(), "the sync was to be killed");
        let tables: Vec<String> = f.topics.iter().map(|(t, _)| f.job.table(t)).collect();
        for table in tables {
            let folder = f.table_folder(&table);
            backdate(&folder);
            // A fresh unreferenced file, as a commit in flight has.
            let fresh = folder
                .join("metadata")
                .join(format!("{}-m0.avro", uuid::Uuid::new_v4()));
            std::fs::write(&fresh, b"in flight").unwrap();
            orphan_folders.push((table, fresh));
        }
    }

    let report = f.maintain(&[]);
    for table in f.upsert_tables() {
        let t = entry(&report, &table);
        assert_eq!(t["error"], Value::Null, "{t}");
        assert!(t["before"]["data_files"].as_u64().unwrap() >= 6, "{t}");
        assert!(t["before"]["delete_files"].as_u64().unwrap() >= 3, "{t}");
        assert_eq!(t["after"]["delete_files"], 0, "{t}");
        assert_eq!(t["after"]["data_files"], 1, "{t}");
        assert!(t["compaction"]["snapshot_id"].is_i64(), "{t}");
        assert!(
            t["expiry"]["snapshots_expired"].as_u64().unwrap() >= 4,
            "{t}"
        );
        assert_eq!(t["after"]["snapshots"], 2, "{t}");
        // The expired snapshots' files were deleted (in bulk: S3's
        // DeleteObjects on the reference catalog's SeaweedFS bucket).
        assert!(t["expiry"]["files_deleted"].as_u64().unwrap() >= 4, "{t}");
        assert_eq!(t["expiry"]["files_not_deleted"], 0, "{t}");
        if let Bed::Rest(_) = bed {
            let files = metadata_files(Catalog::Fixture, &table, &[]);
            let mut lists = json_strings(&files["manifest_lists"]);
            lists.sort();
            let in_folder = json_strings(&files["manifest_lists_in_folder"]);
            assert_eq!(
                in_folder, lists,
                "only the kept snapshots' manifest lists are left"
            );
        }
    }
    if !orphan_folders.is_empty() {
        let mut removed = Vec::new();
        for (table, fresh) in &orphan_folders {
            let t = entry(&report, table);
            assert!(
                t["orphans"]["orphans_too_young"].as_u64().unwrap() >= 1,
                "{t}"
            );
            assert!(fresh.exists(), "a file inside the window was deleted");
            removed.extend(t["orphans"]["sample"].as_array().unwrap().clone());
        }
        // The killed sync wrote data files for at least the table it was
        // committing.
        assert!(
            removed
                .iter()
                .any(|r| r.as_str().unwrap().contains("/data/")),
            "the killed sync's data files: {removed:?}"
        );
        for r in &removed {
            assert!(!Path::new(r.as_str().unwrap()).exists(), "{r} still there");
        }
    }
    let mut engines = vec!["duckdb", "polars", "datafusion", "pyiceberg"];
    f.check(&engines);

    // The next syncs update old keys: the deletes must find the rewritten
    // rows, through a key index that replayed the replace.
    let log = f.round(15);
    assert!(
        log.contains("state=updated from") && !log.contains("state=rebuilt from the table"),
        "the key index was to follow the compaction: {log}"
    );
    f.round(15);
    engines.push("spark");
    f.check(&engines);

    // Maintained again: the compacted table compacts what the syncs added.
    let report = f.maintain(&[]);
    for table in f.upsert_tables() {
        let t = entry(&report, &table);
        assert_eq!(t["after"]["delete_files"], 0, "{t}");
        assert_eq!(t["after"]["data_files"], 1, "{t}");
    }
    f.round(10);
    f.check(&["duckdb"]);
}

/// Partitioned upsert tables whose keys move between partitions (the
/// partition is a bucket of the offset): each partition compacted into its
/// own file, the manifests rewritten into one per content.
fn partitioned_compacted_then_synced(bed: Bed) {
    let mut f = Fixture::with_streams(
        bed,
        &["position", "dv"],
        false,
        "partition_by = [\"bucket(3, o)\"]\n",
    );
    f.job.append("max_manifests = 2\n");
    for _ in 0..8 {
        f.round(20);
    }
    let report = f.maintain(&[]);
    for table in f.upsert_tables() {
        let t = entry(&report, &table);
        assert_eq!(t["error"], Value::Null, "{t}");
        assert!(t["before"]["data_files"].as_u64().unwrap() >= 16, "{t}");
        assert!(t["before"]["delete_files"].as_u64().unwrap() >= 3, "{t}");
        assert!(t["before"]["manifests"].as_u64().unwrap() >= 8, "{t}");
        assert_eq!(t["compaction"]["skipped"], json!([]), "{t}");
        assert_eq!(t["after"]["delete_files"], 0, "{t}");
        // One file per bucket.
        assert_eq!(t["after"]["data_files"], 3, "{t}");
        assert!(t["manifests"]["snapshot_id"].is_i64(), "{t}");
        assert_eq!(t["manifests"]["manifests_after"], 1, "{t}");
        assert_eq!(t["after"]["manifests"], 1, "{t}");
    }
    f.check(&["duckdb", "polars", "datafusion", "pyiceberg", "spark"]);

    // Old keys updated: the key index replayed both replace snapshots.
    let log = f.round(15);
    assert!(
        log.contains("state=updated from") && !log.contains("state=rebuilt from the table"),
        "the key index was to follow the compaction: {log}"
    );
    f.round(15);
    f.check(&["duckdb", "spark", "pyiceberg"]);
}

#[test]
fn maintain_compacts_each_partition_of_partitioned_tables_into_its_own_files() {
    partitioned_compacted_then_synced(Bed::Embedded);
}

#[test]
fn maintain_compacts_partitioned_reference_catalog_tables() {
    partitioned_compacted_then_synced(Bed::Rest(Catalog::Fixture));
}

#[test]
fn maintain_compacts_expires_and_cleans_embedded_tables_and_syncs_go_on() {
    compacted_then_synced(Bed::Embedded, &["position", "dv"]);
}

#[test]
fn maintain_compacts_expires_and_cleans_reference_catalog_tables_and_syncs_go_on() {
    compacted_then_synced(Bed::Rest(Catalog::Fixture), &["position", "dv"]);
}

/// Syncs past the manifest merge count (`commit/manifest_merge.rs`, 8):
/// the commit that would carry 8 small manifests of ours of one kind
/// merges them into one (data manifests from the 9th sync, delete
/// manifests from the 9th sync with deletes), and every reader reads the
/// files the merged manifests list, deletes applied.
#[test]
fn syncs_past_the_merge_count_merge_their_manifests_and_every_reader_reads_them() {
    let mut f = Fixture::new(Bed::Rest(Catalog::Fixture), &["position", "dv"], true);
    // 20 messages per partition over 40 keys: syncs 3 to 12 update keys.
    let syncs = 12;
    for _ in 0..syncs {
        f.round(20);
    }
    let report_file = f.job.scratch_file("dry.json");
    let args = ["--dry-run", "--report-json", report_file.to_str().unwrap()];
    let out = f.job.run("maintain", &args, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report_file).unwrap()).unwrap();
    for (topic, upsert) in &f.topics {
        let t = entry(&report, &f.job.table(topic));
        let manifests = t["before"]["manifests"].as_u64().unwrap();
        eprintln!("{topic}: {manifests} manifests after {syncs} syncs");
        // Without the merge: one data manifest per sync (12), and one
        // delete manifest per sync with deletes on top. With it: the
        // 9th sync's merged and the data manifests of syncs 9-12 (5),
        // and 3 delete manifests (merged at the 9th sync with deletes, the
        // 11th).
        let bound = if *upsert { 8 } else { 5 };
        assert!(manifests <= bound, "{topic}: {manifests} manifests: {t}");
    }
    f.check(&READERS);
}

/// A sync's deletes land between a compaction's rewrite and its commit:
/// carried onto the compaction's new file.
fn sync_between_rewrite_and_commit(bed: Bed, formats: &[&str]) {
    let mut f = Fixture::new(bed, formats, false);
    for _ in 0..4 {
        f.round(20);
    }
    // One table at a time, so that each compaction is raced.
    for table in f.upsert_tables() {
        let release = f.job.scratch_file("release");
        let ready = release.with_extension("ready");
        let report = f.job.scratch_file("maintain.json");
        let maintain = crate::testbed::command(env!("CARGO_BIN_EXE_topicberg"))
            .args(["maintain", "-c"])
            .arg(&f.job.path)
            .args(["--table", &table, "--report-json", report.to_str().unwrap()])
            .env(
                "TOPICBERG_PAUSE",
                format!("before_compaction_commit:{}", release.display()),
            )
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_until("the compaction to pause", Duration::from_secs(300), || {
            ready.exists()
        });
        // Updates of old keys: deletes against the files being compacted.
        f.round(20);
        // The second plan pauses too, and goes on at once.
        std::fs::write(&release, b"").unwrap();
        let out = maintain.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let t = entry(&report, &table);
        // The sync's deletes are carried onto the new file in the same
        // replace, not planned again (rebase.rs): the compaction's file
        // with one delete file (a deletion vector on v3) holding them, and
        // the sync's own new file.
        assert_eq!(t["compaction"]["replanned"], 0, "{t}");
        assert!(
            t["compaction"]["rows_carried"].as_u64().unwrap() >= 1,
            "{t}"
        );
        assert_eq!(t["compaction"]["delete_files_carried"], 1, "{t}");
        assert_eq!(t["compaction"]["data_files_written"], 1, "{t}");
        assert!(t["compaction"]["snapshot_id"].is_i64(), "{t}");
        assert_eq!(t["after"]["delete_files"], 1, "{t}");
        assert_eq!(t["after"]["data_files"], 2, "{t}");
    }
    f.check(&["duckdb", "pyiceberg"]);
    f.round(20);
    f.check(&["duckdb", "spark"]);
}

#[test]
fn a_sync_between_a_compactions_rewrite_and_commit_loses_and_resurrects_nothing() {
    sync_between_rewrite_and_commit(Bed::Embedded, &["position", "dv"]);
}

/// Append syncs of 22,000 messages per partition (3) each write one file of
/// one 66,000-row row group: `maintain` stitches them (row groups copied,
/// not rewritten) and every reader reads every message once; a later sync's
/// file is stitched onto the stitched one.
#[test]
fn maintain_stitches_large_row_groups_and_every_reader_reads_them() {
    let mut f = Fixture::new(Bed::Rest(Catalog::Fixture), &[], true);
    for _ in 0..3 {
        f.round(22_000);
    }
    let table = f.job.table(&f.topics[0].0);
    let report = f.maintain(&[]);
    let t = entry(&report, &table);
    assert_eq!(t["error"], Value::Null, "{t}");
    assert_eq!(t["compaction"]["data_files_rewritten"], 3, "{t}");
    assert_eq!(t["compaction"]["data_files_stitched"], 3, "{t}");
    assert_eq!(t["compaction"]["data_files_written"], 1, "{t}");
    assert_eq!(t["compaction"]["rows_written"], 198_000, "{t}");
    assert_eq!(t["after"]["data_files"], 1, "{t}");
    f.check(&["duckdb", "polars", "datafusion", "pyiceberg", "spark"]);

    f.round(22_000);
    let report = f.maintain(&[]);
    let t = entry(&report, &table);
    assert_eq!(t["compaction"]["data_files_stitched"], 2, "{t}");
    assert_eq!(t["after"]["data_files"], 1, "{t}");
    f.check(&["duckdb", "spark"]);
}

/// On Apache's reference REST catalog, which writes each version's
/// metadata JSON file itself and keeps only the last
/// `write.metadata.previous-versions-max` in the table's metadata log, the
/// orphan step removes the files of the versions that left the log from
/// the bucket and keeps the current one and those the log holds; the table
/// reads the same after it.
#[test]
fn maintain_removes_the_metadata_files_that_left_a_rest_tables_metadata_log() {
    let topic = unique_name("mnt_metadata_log");
    create_topic(&topic, 3);
    let job = Job::new(
        Catalog::Fixture,
        &[&topic],
        "",
        "[maintain]\norphan_min_age = \"0s\"\n",
    );
    let table = job.table(&topic);
    let mut produced = 0;
    let mut sync = || {
        produce_to_partitions(&plaintext(), &topic, &messages(produced, 10, 1_000));
        produced += 10;
        let report = job.sync();
        assert_eq!(table_report(&report, &table)["status"], "committed");
    };
    sync();
    metadata_files(
        Catalog::Fixture,
        &table,
        &["write.metadata.previous-versions-max=1"],
    );
    for _ in 0..3 {
        sync();
    }
    let before = metadata_files(Catalog::Fixture, &table, &[]);
    let current = before["current"].as_str().unwrap().to_string();
    let log = json_strings(&before["log"]);
    assert_eq!(log.len(), 1, "{before}");
    let left: Vec<String> = json_strings(&before["in_folder"])
        .into_iter()
        .filter(|f| *f != current && !log.contains(f))
        .collect();
    // Created, the first sync, the property, the first two of the three
    // syncs after it (the last one's is in the log).
    assert!(left.len() >= 4, "{before}");

    let report = job.maintain(&[]);
    let t = entry(&report, &table);
    assert_eq!(t["error"], Value::Null, "{t}");
    assert!(
        t["orphans"]["orphans_removed"].as_u64().unwrap() >= left.len() as u64,
        "{t}"
    );
    let after = metadata_files(Catalog::Fixture, &table, &[]);
    let in_folder = json_strings(&after["in_folder"]);
    for file in &left {
        assert!(!in_folder.contains(file), "{file} is still there: {after}");
    }
    let kept = after["current"].as_str().unwrap().to_string();
    for file in json_strings(&after["log"]).iter().chain([&kept]) {
        assert!(in_folder.contains(file), "{file} was removed: {after}");
    }
    for engine in ["duckdb", "spark"] {
        let rows = read_lines(engine, Catalog::Fixture, &table);
        assert_eq!(rows.lines().count() as i64, 3 * produced, "{engine}");
    }
}

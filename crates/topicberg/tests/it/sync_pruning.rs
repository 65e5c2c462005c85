//! Partition values and column bounds in the manifests, checked by what a
//! filtered scan plans: PyIceberg's `plan_files()` with a filter keeps
//! exactly the data files that hold a matching row (read from the Parquet
//! files themselves), fewer than all. And `maintain` on a table another
//! engine re-partitioned: files of the older spec are rewritten into the
//! current spec, and then prune by it. Spark's scan (Iceberg's scan
//! metrics) reads the same number of files as PyIceberg plans.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::support::{
    create_topic, plaintext, produce_to_partitions, read_lines, spark_maintain, table_report,
    Catalog, Job,
};
use crate::sync_sorted::{layout, messages, values};
use crate::testbed::{command, get, repo_root, unique_name};

/// A planning script's JSON (`scripts/readers/<script>`) for `table` with
/// and without `filter`: PyIceberg's plan (`plan_files.py`, `--filter`) or
/// Spark's scan (`spark_plan_files.py`, `--where`).
fn plan_json(script: &str, option: &str, catalog: Catalog, table: &str, filter: &str) -> Value {
    let out = command(&get("TESTBED_PYTHON"))
        .arg(repo_root().join("scripts/readers").join(script))
        .args(["--catalog", catalog.reader_name(), option, filter, table])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script} {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// PyIceberg's plan of `table` with and without `filter`.
fn plan_files(catalog: Catalog, table: &str, filter: &str) -> Value {
    plan_json("plan_files.py", "--filter", catalog, table, filter)
}

/// Spark's count of data files read by `table` with and without `filter`
/// (Iceberg's scan metrics).
fn spark_plan_files(catalog: Catalog, table: &str, filter: &str) -> Value {
    plan_json("spark_plan_files.py", "--where", catalog, table, filter)
}

/// Spark reads as many data files as hold a matching row, of `all`.
fn assert_spark_reads(plan: &Value, expected: usize, all: usize, what: &str) {
    assert_eq!(plan["all"], all, "Spark, {what}: {plan}");
    assert_eq!(plan["filtered"], expected, "Spark, {what}: {plan}");
    assert_eq!(plan["skipped"], all - expected, "Spark, {what}: {plan}");
}

/// The files (paths) of a layout holding a row whose `column` value
/// satisfies `matches`.
fn holding(layout: &Value, column: &str, matches: impl Fn(&str) -> bool) -> BTreeSet<String> {
    layout["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| values(f, column).into_iter().any(&matches))
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

/// The plan keeps exactly `expected` (so no file with a matching row is
/// skipped, and no file without one is read), and that is fewer than all.
fn assert_plans_exactly(plan: &Value, expected: &BTreeSet<String>, what: &str) {
    let planned: BTreeSet<String> = plan["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(&planned, expected, "{what}: {plan}");
    let all = plan["all"].as_u64().unwrap() as usize;
    assert!(
        !expected.is_empty() && expected.len() < all,
        "{what}: {} of {all} files: {plan}",
        expected.len()
    );
}

#[test]
fn a_filtered_scan_plans_exactly_the_files_holding_matching_rows() {
    let catalog = Catalog::Fixture;
    let topic = unique_name("prune");
    create_topic(&topic, 3);
    let streams =
        format!("[[streams]]\ntopic = \"{topic}\"\npartition_by = [\"identity(region)\"]\n");
    let job = Job::new(catalog, &[&topic], "", &streams);
    let table = job.table(&topic);
    let kafka = plaintext();
    for (first, count) in [(0, 30), (30, 20), (50, 20)] {
        produce_to_partitions(&kafka, &topic, &messages(3, first, count, 12));
        let report = job.sync();
        assert_eq!(table_report(&report, &table)["status"], "committed");
    }
    let layout = layout(catalog, &table, "region,o");
    let files = layout["files"].as_array().unwrap();
    // 3 syncs x 3 regions, each file of one region, named by its partition.
    assert_eq!(files.len(), 9, "{layout}");
    for file in files {
        let regions: BTreeSet<&str> = values(file, "region").into_iter().collect();
        assert_eq!(regions.len(), 1, "{file}");
        let region = regions.first().unwrap();
        assert!(
            file["partition"].as_str().unwrap().contains(region),
            "the partition value is the rows' region: {file}"
        );
    }
    // Partition values: a region's files, 3 of 9. Column bounds (not a
    // partition column): the third sync's files. Both: one file.
    let eu = holding(&layout, "region", |r| r == "eu");
    let late = holding(&layout, "o", |o| o.parse::<i64>().unwrap() >= 50);
    let both: BTreeSet<String> = eu.intersection(&late).cloned().collect();
    assert_eq!((eu.len(), late.len(), both.len()), (3, 3, 1));
    for (expected, pyiceberg, spark, what) in [
        (&eu, "region == 'eu'", "region = 'eu'", "identity(region)"),
        (&late, "o >= 50", "o >= 50", "bounds of o"),
        (
            &both,
            "region == 'eu' and o >= 50",
            "region = 'eu' AND o >= 50",
            "region and bounds of o",
        ),
    ] {
        assert_plans_exactly(&plan_files(catalog, &table, pyiceberg), expected, what);
        let plan = spark_plan_files(catalog, &table, spark);
        assert_spark_reads(&plan, expected.len(), files.len(), what);
    }
}

/// id -> o of an upsert table's rows, each id once.
fn latest(engine: &str, rows: &str) -> BTreeMap<i64, i64> {
    let mut got = BTreeMap::new();
    for line in rows.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let id = r["id"].as_i64().unwrap();
        let first = got.insert(id, r["o"].as_i64().unwrap()).is_none();
        assert!(first, "{engine}: id {id} twice");
    }
    got
}

#[test]
fn maintain_rewrites_files_of_an_older_spec_into_the_current_one() {
    let catalog = Catalog::Fixture;
    let append = unique_name("respec_append");
    create_topic(&append, 1);
    let position = unique_name("respec_pos");
    create_topic(&position, 1);
    let streams = format!(
        "[[streams]]\ntopic = \"{position}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n\
         delete_format = \"position\"\n[maintain]\nmin_input_files = 2\n"
    );
    let job = Job::new(catalog, &[&append, &position], "", &streams);
    let tables = [job.table(&append), job.table(&position)];
    let kafka = plaintext();
    let mut appended = BTreeSet::new();
    let mut latest_o = BTreeMap::new();
    let mut sync = |first: i64, count: i64| {
        let batch = messages(1, first, count, 12);
        for topic in [&append, &position] {
            produce_to_partitions(&kafka, topic, &batch);
        }
        for (_, _, value) in &batch {
            let v: Value = serde_json::from_str(value).unwrap();
            let o = v["o"].as_i64().unwrap();
            appended.insert(o);
            latest_o.insert(v["id"].as_i64().unwrap(), o);
        }
        let report = job.sync();
        for table in &tables {
            assert_eq!(table_report(&report, table)["status"], "committed");
        }
    };
    sync(0, 24);
    // Spark: ALTER TABLE ... ADD PARTITION FIELD bucket(4, id) (spec 1).
    let steps = ["--catalog", catalog.reader_name(), "--steps", "partition"];
    spark_maintain(&steps, &tables);
    // Updates of the old keys: their old rows' deletes are in spec 0.
    sync(24, 12);
    for table in &tables {
        let plan = plan_files(catalog, table, "id == 5");
        assert_eq!(plan["spec_ids"], json!([0, 1]), "{table}: {plan}");
    }
    let out = job.run("maintain", &[], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for table in &tables {
        let layout = layout(catalog, table, "id");
        assert_eq!(layout["default_spec_id"], 1, "{layout}");
        for file in layout["files"].as_array().unwrap() {
            assert_eq!(file["spec_id"], 1, "{table}: re-partitioned: {file}");
            assert_eq!(file["deletes"], 0, "{table}: no deletes left: {file}");
        }
        // The new files prune by bucket(4, id): the plan for id 5 keeps
        // every file holding id 5, and fewer than all.
        let plan = plan_files(catalog, table, "id == 5");
        assert_eq!(plan["spec_ids"], json!([1]), "{table}: {plan}");
        let planned: BTreeSet<String> = plan["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_string())
            .collect();
        let with_5 = holding(&layout, "id", |id| id == "5");
        assert!(
            !with_5.is_empty() && with_5.is_subset(&planned),
            "{table}: {plan}"
        );
        assert!(
            planned.len() < layout["files"].as_array().unwrap().len(),
            "{table}: {plan}"
        );
    }
    // Readers agree, and upserts go on against the rewritten files.
    sync(36, 12);
    for engine in ["duckdb", "pyiceberg", "spark"] {
        let rows = read_lines(engine, catalog, &tables[0]);
        let got: BTreeSet<i64> = rows
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["o"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(rows.lines().count(), appended.len(), "{engine}: once each");
        assert_eq!(got, appended, "{engine}: every message");
        let got = latest(engine, &read_lines(engine, catalog, &tables[1]));
        assert_eq!(got, latest_o, "{engine}: the latest row per key");
    }
}

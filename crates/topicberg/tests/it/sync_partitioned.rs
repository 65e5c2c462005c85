//! Partitioned tables (`partition_by`): created with the stream's spec on
//! the REST and embedded catalogs, written one file per partition, upserts
//! whose keys move between partitions (position deletes on v2, deletion
//! vectors on v3, equality deletes, each in its data file's partition),
//! read the same by
//! every reader, with PyIceberg planning fewer files for a filter on a
//! partition column. A table Spark re-partitions is synced under its new
//! spec, its old files' deletes staying in their old spec.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::support::{
    create_topic, plaintext, produce_to_partitions, read_lines, spark_maintain, table_report,
    Catalog, Job,
};
use crate::testbed::{command, get, repo_root, unique_name};

const REGIONS: [&str; 3] = ["eu", "us", "ap"];

/// `count` messages per Kafka partition (3) over `keys` ids; an id's
/// region and day change with the message, so updates move rows between
/// partitions.
fn messages(first: i64, count: i64, keys: i64) -> Vec<(i32, String, String)> {
    let mut out = Vec::new();
    for p in 0..3 {
        for i in first..first + count {
            let id = i % keys;
            let region = REGIONS[((i / keys + id) % 3) as usize];
            let day = 1 + (i % 3);
            let value = json!({
                "id": id, "p": p, "o": i, "region": region,
                "created_at": format!("2026-01-0{day}T10:00:00Z"),
            });
            out.push((p, id.to_string(), value.to_string()));
        }
    }
    out
}

#[derive(Default)]
struct Model {
    /// Append: every (partition, offset, region).
    appended: Vec<(i64, i64, String)>,
    /// Upsert: id -> (offset, region) of its latest message.
    latest: BTreeMap<i64, (i64, String)>,
}

impl Model {
    fn add(&mut self, batch: &[(i32, String, String)]) {
        for (_, _, value) in batch {
            let v: Value = serde_json::from_str(value).unwrap();
            let (o, region) = (v["o"].as_i64().unwrap(), v["region"].as_str().unwrap());
            self.appended
                .push((v["p"].as_i64().unwrap(), o, region.to_string()));
            // Upsert topics have one Kafka partition: the last message
            // of an id is its latest.
            self.latest
                .insert(v["id"].as_i64().unwrap(), (o, region.to_string()));
        }
    }
}

fn rows(lines: &str) -> Vec<Value> {
    lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn check_append(engine: &str, rows: &[Value], model: &Model) {
    let mut got: Vec<(i64, i64, String)> = rows
        .iter()
        .map(|r| {
            (
                r["p"].as_i64().unwrap(),
                r["o"].as_i64().unwrap(),
                r["region"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    got.sort();
    let mut want = model.appended.clone();
    want.sort();
    assert_eq!(got, want, "{engine}: every message once");
}

fn check_upsert(engine: &str, table: &str, rows: &[Value], model: &Model) {
    let mut got = BTreeMap::new();
    for r in rows {
        let id = r["id"].as_i64().unwrap();
        let row = (
            r["o"].as_i64().unwrap(),
            r["region"].as_str().unwrap().to_string(),
        );
        assert!(
            got.insert(id, row).is_none(),
            "{engine}: {table}: id {id} twice"
        );
    }
    assert_eq!(
        got, model.latest,
        "{engine}: {table}: one row per key, the latest"
    );
}

/// PyIceberg's plan for `table` with and without `filter`.
fn plan_files(catalog_args: &[String], table: &str, filter: &str) -> Value {
    let script = repo_root().join("scripts/readers/plan_files.py");
    let out = command(&get("TESTBED_PYTHON"))
        .arg(script)
        .args(catalog_args)
        .args(["--filter", filter, table])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "plan_files {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn assert_pruned(plan: &Value, what: &str) {
    let (all, kept) = (
        plan["all"].as_u64().unwrap(),
        plan["filtered"].as_u64().unwrap(),
    );
    assert!(
        kept > 0 && kept < all,
        "{what}: {kept} of {all} files planned: {plan}"
    );
}

fn rest_args(catalog: Catalog) -> Vec<String> {
    vec!["--catalog".into(), catalog.reader_name().into()]
}

fn sql_args(job: &Job) -> Vec<String> {
    let warehouse = job.path.with_file_name("warehouse");
    vec![
        "--catalog".into(),
        "sql".into(),
        "--sql-path".into(),
        warehouse.display().to_string(),
    ]
}

/// Ids unique per Kafka partition would make the model's "latest" depend
/// on the drain order across partitions: upsert topics get one partition.
fn upsert_topic(name: &str) -> String {
    let topic = unique_name(name);
    create_topic(&topic, 1);
    topic
}

#[test]
fn partitioned_append_and_upsert_tables_read_alike_and_prune() {
    let catalog = Catalog::Fixture;
    let append = unique_name("part_append");
    create_topic(&append, 3);
    let position = upsert_topic("part_pos");
    let dv = upsert_topic("part_dv");
    let eq = upsert_topic("part_eq");
    let streams = format!(
        r#"[[streams]]
topic = "{append}"
partition_by = ["day(created_at)", "identity(region)", "bucket(4, id)"]
[[streams]]
topic = "{position}"
mode = "upsert"
dedup_keys = ["id"]
delete_format = "position"
partition_by = ["identity(region)", "truncate(10, id)"]
[[streams]]
topic = "{dv}"
mode = "upsert"
dedup_keys = ["id"]
delete_format = "dv"
partition_by = ["identity(region)", "hour(_kafka_timestamp)"]
[[streams]]
topic = "{eq}"
mode = "upsert"
dedup_keys = ["id"]
delete_format = "equality"
partition_by = ["identity(region)"]
"#
    );
    let job = Job::new(catalog, &[&append, &position, &dv, &eq], "", &streams);
    let mut append_model = Model::default();
    let mut upsert_model = Model::default();
    let kafka = plaintext();
    let topics = [append.clone(), position.clone(), dv.clone(), eq.clone()];
    for (first, count) in [(0, 30), (30, 20), (50, 20)] {
        let batch = messages(first, count, 12);
        produce_to_partitions(&kafka, &append, &batch);
        append_model.add(&batch);
        // The upsert topics take partition 0's messages only.
        let one: Vec<(i32, String, String)> =
            batch.iter().filter(|(p, _, _)| *p == 0).cloned().collect();
        for topic in [&position, &dv, &eq] {
            produce_to_partitions(&kafka, topic, &one);
        }
        upsert_model.add(&one);
        let report = job.sync();
        for topic in &topics {
            let t = table_report(&report, &job.table(topic));
            assert_eq!(t["status"], "committed", "{t}");
        }
    }
    let (append_t, position_t, dv_t) = (job.table(&append), job.table(&position), job.table(&dv));
    for engine in ["duckdb", "spark", "polars", "datafusion"] {
        check_append(
            engine,
            &rows(&read_lines(engine, catalog, &append_t)),
            &append_model,
        );
        for table in [&position_t, &dv_t] {
            check_upsert(
                engine,
                table,
                &rows(&read_lines(engine, catalog, table)),
                &upsert_model,
            );
        }
    }
    check_append(
        "pyiceberg",
        &rows(&read_lines("pyiceberg", catalog, &append_t)),
        &append_model,
    );
    check_upsert(
        "pyiceberg",
        &position_t,
        &rows(&read_lines("pyiceberg", catalog, &position_t)),
        &upsert_model,
    );
    // Equality deletes, one file per partition of the retired rows:
    // the readers that apply them.
    let eq_t = job.table(&eq);
    for engine in ["duckdb", "spark"] {
        check_upsert(
            engine,
            &eq_t,
            &rows(&read_lines(engine, catalog, &eq_t)),
            &upsert_model,
        );
    }
    // Trino once (it reads v2 position deletes; DVs from 480 only).
    check_upsert(
        "trino",
        &position_t,
        &rows(&read_lines("trino", catalog, &position_t)),
        &upsert_model,
    );

    // Pruning: a filter on a partition column plans fewer files, and only
    // files of the matching partition.
    let args = rest_args(catalog);
    let plan = plan_files(&args, &append_t, "region == 'eu'");
    assert_pruned(&plan, "append, region");
    for p in plan["partitions"].as_array().unwrap() {
        assert!(p.as_str().unwrap().contains("eu"), "{plan}");
    }
    let plan = plan_files(
        &args,
        &append_t,
        "created_at >= '2026-01-03T00:00:00+00:00'",
    );
    assert_pruned(&plan, "append, day(created_at)");
    assert_pruned(
        &plan_files(&args, &position_t, "region == 'us'"),
        "upsert v2, region",
    );
}

#[test]
fn partitioned_tables_on_the_embedded_catalog() {
    let append = unique_name("part_sql");
    create_topic(&append, 3);
    let position = upsert_topic("part_sql_pos");
    let job = Job::embedded(&[&append, &position]);
    job.append(&format!(
        r#"[[streams]]
topic = "{append}"
partition_by = ["identity(region)"]
[[streams]]
topic = "{position}"
mode = "upsert"
dedup_keys = ["id"]
delete_format = "position"
partition_by = ["bucket(3, id)", "identity(region)"]
"#
    ));
    let mut append_model = Model::default();
    let mut upsert_model = Model::default();
    let kafka = plaintext();
    for (first, count) in [(0, 24), (24, 24)] {
        let batch = messages(first, count, 12);
        produce_to_partitions(&kafka, &append, &batch);
        append_model.add(&batch);
        let one: Vec<(i32, String, String)> =
            batch.iter().filter(|(p, _, _)| *p == 0).cloned().collect();
        produce_to_partitions(&kafka, &position, &one);
        upsert_model.add(&one);
        job.sync();
    }
    let (append_t, position_t) = (job.table(&append), job.table(&position));
    for engine in ["duckdb", "pyiceberg", "spark"] {
        check_append(
            engine,
            &rows(&job.read_embedded(engine, &append_t)),
            &append_model,
        );
        check_upsert(
            engine,
            &position_t,
            &rows(&job.read_embedded(engine, &position_t)),
            &upsert_model,
        );
    }
    assert_pruned(
        &plan_files(&sql_args(&job), &append_t, "region == 'ap'"),
        "embedded append, region",
    );
}

#[test]
fn a_table_spark_repartitioned_is_synced_under_its_new_spec() {
    let catalog = Catalog::Fixture;
    let append = unique_name("repart_append");
    create_topic(&append, 3);
    let position = upsert_topic("repart_pos");
    let streams = format!(
        "[[streams]]\ntopic = \"{position}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\ndelete_format = \"position\"\n"
    );
    let job = Job::new(catalog, &[&append, &position], "", &streams);
    let topics = [append.clone(), position.clone()];
    let mut model = Model::default();
    let mut upsert_model = Model::default();
    let mut sync = |first: i64, count: i64| {
        let kafka = plaintext();
        let batch = messages(first, count, 12);
        produce_to_partitions(&kafka, &append, &batch);
        model.add(&batch);
        let one: Vec<(i32, String, String)> =
            batch.iter().filter(|(p, _, _)| *p == 0).cloned().collect();
        produce_to_partitions(&kafka, &position, &one);
        upsert_model.add(&one);
        let report = job.sync();
        for topic in &topics {
            assert_eq!(
                table_report(&report, &job.table(topic))["status"],
                "committed"
            );
        }
    };
    sync(0, 24);
    let tables: Vec<String> = topics.iter().map(|t| job.table(t)).collect();
    // Spark: ALTER TABLE ... ADD PARTITION FIELD bucket(4, id).
    spark_maintain(
        &["--catalog", catalog.reader_name(), "--steps", "partition"],
        &tables,
    );
    // Old keys again: their rows sit in spec-0 files, the new rows go to
    // spec-1 files; the deletes follow the old rows' spec.
    sync(24, 24);
    sync(48, 12);
    let (append_t, position_t) = (&tables[0], &tables[1]);
    for engine in ["duckdb", "spark", "pyiceberg"] {
        check_append(
            engine,
            &rows(&read_lines(engine, catalog, append_t)),
            &model,
        );
        check_upsert(
            engine,
            position_t,
            &rows(&read_lines(engine, catalog, position_t)),
            &upsert_model,
        );
    }
    let args = rest_args(catalog);
    for table in &tables {
        let plan = plan_files(&args, table, "id == 5");
        assert_eq!(plan["spec_ids"], json!([0, 1]), "{table}: {plan}");
        assert!(
            plan["filtered"].as_u64() < plan["all"].as_u64(),
            "{table}: bucket(4, id) prunes the new files: {plan}"
        );
    }
}

#[test]
fn a_partition_column_the_messages_lack_fails_the_table_naming_stream_and_column() {
    let topic = unique_name("part_missing");
    create_topic(&topic, 1);
    let streams =
        format!("[[streams]]\ntopic = \"{topic}\"\npartition_by = [\"identity(country)\"]\n");
    let job = Job::new(Catalog::Seaweed, &[&topic], "", &streams);
    produce_to_partitions(&plaintext(), &topic, &messages(0, 3, 3));
    let report = job.scratch_file("report.json");
    let out = job.run("sync", &["--report-json", report.to_str().unwrap()], &[]);
    assert!(
        !out.status.success(),
        "a table that cannot be created fails the sync"
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let t = table_report(&report, &job.table(&topic));
    let error = t.to_string();
    assert!(
        error.contains(&format!("stream \\\"{topic}\\\""))
            && error.contains("identity(country)")
            && error.contains("no column \\\"country\\\""),
        "{t}"
    );
    assert_no_table(&job, &topic);
}

fn assert_no_table(job: &Job, topic: &str) {
    let out = crate::support::try_read("duckdb", Catalog::Seaweed, &job.table(topic));
    assert_eq!(out.status.code(), Some(4), "no table was created");
}

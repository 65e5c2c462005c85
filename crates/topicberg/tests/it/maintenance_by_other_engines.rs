//! Another engine maintains the tables between syncs, as the product pages
//! advise and every lakehouse does: Spark 3.5 + Iceberg 1.10 compacts
//! (`rewrite_data_files`, which applies the deletes), rewrites delete files
//! and manifests, adds a column and a property, expires every snapshot but
//! the last, removes orphan files and tags the table. The syncs after it
//! must go on from where they were (the offsets survive in the table's
//! properties, though the snapshots that carried them are gone), append
//! every message once, and keep one row per key (the key index rebuilds
//! on the compacted files), on both REST catalogs, v2 and v3.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::support::{
    create_topic, group_offsets, plaintext, produce_to_partitions, read_lines, spark_maintain,
    table_report, Catalog, Job,
};
use crate::testbed::unique_name;

/// Where the tables live: a test-bed REST catalog, or a job's embedded
/// catalog (Spark reaches its SQLite file through Iceberg's JdbcCatalog).
#[derive(Clone, Copy)]
enum Bed {
    Rest(Catalog),
    Embedded,
}

impl Bed {
    fn job(self, topics: &[&str], streams: &str) -> Job {
        match self {
            Bed::Rest(catalog) => Job::new(catalog, topics, "", streams),
            Bed::Embedded => {
                let job = Job::embedded(topics);
                job.append(streams);
                job
            }
        }
    }

    fn catalog_args(self, job: &Job) -> Vec<String> {
        match self {
            Bed::Rest(catalog) => vec!["--catalog".into(), catalog.reader_name().into()],
            Bed::Embedded => {
                let warehouse = job.path.with_file_name("warehouse");
                vec![
                    "--catalog".into(),
                    "sql".into(),
                    "--sql-path".into(),
                    warehouse.display().to_string(),
                ]
            }
        }
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

/// Runs `scripts/readers/maintain` (Spark) on `tables`; one JSON per table.
fn spark_maintain_all(bed: Bed, job: &Job, tables: &[String]) -> Vec<Value> {
    let args = bed.catalog_args(job);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    spark_maintain(&args, tables)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `count` messages per partition over `keys` ids per partition.
fn messages(first: i64, count: i64, keys: i64) -> Vec<(i32, String, String)> {
    let mut out = Vec::new();
    for p in 0..3 {
        for i in first..first + count {
            let id = i64::from(p) * 1_000_000 + i % keys;
            let value = json!({"id": id, "p": p, "o": i, "name": format!("n{i}")});
            out.push((p, id.to_string(), value.to_string()));
        }
    }
    out
}

struct Model {
    /// Append: every (partition, offset).
    messages: Vec<(i64, i64)>,
    /// Upsert: id -> latest offset.
    latest: BTreeMap<i64, i64>,
}

fn check(engine: &str, bed: Bed, job: &Job, topics: &[(String, bool)], model: &Model) {
    for (topic, upsert) in topics {
        let table = job.table(topic);
        let rows = bed.read(job, engine, &table);
        if *upsert {
            let mut got = BTreeMap::new();
            for r in &rows {
                let id = r["id"].as_i64().unwrap();
                let prior = got.insert(id, r["o"].as_i64().unwrap());
                assert!(prior.is_none(), "{engine}: key {id} twice in {table}");
                assert_eq!(r["spark_note"], Value::Null, "{engine}: {r}");
            }
            assert_eq!(got, model.latest, "{engine}: {table}");
        } else {
            let mut got: Vec<(i64, i64)> = rows
                .iter()
                .map(|r| (r["p"].as_i64().unwrap(), r["o"].as_i64().unwrap()))
                .collect();
            got.sort_unstable();
            assert_eq!(got, model.messages, "{engine}: {table}: every message once");
        }
    }
}

fn maintained_then_synced(bed: Bed, formats: &[&str]) {
    let kafka = plaintext();
    let append = unique_name("maint_append");
    let mut topics = vec![(append.clone(), false)];
    let mut streams = String::new();
    for format in formats {
        let topic = unique_name(&format!("maint_upsert_{format}"));
        streams.push_str(&format!(
            "[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\ndelete_format = \"{format}\"\n"
        ));
        topics.push((topic, true));
    }
    for (topic, _) in &topics {
        create_topic(topic, 3);
    }
    let names: Vec<&str> = topics.iter().map(|(t, _)| t.as_str()).collect();
    let job = bed.job(&names, &streams);
    let mut model = Model {
        messages: Vec::new(),
        latest: BTreeMap::new(),
    };
    let mut produced = 0;
    let mut round = |count: i64| {
        let batch = messages(produced, count, 40);
        for (topic, _) in &topics {
            produce_to_partitions(&kafka, topic, &batch);
        }
        for (p, _, value) in &batch {
            let v: Value = serde_json::from_str(value).unwrap();
            model
                .messages
                .push((i64::from(*p), v["o"].as_i64().unwrap()));
            model
                .latest
                .insert(v["id"].as_i64().unwrap(), v["o"].as_i64().unwrap());
        }
        produced += count;
        let report = job.sync();
        for (topic, _) in &topics {
            let t = table_report(&report, &job.table(topic));
            assert_eq!(t["status"], "committed", "{t}");
            assert_eq!(t["records"], 3 * count, "{t}");
        }
    };
    // Three syncs: small files, and deletes in the upsert tables.
    round(30);
    round(30);
    round(30);

    let tables: Vec<String> = topics.iter().map(|(t, _)| job.table(t)).collect();
    for done in spark_maintain_all(bed, &job, &tables) {
        // Every snapshot that carried offsets in its summary is gone.
        let snapshots = done["snapshots"].as_array().unwrap();
        assert_eq!(snapshots.len(), 1, "{done}");
        assert_eq!(snapshots[0][1], "replace", "{done}");
    }

    // The syncs after it: only the new messages, onto the compacted files
    // (old keys again: the deletes must find the rewritten rows).
    round(25);
    round(25);
    model.messages.sort_unstable();
    for engine in ["duckdb", "spark"] {
        check(engine, bed, &job, &topics, &model);
    }
    if !formats.contains(&"dv") {
        check("pyiceberg", bed, &job, &topics, &model);
    }
    for (topic, _) in &topics {
        assert_eq!(
            group_offsets(&kafka, &job.group(), topic, 3),
            vec![Some(produced); 3]
        );
    }
}

#[test]
fn syncs_after_spark_maintenance_on_seaweed_go_on_exactly_once() {
    // SeaweedFS's table bucket refuses *.puffin: no deletion vectors here.
    maintained_then_synced(Bed::Rest(Catalog::Seaweed), &["position"]);
}

#[test]
fn syncs_after_spark_maintenance_on_the_reference_catalog_go_on_exactly_once() {
    maintained_then_synced(Bed::Rest(Catalog::Fixture), &["position", "dv"]);
}

#[test]
fn syncs_after_spark_maintenance_on_the_embedded_catalog_go_on_exactly_once() {
    maintained_then_synced(Bed::Embedded, &["position", "dv"]);
}

//! Sorted tables (`sort_by`): created with the stream's sort order (PyIceberg
//! and Spark see it), every data file written in it (read back from the
//! Parquet files), upserts one row per key over syncs with updates (the
//! key index records the positions after sorting), compaction writing its
//! files in the order too, and every reader reading the same rows.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::support::{
    create_topic, plaintext, produce_to_partitions, read_lines, spark_maintain, table_report,
    Catalog, Job,
};
use crate::testbed::{command, get, repo_root, unique_name};

const REGIONS: [&str; 3] = ["eu", "us", "ap"];

const MAINTAIN: &str = "[maintain]\nkeep_snapshots = 2\nmax_snapshot_age = \"0s\"\norphan_min_age = \"1d\"\nmin_input_files = 2\n";

/// `count` messages per Kafka partition (`partitions`) over `keys` ids, in
/// an order that is not the sort order (ids and regions interleave).
pub(crate) fn messages(
    partitions: i32,
    first: i64,
    count: i64,
    keys: i64,
) -> Vec<(i32, String, String)> {
    let mut out = Vec::new();
    for p in 0..partitions {
        for i in first..first + count {
            let id = (i * 7) % keys;
            let region = REGIONS[((i / keys + id) % 3) as usize];
            let value = json!({"id": id, "p": p, "o": i, "region": region});
            out.push((p, id.to_string(), value.to_string()));
        }
    }
    out
}

/// The table's layout as PyIceberg and pyarrow see it (`file_layout.py`).
pub(crate) fn layout(catalog: Catalog, table: &str, columns: &str) -> Value {
    let script = repo_root().join("scripts/readers/file_layout.py");
    let out = command(&get("TESTBED_PYTHON"))
        .arg(script)
        .args([
            "--catalog",
            catalog.reader_name(),
            "--columns",
            columns,
            table,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "file_layout {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A file's values of `column` (as text), in its row order.
pub(crate) fn values<'a>(file: &'a Value, column: &str) -> Vec<&'a str> {
    file["values"][column]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

/// Every data file holds its rows in `(region asc, o desc)` order, or by
/// `id` (`desc` when `id_desc`) when `by_id`, and carries sort order 1.
fn assert_files_sorted(layout: &Value, table: &str, by_id: Option<bool>) {
    let files = layout["files"].as_array().unwrap();
    assert!(!files.is_empty(), "{table}: {layout}");
    for file in files {
        assert_eq!(file["sort_order_id"], 1, "{table}: {file}");
        let rows: Vec<(String, i64, i64)> = values(file, "region")
            .into_iter()
            .zip(values(file, "o"))
            .zip(values(file, "id"))
            .map(|((r, o), id)| (r.to_string(), o.parse().unwrap(), id.parse().unwrap()))
            .collect();
        let sorted = rows.windows(2).all(|w| match by_id {
            None => w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 >= w[1].1),
            Some(false) => w[0].2 <= w[1].2,
            Some(true) => w[0].2 >= w[1].2,
        });
        assert!(sorted, "{table}: rows out of order in {file}");
    }
}

fn rows(lines: &str) -> Vec<Value> {
    lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// (p, o) of every appended message.
fn appended(rows: &[Value]) -> Vec<(i64, i64)> {
    let mut got: Vec<(i64, i64)> = rows
        .iter()
        .map(|r| (r["p"].as_i64().unwrap(), r["o"].as_i64().unwrap()))
        .collect();
    got.sort();
    got
}

/// id -> o of an upsert table's rows, each id once.
fn latest(engine: &str, table: &str, rows: &[Value]) -> BTreeMap<i64, i64> {
    let mut got = BTreeMap::new();
    for r in rows {
        let id = r["id"].as_i64().unwrap();
        let first = got.insert(id, r["o"].as_i64().unwrap()).is_none();
        assert!(first, "{engine}: {table}: id {id} twice");
    }
    got
}

struct Model {
    appended: Vec<(i64, i64)>,
    latest: BTreeMap<i64, i64>,
}

fn check(catalog: Catalog, tables: &[String; 3], model: &Model, engines: &[&str]) {
    for engine in engines {
        let got = appended(&rows(&read_lines(engine, catalog, &tables[0])));
        assert_eq!(got, model.appended, "{engine}: every message once");
        let position = &tables[1];
        let got = latest(
            engine,
            position,
            &rows(&read_lines(engine, catalog, position)),
        );
        assert_eq!(
            got, model.latest,
            "{engine}: {position}: the latest row per key"
        );
        // Deletion vectors: the readers that apply them.
        if *engine != "pyiceberg" {
            let dv = &tables[2];
            let got = latest(engine, dv, &rows(&read_lines(engine, catalog, dv)));
            assert_eq!(got, model.latest, "{engine}: {dv}: the latest row per key");
        }
    }
}

#[test]
fn sorted_tables_carry_their_order_write_each_file_in_it_and_upsert_by_sorted_positions() {
    let catalog = Catalog::Fixture;
    let append = unique_name("sorted_append");
    create_topic(&append, 3);
    let position = unique_name("sorted_pos");
    let dv = unique_name("sorted_dv");
    for topic in [&position, &dv] {
        create_topic(topic, 1);
    }
    let streams = format!(
        r#"[[streams]]
topic = "{append}"
sort_by = ["region", "o DESC"]
[[streams]]
topic = "{position}"
mode = "upsert"
dedup_keys = ["id"]
delete_format = "position"
sort_by = ["id"]
[[streams]]
topic = "{dv}"
mode = "upsert"
dedup_keys = ["id"]
delete_format = "dv"
sort_by = ["id desc"]
partition_by = ["identity(region)"]
{MAINTAIN}"#
    );
    let job = Job::new(catalog, &[&append, &position, &dv], "", &streams);
    let tables = [job.table(&append), job.table(&position), job.table(&dv)];
    let mut model = Model {
        appended: Vec::new(),
        latest: BTreeMap::new(),
    };
    let kafka = plaintext();
    // Three syncs; the later ones update most keys of the first.
    for (first, count) in [(0, 40), (40, 30), (70, 25)] {
        let batch = messages(3, first, count, 17);
        produce_to_partitions(&kafka, &append, &batch);
        let one: Vec<(i32, String, String)> =
            batch.iter().filter(|(p, _, _)| *p == 0).cloned().collect();
        for topic in [&position, &dv] {
            produce_to_partitions(&kafka, topic, &one);
        }
        for (_, _, value) in &batch {
            let v: Value = serde_json::from_str(value).unwrap();
            let (p, o) = (v["p"].as_i64().unwrap(), v["o"].as_i64().unwrap());
            model.appended.push((p, o));
            if p == 0 {
                model.latest.insert(v["id"].as_i64().unwrap(), o);
            }
        }
        let report = job.sync();
        for table in &tables {
            assert_eq!(table_report(&report, table)["status"], "committed");
        }
    }
    model.appended.sort();

    // The sort order is the table's (PyIceberg's view of the metadata).
    let columns = "region,o,id";
    let append_layout = layout(catalog, &tables[0], columns);
    assert_eq!(
        append_layout["sort_order"],
        json!({"order_id": 1, "fields": [
            {"column": "region", "direction": "asc", "null_order": "nulls-first", "transform": "identity"},
            {"column": "o", "direction": "desc", "null_order": "nulls-last", "transform": "identity"},
        ]}),
        "{append_layout}"
    );
    assert_files_sorted(&append_layout, &tables[0], None);
    assert_files_sorted(
        &layout(catalog, &tables[1], columns),
        &tables[1],
        Some(false),
    );
    assert_files_sorted(
        &layout(catalog, &tables[2], columns),
        &tables[2],
        Some(true),
    );
    check(catalog, &tables, &model, &["duckdb", "pyiceberg", "spark"]);
    spark_shows_the_sort_order(catalog, &tables[0]);

    // Compaction writes its files in the order too, and the next sync's
    // upserts find the rows at their sorted places.
    let report = job.maintain(&[]);
    for (table, by_id) in tables.iter().zip([None, Some(false), Some(true)]) {
        let t = report["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| &t["table"] == table)
            .unwrap_or_else(|| panic!("{table} not maintained: {report}"));
        assert!(t["compaction"]["snapshot_id"].is_i64(), "compacted: {t}");
        assert_eq!(t["after"]["delete_files"], 0, "{t}");
        // The compacted files, before any sync: in order too.
        assert_files_sorted(&layout(catalog, table, columns), table, by_id);
    }
    let batch = messages(1, 95, 20, 17);
    for topic in [&position, &dv] {
        produce_to_partitions(&kafka, topic, &batch);
    }
    produce_to_partitions(&kafka, &append, &batch);
    for (_, _, value) in &batch {
        let v: Value = serde_json::from_str(value).unwrap();
        let o = v["o"].as_i64().unwrap();
        model.appended.push((0, o));
        model.latest.insert(v["id"].as_i64().unwrap(), o);
    }
    model.appended.sort();
    job.sync();
    for (table, by_id) in tables.iter().zip([None, Some(false), Some(true)]) {
        let layout = layout(catalog, table, columns);
        assert_files_sorted(&layout, table, by_id);
    }
    check(catalog, &tables, &model, &["duckdb", "pyiceberg", "spark"]);
}

/// Spark's `DESCRIBE TABLE EXTENDED` lists the table's sort order.
fn spark_shows_the_sort_order(catalog: Catalog, table: &str) {
    let steps = ["--catalog", catalog.reader_name(), "--steps", "describe"];
    let text = spark_maintain(&steps, &[table.to_string()]);
    assert!(
        text.contains("sort-order=region ASC NULLS FIRST, o DESC NULLS LAST"),
        "Spark DESCRIBE {table}: {text}"
    );
}

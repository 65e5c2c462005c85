//! Schema evolution end to end: new fields become columns in the same
//! commit as their data, `int` widens to `long`, a field that disappears
//! reads null, a change Iceberg cannot make fails only its table, and
//! `columns = [...]` limits which fields become columns.

use serde_json::{json, Value};
use topicberg_iceberg::{Column, ColumnType, Destination, FormatVersion};

use crate::support::{create_topic, produce, read_lines, read_rows, table_report, Catalog, Job};
use crate::testbed::unique_name;

fn messages(values: &[Value]) -> Vec<(String, String)> {
    values
        .iter()
        .map(|v| (v["id"].to_string(), v.to_string()))
        .collect()
}

/// Rows by id (ids unique).
fn by_id(rows: &[Value]) -> std::collections::BTreeMap<i64, Value> {
    rows.iter()
        .map(|r| (r["id"].as_i64().expect("id"), r.clone()))
        .collect()
}

async fn connect(catalog: Catalog) -> Destination {
    crate::iceberg_append::connect(catalog.prefix()).await
}

/// The table's snapshots (oldest first) with their schema ids, and the
/// current schema id.
fn snapshot_schemas(catalog: Catalog, table: &str) -> (Vec<Option<i32>>, i32) {
    let (namespace, name) = table.split_once('.').unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let destination = connect(catalog).await;
        let handle = destination
            .load_table(&vec![namespace.to_string()], name)
            .await
            .expect("load");
        let metadata = handle.metadata();
        let mut snapshots: Vec<_> = metadata.snapshots().collect();
        snapshots.sort_by_key(|s| s.sequence_number());
        (
            snapshots.iter().map(|s| s.schema_id()).collect(),
            metadata.current_schema_id(),
        )
    })
}

fn new_fields_and_vanished_fields(catalog: Catalog, upsert: bool) {
    let topic = unique_name("evolving");
    create_topic(&topic, 2);
    let first: Vec<Value> = (0..20)
        .map(|i| json!({"id": i, "name": format!("n{i}"), "price": 1.5 * i as f64}))
        .collect();
    produce(&topic, &messages(&first));
    let streams = if upsert {
        format!("[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n")
    } else {
        String::new()
    };
    let job = Job::new(catalog, &[&topic], "", &streams);
    if upsert {
        // Deletion vectors (v3) on the strict reference catalog.
        let text = std::fs::read_to_string(&job.path).unwrap();
        let text = text.replacen('\n', "\ntarget_engines = [\"databricks\"]\n", 1);
        std::fs::write(&job.path, text).unwrap();
    }
    let report = job.sync();
    let table = job.table(&topic);
    assert_eq!(table_report(&report, &table)["records"], 20);

    // New fields (a string, a nested object, a boolean); `name` vanishes
    // from some messages; upsert also rewrites 5 old ids.
    let second: Vec<Value> = (15..30)
        .map(|i| {
            if i % 2 == 0 {
                json!({"id": i, "price": 2.0, "coupon": format!("C{i}"), "meta": {"k": [i]}, "vip": true})
            } else {
                json!({"id": i, "name": format!("m{i}"), "price": 3.0, "coupon": null})
            }
        })
        .collect();
    produce(&topic, &messages(&second));
    let report = job.sync();
    let t = table_report(&report, &table);
    assert_eq!(t["status"], "committed", "{t}");
    let changes: Vec<&str> = t["schema_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        changes,
        [
            "added column coupon (string)",
            "added column meta (json)",
            "added column vip (boolean)"
        ],
        "{t}"
    );
    // One snapshot per sync; the second one carries the new schema: the
    // columns arrived in the same commit as their data.
    let (schemas, current) = snapshot_schemas(catalog, &table);
    assert_eq!(schemas.len(), 2, "{schemas:?}");
    assert_ne!(schemas[0], Some(current));
    assert_eq!(schemas[1], Some(current));

    // The model: append keeps every message, upsert the latest per id.
    let mut latest: std::collections::BTreeMap<i64, Value> = Default::default();
    for v in first.iter().chain(&second) {
        latest.insert(v["id"].as_i64().unwrap(), v.clone());
    }
    let expected: Vec<Value> = if upsert {
        latest.into_values().collect()
    } else {
        first.iter().chain(&second).cloned().collect()
    };
    let payload = |v: &Value, from_table: bool| -> String {
        let get = |field: &str| v.get(field).cloned().unwrap_or(Value::Null);
        let meta = match get("meta") {
            Value::Null => Value::Null,
            Value::String(text) if from_table => Value::String(text),
            other => Value::String(other.to_string()),
        };
        json!([
            get("id"),
            get("name"),
            get("price"),
            get("coupon"),
            get("vip"),
            meta
        ])
        .to_string()
    };
    let mut want: Vec<String> = expected.iter().map(|v| payload(v, false)).collect();
    want.sort();
    let duckdb = read_lines("duckdb", catalog, &table);
    let rows: Vec<Value> = duckdb
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut got: Vec<String> = rows.iter().map(|r| payload(r, true)).collect();
    got.sort();
    assert_eq!(got, want, "rows of {table}: missing fields read null");
    for engine in [
        "spark",
        "pyiceberg",
        "polars",
        "datafusion",
        "chdb",
        "trino",
        "daft",
    ] {
        // chDB (ClickHouse 26.9), Trino 476 and Daft 0.7.26 refuse the
        // deletion vectors of the upsert table (asserted in sync_upsert).
        if upsert && ["chdb", "trino", "daft"].contains(&engine) {
            continue;
        }
        assert_eq!(
            read_lines(engine, catalog, &table),
            duckdb,
            "{engine} differs from DuckDB on {table}"
        );
    }
}

#[test]
fn sync_new_fields_become_columns_in_the_same_commit_and_old_rows_read_null() {
    new_fields_and_vanished_fields(Catalog::Seaweed, false);
}

#[test]
fn sync_upsert_new_fields_become_columns_on_the_reference_catalog() {
    new_fields_and_vanished_fields(Catalog::Fixture, true);
}

/// A table made elsewhere with an `int` and a `float` column: values beyond
/// their range widen them to `long` and `double` in place; a decimal in a
/// `long` column fails that table only, naming topic, partition, offset,
/// field and both types.
#[test]
fn sync_int_and_float_columns_widen_and_a_decimal_in_a_long_column_fails_only_its_table() {
    let topic = unique_name("widening");
    let other = unique_name("bystander");
    create_topic(&topic, 1);
    create_topic(&other, 1);
    let job = Job::new(Catalog::Seaweed, &[&topic, &other], "", "");
    let table = job.table(&topic);
    let (namespace, name) = table.split_once('.').unwrap();

    // The table exists with qty as int (as another tool would make it).
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let destination = connect(Catalog::Seaweed).await;
        let mut columns = vec![
            Column::optional("id", 1, ColumnType::Long),
            Column::optional("qty", 2, ColumnType::Int),
            Column::optional("ratio", 3, ColumnType::Float),
        ];
        for (i, (n, ty)) in topicberg_core::columns::METADATA_COLUMNS.iter().enumerate() {
            columns.push(Column::optional(*n, i as i32 + 4, ty.clone()));
        }
        destination
            .ensure_table(
                &vec![namespace.to_string()],
                name,
                &columns,
                FormatVersion::V2,
            )
            .await
            .expect("create the int table");
    });

    produce(
        &topic,
        &messages(&[json!({"id": 1, "qty": 7, "ratio": 0.5})]),
    );
    produce(&other, &messages(&[json!({"id": 1})]));
    job.sync();
    produce(
        &topic,
        &messages(&[json!({"id": 2, "qty": 3_000_000_000i64, "ratio": 1e300})]),
    );
    let report = job.sync();
    let t = table_report(&report, &table);
    assert_eq!(
        t["schema_changes"],
        json!([
            "widened column qty from int to long",
            "widened column ratio from float to double"
        ]),
        "{t}"
    );
    let rows = by_id(&read_rows("duckdb", Catalog::Seaweed, &table));
    assert_eq!(rows[&1]["qty"], 7);
    assert_eq!(rows[&2]["qty"], 3_000_000_000i64);
    assert_eq!(rows[&1]["ratio"], 0.5);
    assert_eq!(rows[&2]["ratio"], 1e300);
    let spark = by_id(&read_rows("spark", Catalog::Seaweed, &table));
    assert_eq!(spark[&2]["qty"], 3_000_000_000i64);

    // A decimal in the (now long) column: this table fails, the other commits.
    produce(&topic, &messages(&[json!({"id": 3, "qty": 1.5})]));
    produce(&other, &messages(&[json!({"id": 2})]));
    let out = job.run("sync", &[], &[]);
    assert_eq!(out.status.code(), Some(1), "the sync reports the failure");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let wanted = format!("{topic}[0]@2: field \"qty\": expected long, found number 1.5");
    assert!(text.contains(&wanted), "wanted {wanted:?} in:\n{text}");
    assert_eq!(
        read_rows("duckdb", Catalog::Seaweed, &table).len(),
        2,
        "nothing committed"
    );
    assert_eq!(
        read_rows("duckdb", Catalog::Seaweed, &job.table(&other)).len(),
        2,
        "the other table committed"
    );
}

/// `columns = [...]` keeps only the listed fields; a new field outside the
/// list never becomes a column, one inside it does.
#[test]
fn sync_columns_list_limits_the_fields_that_become_columns() {
    let topic = unique_name("limited");
    create_topic(&topic, 1);
    produce(
        &topic,
        &messages(&[json!({"id": 1, "name": "a", "secret": "s1", "noise": 1})]),
    );
    let streams =
        format!("[[streams]]\ntopic = \"{topic}\"\ncolumns = [\"id\", \"name\", \"coupon\"]\n");
    let job = Job::new(Catalog::Seaweed, &[&topic], "", &streams);
    job.sync();
    produce(
        &topic,
        &messages(&[json!({"id": 2, "name": "b", "secret": "s2", "extra": true, "coupon": "X"})]),
    );
    let report = job.sync();
    let t = table_report(&report, &job.table(&topic));
    assert_eq!(
        t["schema_changes"],
        json!(["added column coupon (string)"]),
        "{t}"
    );
    let rows = read_rows("duckdb", Catalog::Seaweed, &job.table(&topic));
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let object = row.as_object().unwrap();
        for absent in ["secret", "noise", "extra"] {
            assert!(
                !object.contains_key(absent),
                "{absent} must not be a column: {row}"
            );
        }
        assert!(
            object.contains_key("_kafka_offset"),
            "metadata stays: {row}"
        );
    }
    assert_eq!(by_id(&rows)[&2]["coupon"], "X");
    assert_eq!(by_id(&rows)[&1]["coupon"], Value::Null);
}

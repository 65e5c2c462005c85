//! The embedded catalog (`catalog = "sql"`) and PyIceberg's own `SqlCatalog`
//! on the same folder, both ways: PyIceberg opens what topicberg created and
//! changed; topicberg loads, changes and conflicts with what PyIceberg wrote;
//! DuckDB, PyIceberg and Spark read the same rows from it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
use iceberg::{TableRequirement, TableUpdate};
use serde_json::Value;
use topicberg_iceberg::sql::SqlCatalog;
use topicberg_iceberg::{CatalogErrorKind, Column, ColumnType};

use crate::testbed::{command, get, repo_root, unique_name};

/// The catalog name both sides use (the `catalog_name` column).
const CATALOG: &str = "topicberg_it";

/// A temporary warehouse folder, deleted when the test ends.
struct Folder(PathBuf);

impl Folder {
    fn new() -> Self {
        Self(std::env::temp_dir().join(unique_name("tb_it_sql")))
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(program: &str, args: &[&str]) -> String {
    let out = command(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// What PyIceberg's `SqlCatalog` sees of `table` in `folder` (see
/// scripts/readers/sql_catalog_probe.py), after `extra` (`--create`,
/// `--append N`).
fn probe(folder: &Path, table: &str, extra: &[&str]) -> Value {
    let script = repo_root().join("scripts/readers/sql_catalog_probe.py");
    let path = folder.to_str().expect("UTF-8 temp path");
    let mut args = vec![script.to_str().unwrap(), "--path", path, "--name", CATALOG];
    args.extend_from_slice(extra);
    args.push(table);
    let out = run(&get("TESTBED_PYTHON"), &args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("probe printed {out:?}: {e}"))
}

fn properties(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn pyiceberg_opens_a_table_topicberg_created_and_changed() {
    let folder = Folder::new();
    let namespace = vec![unique_name("it_sql")];
    let catalog = SqlCatalog::open(&folder.0, CATALOG).unwrap();
    catalog.create_namespace(&namespace).await.unwrap();
    let schema = topicberg_iceberg::schema::iceberg_schema(&[
        Column::optional("id", 1, ColumnType::Long),
        Column::optional("name", 2, ColumnType::String),
    ])
    .unwrap();
    let created = catalog
        .create_table(
            &namespace,
            "events",
            &schema,
            &properties(&[("format-version", "2"), ("topicberg.created", "yes")]),
        )
        .await
        .unwrap();

    // A snapshot-free change: a new column and a property.
    let evolved = Schema::builder()
        .with_schema_id(1)
        .with_fields(vec![
            NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
            NestedField::optional(3, "amount", Type::Primitive(PrimitiveType::Double)).into(),
        ])
        .build()
        .unwrap();
    let committed = catalog
        .commit_table(
            &namespace,
            "events",
            &[
                TableRequirement::UuidMatch {
                    uuid: created.metadata.uuid(),
                },
                TableRequirement::CurrentSchemaIdMatch {
                    current_schema_id: created.metadata.current_schema_id(),
                },
            ],
            &[
                TableUpdate::AddSchema { schema: evolved },
                TableUpdate::SetCurrentSchema { schema_id: -1 },
                TableUpdate::SetProperties {
                    updates: properties(&[("topicberg.probe", "from-rust")]),
                },
            ],
        )
        .await
        .unwrap();

    let table = format!("{}.events", namespace[0]);
    let seen = probe(&folder.0, &table, &[]);
    eprintln!("PyIceberg saw: {seen}");
    assert_eq!(
        seen["metadata_location"].as_str(),
        committed.metadata_location.as_deref()
    );
    assert_eq!(seen["properties"]["topicberg.probe"], "from-rust");
    assert_eq!(seen["properties"]["topicberg.created"], "yes");
    assert_eq!(seen["format_version"], 2);
    assert_eq!(seen["current_schema_id"], 1);
    let columns: Vec<&str> = seen["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[0].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["id", "name", "amount"]);
    assert_eq!(
        seen["metadata_log"][0].as_str(),
        created.metadata_location.as_deref()
    );
    assert_eq!(seen["current_snapshot_id"], Value::Null);
    assert_eq!(seen["rows"], 0);
}

#[tokio::test]
async fn topicberg_loads_changes_and_conflicts_with_a_pyiceberg_table() {
    let folder = Folder::new();
    let ns = unique_name("it_sql");
    let table = format!("{ns}.orders");
    let namespace = vec![ns.clone()];

    // PyIceberg creates the catalog file, the table, and appends 5 rows.
    let written = probe(&folder.0, &table, &["--create", "--append", "5"]);
    assert_eq!(written["rows"], 5);

    let catalog = SqlCatalog::open(&folder.0, CATALOG).unwrap();
    assert_eq!(
        catalog.list_namespaces(None).await.unwrap(),
        vec![namespace.clone()]
    );
    let loaded = catalog.load_table(&namespace, "orders").await.unwrap();
    assert_eq!(
        loaded.metadata_location.as_deref(),
        written["metadata_location"].as_str()
    );
    let snapshot = loaded
        .metadata
        .current_snapshot()
        .expect("PyIceberg's snapshot");
    assert_eq!(
        Some(snapshot.snapshot_id()),
        written["current_snapshot_id"].as_i64()
    );
    let summary = &snapshot.summary().additional_properties;
    assert_eq!(summary.get("added-records").map(String::as_str), Some("5"));
    assert_eq!(summary.get("total-records").map(String::as_str), Some("5"));

    // Our commit on top of PyIceberg's metadata; PyIceberg still scans it.
    let on_main = TableRequirement::RefSnapshotIdMatch {
        r#ref: "main".into(),
        snapshot_id: Some(snapshot.snapshot_id()),
    };
    let committed = catalog
        .commit_table(
            &namespace,
            "orders",
            std::slice::from_ref(&on_main),
            &[TableUpdate::SetProperties {
                updates: properties(&[("topicberg.offsets", r#"{"orders":{"0":5}}"#)]),
            }],
        )
        .await
        .unwrap();
    let seen = probe(&folder.0, &table, &[]);
    assert_eq!(
        seen["metadata_location"].as_str(),
        committed.metadata_location.as_deref()
    );
    assert_eq!(
        seen["properties"]["topicberg.offsets"],
        r#"{"orders":{"0":5}}"#
    );
    assert_eq!(seen["rows"], 5);
    assert_eq!(seen["snapshots"], written["snapshots"]);

    // PyIceberg appends again: our commit based on the old snapshot conflicts.
    let appended = probe(&folder.0, &table, &["--append", "3"]);
    assert_eq!(appended["rows"], 8);
    let stale = catalog
        .commit_table(
            &namespace,
            "orders",
            &[on_main],
            &[TableUpdate::SetProperties {
                updates: properties(&[("topicberg.offsets", r#"{"orders":{"0":9}}"#)]),
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(stale.kind, CatalogErrorKind::Conflict, "{stale}");
    let reloaded = catalog.load_table(&namespace, "orders").await.unwrap();
    let summary = &reloaded
        .metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    assert_eq!(summary.get("total-records").map(String::as_str), Some("8"));
    assert_eq!(
        reloaded
            .metadata
            .properties()
            .get("topicberg.offsets")
            .map(String::as_str),
        Some(r#"{"orders":{"0":5}}"#),
        "PyIceberg's commit kept our property"
    );

    // The three independent readers agree on the 8 rows.
    let read = format!("{}/read", get("TESTBED_READERS"));
    let path = folder.0.to_str().unwrap();
    let mut outputs = Vec::new();
    for engine in ["duckdb", "pyiceberg", "spark"] {
        let args = [
            engine,
            "--catalog",
            "sql",
            "--sql-path",
            path,
            "--sql-name",
            CATALOG,
            &table,
        ];
        outputs.push((engine, run(&read, &args)));
    }
    let (_, first) = &outputs[0];
    assert_eq!(first.lines().count(), 8, "{first}");
    assert!(first.starts_with(r#"{"id":1,"name":"row-1"}"#), "{first}");
    for (engine, output) in &outputs {
        assert_eq!(output, first, "{engine} read {table} differently");
    }
}

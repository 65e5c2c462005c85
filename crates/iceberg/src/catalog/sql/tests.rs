//! The embedded catalog against temporary folders.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use iceberg::spec::{
    FormatVersion, NestedField, Operation, PrimitiveType, Schema, Snapshot, SnapshotReference,
    SnapshotRetention, Summary, Type,
};
use iceberg::{TableRequirement, TableUpdate};
use rusqlite::params;

use super::*;

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("tb-sql-{}", uuid::Uuid::new_v4().simple()));
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ns(levels: &[&str]) -> Namespace {
    levels.iter().map(|l| l.to_string()).collect()
}

fn schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()
        .unwrap()
}

fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn set_property(key: &str, value: &str) -> TableUpdate {
    TableUpdate::SetProperties {
        updates: props(&[(key, value)]),
    }
}

/// The row of `ns.table` in the SQLite file, read with plain SQL.
fn row(catalog: &SqlCatalog, namespace: &str, table: &str) -> (String, Option<String>, String) {
    let conn = rusqlite::Connection::open(catalog.db_path()).unwrap();
    conn.query_row(
        "SELECT metadata_location, previous_metadata_location, iceberg_type FROM iceberg_tables \
         WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
        params![catalog.name(), namespace, table],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

fn metadata_files(catalog: &SqlCatalog, namespace: &str, table: &str) -> Vec<String> {
    let dir = catalog
        .folder()
        .join(namespace)
        .join(table)
        .join("metadata");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn namespaces_and_a_new_table_are_laid_out_as_pyiceberg_does() {
    let dir = TempDir::new();
    let catalog = SqlCatalog::open(&dir.0.join("warehouse"), "default").unwrap();
    assert!(catalog.db_path().ends_with("warehouse/catalog.db"));
    assert!(catalog.warehouse().starts_with("file:///"));
    assert!(catalog.list_namespaces(None).await.unwrap().is_empty());

    catalog
        .create_namespace(&ns(&["orders_topics"]))
        .await
        .unwrap();
    catalog
        .ensure_namespace(&ns(&["orders_topics"]))
        .await
        .unwrap();
    let again = catalog
        .create_namespace(&ns(&["orders_topics"]))
        .await
        .unwrap_err();
    assert_eq!(again.kind, CatalogErrorKind::Conflict, "{again}");
    catalog.create_namespace(&ns(&["a", "b"])).await.unwrap();
    assert_eq!(
        catalog.list_namespaces(None).await.unwrap(),
        vec![ns(&["a"]), ns(&["orders_topics"])]
    );
    assert_eq!(
        catalog.list_namespaces(Some(&ns(&["a"]))).await.unwrap(),
        vec![ns(&["a", "b"])]
    );
    let missing = catalog
        .list_namespaces(Some(&ns(&["zz"])))
        .await
        .unwrap_err();
    assert_eq!(missing.kind, CatalogErrorKind::NotFound);
    let dotted = catalog.create_namespace(&ns(&["a.b"])).await.unwrap_err();
    assert_eq!(dotted.kind, CatalogErrorKind::Protocol);

    let created = catalog
        .create_table(
            &ns(&["orders_topics"]),
            "orders",
            &schema(),
            &props(&[("owner", "tb")]),
        )
        .await
        .unwrap();
    let location = created.metadata_location.clone().unwrap();
    let expected_dir = format!("{}/orders_topics/orders", catalog.warehouse());
    assert_eq!(created.metadata.location(), expected_dir);
    assert!(
        location.starts_with(&format!("{expected_dir}/metadata/00000-")),
        "{location}"
    );
    assert!(location.ends_with(".metadata.json"), "{location}");
    assert_eq!(created.metadata.format_version(), FormatVersion::V2);
    assert_eq!(created.metadata.properties().get("owner").unwrap(), "tb");
    assert!(!created.metadata.properties().contains_key("format-version"));
    assert_eq!(
        created.metadata.current_schema().as_struct().fields().len(),
        2
    );
    assert!(created.metadata.current_snapshot().is_none());
    assert!(created.config.is_empty());

    let (pointer, previous, kind) = row(&catalog, "orders_topics", "orders");
    assert_eq!(pointer, location);
    assert_eq!(previous, None);
    assert_eq!(kind, "TABLE");

    let loaded = catalog
        .load_table(&ns(&["orders_topics"]), "orders")
        .await
        .unwrap();
    assert_eq!(loaded.metadata, created.metadata);
    assert_eq!(loaded.metadata_location, Some(location));

    let dup = catalog
        .create_table(
            &ns(&["orders_topics"]),
            "orders",
            &schema(),
            &HashMap::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(dup.kind, CatalogErrorKind::Conflict, "{dup}");
    assert_eq!(metadata_files(&catalog, "orders_topics", "orders").len(), 1);
    let no_ns = catalog
        .create_table(&ns(&["nope"]), "t", &schema(), &HashMap::new())
        .await
        .unwrap_err();
    assert_eq!(no_ns.kind, CatalogErrorKind::NotFound, "{no_ns}");
    let no_table = catalog
        .load_table(&ns(&["orders_topics"]), "customers")
        .await
        .unwrap_err();
    assert_eq!(no_table.kind, CatalogErrorKind::NotFound);
    assert!(no_table.to_string().contains("catalog.db"), "{no_table}");

    let v3 = catalog
        .create_table(
            &ns(&["a", "b"]),
            "v3",
            &schema(),
            &props(&[("format-version", "3")]),
        )
        .await
        .unwrap();
    assert_eq!(v3.metadata.format_version(), FormatVersion::V3);
    assert!(v3.metadata.location().ends_with("/a.b/v3"));
    let bad = catalog
        .create_table(
            &ns(&["a", "b"]),
            "v9",
            &schema(),
            &props(&[("format-version", "9")]),
        )
        .await
        .unwrap_err();
    assert_eq!(bad.kind, CatalogErrorKind::Protocol);
}

#[tokio::test]
async fn a_commit_writes_the_next_metadata_file_and_moves_the_pointer() {
    let dir = TempDir::new();
    let catalog = SqlCatalog::open(&dir.0, "default").unwrap();
    let n = ns(&["ns"]);
    catalog.create_namespace(&n).await.unwrap();
    let base = catalog
        .create_table(&n, "t", &schema(), &HashMap::new())
        .await
        .unwrap();
    let base_location = base.metadata_location.clone().unwrap();

    let mut evolved = schema()
        .into_builder()
        .with_schema_id(1)
        .build()
        .unwrap()
        .as_struct()
        .fields()
        .to_vec();
    evolved.push(NestedField::optional(3, "amount", Type::Primitive(PrimitiveType::Double)).into());
    let new_schema = Schema::builder()
        .with_schema_id(1)
        .with_fields(evolved)
        .build()
        .unwrap();
    let committed = catalog
        .commit_table(
            &n,
            "t",
            &[
                TableRequirement::UuidMatch {
                    uuid: base.metadata.uuid(),
                },
                TableRequirement::CurrentSchemaIdMatch {
                    current_schema_id: 0,
                },
            ],
            &[
                TableUpdate::AddSchema { schema: new_schema },
                TableUpdate::SetCurrentSchema { schema_id: -1 },
                set_property("topicberg.test", "1"),
            ],
        )
        .await
        .unwrap();
    let location = committed.metadata_location.clone().unwrap();
    assert!(location.contains("/metadata/00001-"), "{location}");
    assert_eq!(committed.metadata.current_schema_id(), 1);
    assert_eq!(
        committed
            .metadata
            .current_schema()
            .as_struct()
            .fields()
            .len(),
        3
    );
    assert_eq!(
        committed
            .metadata
            .properties()
            .get("topicberg.test")
            .unwrap(),
        "1"
    );
    let log = committed.metadata.metadata_log();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].metadata_file, base_location);

    let (pointer, previous, _) = row(&catalog, "ns", "t");
    assert_eq!(pointer, location);
    assert_eq!(previous.as_deref(), Some(base_location.as_str()));
    let loaded = catalog.load_table(&n, "t").await.unwrap();
    assert_eq!(loaded.metadata, committed.metadata);

    // A stale requirement is a conflict, and writes nothing.
    let stale = catalog
        .commit_table(
            &n,
            "t",
            &[TableRequirement::CurrentSchemaIdMatch {
                current_schema_id: 0,
            }],
            &[set_property("topicberg.test", "2")],
        )
        .await
        .unwrap_err();
    assert_eq!(stale.kind, CatalogErrorKind::Conflict, "{stale}");
    assert_eq!(metadata_files(&catalog, "ns", "t").len(), 2);

    // No updates: nothing written, the current table back.
    let same = catalog.commit_table(&n, "t", &[], &[]).await.unwrap();
    assert_eq!(same.metadata_location, Some(location));
    assert_eq!(metadata_files(&catalog, "ns", "t").len(), 2);

    // An update the metadata refuses is a protocol error.
    let reserved = catalog
        .commit_table(&n, "t", &[], &[set_property("format-version", "3")])
        .await
        .unwrap_err();
    assert_eq!(reserved.kind, CatalogErrorKind::Protocol, "{reserved}");
    assert_eq!(metadata_files(&catalog, "ns", "t").len(), 2);

    // A missing table.
    let missing = catalog
        .commit_table(&n, "nope", &[], &[set_property("a", "b")])
        .await
        .unwrap_err();
    assert_eq!(missing.kind, CatalogErrorKind::NotFound);
}

#[tokio::test]
async fn a_snapshot_commit_sets_main_and_the_sequence_number() {
    let dir = TempDir::new();
    let catalog = SqlCatalog::open(&dir.0, "default").unwrap();
    let n = ns(&["ns"]);
    catalog.create_namespace(&n).await.unwrap();
    let base = catalog
        .create_table(&n, "t", &schema(), &HashMap::new())
        .await
        .unwrap();
    let snapshot = Snapshot::builder()
        .with_snapshot_id(42)
        .with_sequence_number(1)
        .with_timestamp_ms(chrono_now_ms())
        .with_manifest_list(format!(
            "{}/metadata/snap-42.avro",
            base.metadata.location()
        ))
        .with_summary(Summary {
            operation: Operation::Append,
            additional_properties: props(&[("added-records", "3")]),
        })
        .with_schema_id(0)
        .build();
    let committed = catalog
        .commit_table(
            &n,
            "t",
            &[TableRequirement::RefSnapshotIdMatch {
                r#ref: "main".into(),
                snapshot_id: None,
            }],
            &[
                TableUpdate::AddSnapshot { snapshot },
                TableUpdate::SetSnapshotRef {
                    ref_name: "main".into(),
                    reference: SnapshotReference::new(
                        42,
                        SnapshotRetention::branch(None, None, None),
                    ),
                },
            ],
        )
        .await
        .unwrap();
    let current = committed.metadata.current_snapshot().unwrap();
    assert_eq!(current.snapshot_id(), 42);
    assert_eq!(committed.metadata.last_sequence_number(), 1);
    // The same requirement again: main now exists, so it conflicts.
    let again = catalog
        .commit_table(
            &n,
            "t",
            &[TableRequirement::RefSnapshotIdMatch {
                r#ref: "main".into(),
                snapshot_id: None,
            }],
            &[set_property("x", "y")],
        )
        .await
        .unwrap_err();
    assert_eq!(again.kind, CatalogErrorKind::Conflict);
}

fn chrono_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test]
async fn the_pointer_swap_refuses_a_stale_base() {
    let dir = TempDir::new();
    let catalog = SqlCatalog::open(&dir.0, "default").unwrap();
    let n = ns(&["ns"]);
    catalog.create_namespace(&n).await.unwrap();
    let base = catalog
        .create_table(&n, "t", &schema(), &HashMap::new())
        .await
        .unwrap();
    let base_location = base.metadata_location.unwrap();
    catalog
        .commit_table(&n, "t", &[], &[set_property("first", "1")])
        .await
        .unwrap();
    // A second writer that read `base` before the first commit landed.
    let mut conn = rusqlite::Connection::open(catalog.db_path()).unwrap();
    let swapped = catalog
        .inner
        .swap_pointer(
            &mut conn,
            "ns",
            "t",
            &base_location,
            "file:///elsewhere.json",
        )
        .unwrap();
    assert!(!swapped, "a stale base must not swap the pointer");
    assert_ne!(row(&catalog, "ns", "t").0, "file:///elsewhere.json");
}

#[test]
fn concurrent_commits_from_one_base_land_once_each_or_conflict() {
    let dir = TempDir::new();
    let catalog = SqlCatalog::open(&dir.0, "default").unwrap();
    let n = ns(&["ns"]);
    let inner = Arc::clone(&catalog.inner);
    inner.create_namespace(&n).unwrap();
    inner
        .create_table(
            &n,
            "t",
            schema(),
            Default::default(),
            Default::default(),
            HashMap::new(),
        )
        .unwrap();

    const WRITERS: usize = 8;
    let barrier = Arc::new(std::sync::Barrier::new(WRITERS));
    let handles: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (inner, barrier, n) = (Arc::clone(&inner), Arc::clone(&barrier), n.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let key = format!("writer.{i}");
                inner
                    .commit_table(&n, "t", &[], vec![set_property(&key, "done")])
                    .map(|_| key)
            })
        })
        .collect();
    let mut landed = Vec::new();
    let mut conflicts = 0;
    for handle in handles {
        match handle.join().unwrap() {
            Ok(key) => landed.push(key),
            Err(e) if e.kind == CatalogErrorKind::Conflict => conflicts += 1,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert!(!landed.is_empty());
    eprintln!("{} commits landed, {conflicts} conflicted", landed.len());
    assert_eq!(landed.len() + conflicts, WRITERS);

    let table = inner.load_table(&n, "t").unwrap();
    let mut written: Vec<String> = table
        .metadata
        .properties()
        .keys()
        .filter(|k| k.starts_with("writer."))
        .cloned()
        .collect();
    written.sort();
    landed.sort();
    assert_eq!(
        written, landed,
        "exactly the commits that succeeded are in the table"
    );
    assert_eq!(table.metadata.metadata_log().len(), landed.len());
    // One file per landed commit plus the creation; a loser's file is gone.
    assert_eq!(metadata_files(&catalog, "ns", "t").len(), 1 + landed.len());
}

#[tokio::test]
async fn a_reopened_catalog_sees_the_same_tables_and_names_separate_catalogs() {
    let dir = TempDir::new();
    let n = ns(&["ns"]);
    let committed = {
        let catalog = SqlCatalog::open(&dir.0, "default").unwrap();
        catalog.create_namespace(&n).await.unwrap();
        catalog
            .create_table(&n, "t", &schema(), &HashMap::new())
            .await
            .unwrap();
        catalog
            .commit_table(&n, "t", &[], &[set_property("k", "v")])
            .await
            .unwrap()
    };
    let reopened = SqlCatalog::open(&dir.0, "default").unwrap();
    let loaded = reopened.load_table(&n, "t").await.unwrap();
    assert_eq!(loaded.metadata, committed.metadata);
    assert_eq!(loaded.metadata_location, committed.metadata_location);
    assert_eq!(
        reopened.list_namespaces(None).await.unwrap(),
        vec![n.clone()]
    );

    let other = SqlCatalog::open(&dir.0, "other").unwrap();
    assert!(other.list_namespaces(None).await.unwrap().is_empty());
    let err = other.load_table(&n, "t").await.unwrap_err();
    assert_eq!(err.kind, CatalogErrorKind::NotFound);
}

#[tokio::test]
async fn drop_table_and_namespace() {
    let dir = TempDir::new();
    let catalog = SqlCatalog::open(&dir.0, "default").unwrap();
    let n = ns(&["ns"]);
    catalog.create_namespace(&n).await.unwrap();
    catalog
        .create_table(&n, "keep", &schema(), &HashMap::new())
        .await
        .unwrap();
    catalog
        .create_table(&n, "purge", &schema(), &HashMap::new())
        .await
        .unwrap();
    let busy = catalog.drop_namespace(&n).await.unwrap_err();
    assert_eq!(busy.kind, CatalogErrorKind::Conflict, "{busy}");

    catalog.drop_table(&n, "keep", false).await.unwrap();
    assert!(
        dir.0.join("ns/keep/metadata").is_dir(),
        "no purge keeps files"
    );
    catalog.drop_table(&n, "purge", true).await.unwrap();
    assert!(!dir.0.join("ns/purge").exists(), "purge deletes the folder");
    let gone = catalog.drop_table(&n, "purge", false).await.unwrap_err();
    assert_eq!(gone.kind, CatalogErrorKind::NotFound);

    catalog.drop_namespace(&n).await.unwrap();
    assert!(catalog.list_namespaces(None).await.unwrap().is_empty());
    let again = catalog.drop_namespace(&n).await.unwrap_err();
    assert_eq!(again.kind, CatalogErrorKind::NotFound);
}

#[tokio::test]
async fn an_old_catalog_without_iceberg_type_is_used_as_is() {
    let dir = TempDir::new();
    std::fs::create_dir_all(&dir.0).unwrap();
    let conn = rusqlite::Connection::open(dir.0.join(CATALOG_FILE)).unwrap();
    conn.execute_batch(
        "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, \
         table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, \
         metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), \
         PRIMARY KEY (catalog_name, table_namespace, table_name));",
    )
    .unwrap();
    drop(conn);
    let catalog = SqlCatalog::open(&dir.0, "default").unwrap();
    let n = ns(&["ns"]);
    catalog.create_namespace(&n).await.unwrap();
    catalog
        .create_table(&n, "t", &schema(), &HashMap::new())
        .await
        .unwrap();
    catalog
        .commit_table(&n, "t", &[], &[set_property("k", "v")])
        .await
        .unwrap();
    let loaded = catalog.load_table(&n, "t").await.unwrap();
    assert_eq!(loaded.metadata.properties().get("k").unwrap(), "v");
}

#[test]
fn a_file_that_is_not_a_catalog_is_refused_with_its_path() {
    let dir = TempDir::new();
    std::fs::create_dir_all(&dir.0).unwrap();
    std::fs::write(dir.0.join(CATALOG_FILE), vec![b'x'; 4096]).unwrap();
    let err = SqlCatalog::open(&dir.0, "default").unwrap_err();
    assert_eq!(err.kind, CatalogErrorKind::Protocol, "{err}");
    assert!(err.to_string().contains(CATALOG_FILE), "{err}");
}

#[tokio::test]
async fn purge_keeps_a_folder_another_catalog_name_still_uses() {
    let dir = TempDir::new();
    let n = ns(&["ns"]);
    let first = SqlCatalog::open(&dir.0, "first").unwrap();
    let second = SqlCatalog::open(&dir.0, "second").unwrap();
    for catalog in [&first, &second] {
        catalog.create_namespace(&n).await.unwrap();
        catalog
            .create_table(&n, "t", &schema(), &HashMap::new())
            .await
            .unwrap();
    }
    first.drop_table(&n, "t", true).await.unwrap();
    second.load_table(&n, "t").await.unwrap();
    second.drop_table(&n, "t", true).await.unwrap();
    assert!(!dir.0.join("ns/t").exists());
}

#[tokio::test]
async fn a_new_table_carries_its_sort_order_into_the_first_metadata_file() {
    use iceberg::spec::{
        NullOrder, SortDirection, SortField, SortOrder, Transform, UnboundPartitionSpec,
    };
    let dir = TempDir::new();
    let catalog = SqlCatalog::open(&dir.0, "default").unwrap();
    catalog.create_namespace(&ns(&["sorted"])).await.unwrap();
    let order = SortOrder::builder()
        .with_order_id(1)
        .with_sort_field(SortField {
            source_id: 2,
            transform: Transform::Identity,
            direction: SortDirection::Descending,
            null_order: NullOrder::Last,
        })
        .build(&schema())
        .unwrap();
    catalog
        .create_partitioned_table(
            &ns(&["sorted"]),
            "t",
            &schema(),
            &UnboundPartitionSpec::default(),
            &order,
            &HashMap::new(),
        )
        .await
        .unwrap();
    // Read back from the file, not from what create returned.
    let loaded = catalog.load_table(&ns(&["sorted"]), "t").await.unwrap();
    assert_eq!(loaded.metadata.default_sort_order_id(), 1);
    assert_eq!(loaded.metadata.default_sort_order().fields, order.fields);
}

//! The delete side of upsert against the test bed: row deltas with position
//! delete files (format v2, both REST catalogs) and deletion vectors (format
//! v3, the reference catalog and the embedded catalog: SeaweedFS's table
//! bucket refuses `*.puffin` objects), read back by DuckDB, PyIceberg (v2)
//! and Spark.

use std::collections::BTreeMap;
use std::path::PathBuf;

use topicberg_iceberg::{
    is_stale_deletes, DataFile, Destination, FormatVersion, RoaringTreemap, RowDelta, TableHandle,
};

use crate::iceberg_append::{batch, canonical, columns, connect, orders_table, read, rows, Row};
use crate::support::{DV_READERS, READERS};
use crate::testbed::{command, get, unique_name};

/// Appends rows with ids `first..first + count` as one data file; returns it.
async fn append_file(
    destination: &Destination,
    handle: &mut TableHandle,
    first: i64,
    count: i64,
) -> DataFile {
    let files = destination
        .write_data_files(handle, [batch(handle, &rows(first, count))])
        .await
        .expect("write a data file");
    assert_eq!(files.len(), 1);
    destination
        .commit_append(handle, files.clone(), BTreeMap::new())
        .await
        .expect("append");
    files.into_iter().next().unwrap()
}

/// New data files with ids `first..first + count`, not yet committed.
async fn new_data(
    destination: &Destination,
    handle: &TableHandle,
    first: i64,
    count: i64,
) -> Vec<DataFile> {
    destination
        .write_data_files(handle, [batch(handle, &rows(first, count))])
        .await
        .expect("write a data file")
}

/// The rows of the given ids (each id's row is deterministic).
fn expected(ids: &[i64]) -> String {
    let all: Vec<Row> = ids.iter().flat_map(|&id| rows(id, 1)).collect();
    canonical(&all)
}

fn offsets(n: u64) -> BTreeMap<String, String> {
    BTreeMap::from([(
        "topicberg.offsets".to_string(),
        format!(r#"{{"orders":{{"0":{n}}}}}"#),
    )])
}

fn assert_reads(engine: &str, got: &str, want: &str, table: &str) {
    assert!(
        got == want,
        "{engine} read {table}: {} lines, want {}; first difference:\n got:  {:?}\n want: {:?}",
        got.lines().count(),
        want.lines().count(),
        got.lines()
            .zip(want.lines())
            .find(|(a, b)| a != b)
            .map(|(a, _)| a),
        got.lines()
            .zip(want.lines())
            .find(|(a, b)| a != b)
            .map(|(_, b)| b),
    );
}

/// The ids still in the table: `0..500` and the new `1000..1020`, minus
/// `deleted`.
fn live_ids(deleted: &[i64], added: std::ops::Range<i64>) -> Vec<i64> {
    (0..500)
        .chain(added)
        .filter(|id| !deleted.contains(id))
        .collect()
}

/// v2: two appends (files A = ids 0..300, B = 300..500), then a row delta
/// deleting rows of both and adding 20 rows (`overwrite`), then a
/// delete-only row delta on A (`delete`).
async fn position_deletes_read_back(catalog: &str) {
    let (destination, namespace, mut handle) =
        orders_table(catalog, "it_pdel", FormatVersion::V2).await;
    let name = "orders";
    let a = append_file(&destination, &mut handle, 0, 300).await;
    let b = append_file(&destination, &mut handle, 300, 200).await;

    let first_deletes = [3i64, 10, 50, 299, 300, 301, 450];
    let deletes = vec![
        (a.file_path().to_string(), vec![299, 3, 50, 10]),
        (b.file_path().to_string(), vec![150, 0, 1]),
    ];
    let file = destination
        .write_position_deletes(&handle, &deletes)
        .await
        .expect("write position deletes")
        .expect("a delete file");
    assert_eq!(file.record_count(), 7);
    assert_eq!(file.referenced_data_file(), None, "two data files");
    let data = new_data(&destination, &handle, 1000, 20).await;
    let one = destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                data_files: data,
                delete_files: vec![file],
                replaced_dvs: Vec::new(),
                summary_extra: offsets(520),
                offsets: None,
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{catalog}: {e}"));
    let s = &one.summary;
    assert_eq!(s["added-data-files"], "1", "{s:?}");
    assert_eq!(s["added-records"], "20", "{s:?}");
    assert_eq!(s["added-delete-files"], "1", "{s:?}");
    assert_eq!(s["added-position-delete-files"], "1", "{s:?}");
    assert_eq!(s["added-position-deletes"], "7", "{s:?}");
    assert_eq!(s["total-records"], "520", "{s:?}");
    assert_eq!(s["total-data-files"], "3", "{s:?}");
    assert_eq!(s["total-delete-files"], "1", "{s:?}");
    assert_eq!(s["total-position-deletes"], "7", "{s:?}");
    assert_eq!(s["total-equality-deletes"], "0", "{s:?}");
    assert_eq!(s["topicberg.offsets"], r#"{"orders":{"0":520}}"#);
    assert!(!s.contains_key("added-dvs"), "{s:?}");

    let second_deletes = [5i64, 6];
    let file = destination
        .write_position_deletes(&handle, &[(a.file_path().to_string(), vec![6, 5])])
        .await
        .expect("write position deletes")
        .expect("a delete file");
    assert_eq!(
        file.referenced_data_file().as_deref(),
        Some(a.file_path()),
        "one data file"
    );
    let two = destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                delete_files: vec![file],
                summary_extra: offsets(522),
                offsets: None,
                ..RowDelta::default()
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{catalog}: {e}"));
    assert_eq!(two.parent_snapshot_id, Some(one.snapshot_id));
    assert_eq!(two.sequence_number, one.sequence_number + 1);
    assert_eq!(two.summary["total-position-deletes"], "9");
    assert_eq!(two.summary["total-delete-files"], "2");
    assert!(!two.summary.contains_key("added-records"));

    let reloaded = destination
        .load_table(&namespace, name)
        .await
        .expect("reload");
    let ops: Vec<String> = reloaded
        .snapshot_summaries()
        .iter()
        .map(|s| s.operation.clone())
        .collect();
    assert_eq!(ops, ["delete", "overwrite", "append", "append"]);

    let deleted: Vec<i64> = first_deletes
        .iter()
        .chain(&second_deletes)
        .copied()
        .collect();
    let want = expected(&live_ids(&deleted, 1000..1020));
    assert_eq!(want.lines().count(), 511);
    let table = format!("{}.{name}", namespace[0]);
    for engine in ["duckdb", "pyiceberg", "spark"] {
        assert_reads(engine, &read(engine, catalog, &table), &want, &table);
    }
    drop_all(catalog, &namespace).await;
}

/// Drops the test table and namespace on a fresh connection (the old one's
/// pooled connection may have idled out while Spark read).
async fn drop_all(catalog: &str, namespace: &[String]) {
    let destination = connect(catalog).await;
    let namespace = namespace.to_vec();
    destination
        .drop_table(&namespace, "orders", true)
        .await
        .expect("drop");
    destination
        .catalog()
        .drop_namespace(&namespace)
        .await
        .expect("drop namespace");
}

#[tokio::test]
async fn iceberg_deletes_position_deletes_v2_on_fixture() {
    position_deletes_read_back("FIXTURE").await;
}

#[tokio::test]
async fn iceberg_deletes_position_deletes_v2_on_seaweed() {
    position_deletes_read_back("SEAWEED").await;
}

/// v3: DVs on files A and B plus new rows; then more deletes on A merged
/// with its DV, replacing it in the same commit; a writer with a stale view
/// of A's DV is told to merge again.
async fn deletion_vectors_merge_and_replace(
    destination: &Destination,
    namespace: &[String],
    read_table: &dyn Fn(&str) -> String,
) {
    let namespace = namespace.to_vec();
    let name = "orders";
    let mut handle = destination
        .ensure_table(&namespace, name, &columns(), FormatVersion::V3)
        .await
        .expect("create a v3 table");
    let a = append_file(destination, &mut handle, 0, 300).await;
    let b = append_file(destination, &mut handle, 300, 200).await;
    assert!(destination
        .current_deletion_vectors(&handle)
        .await
        .unwrap()
        .is_empty());

    let vector = |positions: &[u64]| positions.iter().copied().collect::<RoaringTreemap>();
    let dvs = destination
        .write_deletion_vectors(
            &handle,
            &[
                (a.file_path().to_string(), vector(&[3, 10, 50])),
                (b.file_path().to_string(), vector(&[0, 150])),
            ],
        )
        .await
        .expect("write deletion vectors");
    assert_eq!(dvs.len(), 2);
    assert_eq!(dvs[0].file_path(), dvs[1].file_path(), "one Puffin file");
    let data = new_data(destination, &handle, 1000, 20).await;
    let one = destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                data_files: data,
                delete_files: dvs,
                replaced_dvs: Vec::new(),
                summary_extra: offsets(520),
                offsets: None,
            },
        )
        .await
        .expect("commit DVs and data");
    let s = &one.summary;
    assert_eq!(s["added-dvs"], "2", "{s:?}");
    assert_eq!(s["added-delete-files"], "2", "{s:?}");
    assert_eq!(s["added-position-deletes"], "5", "{s:?}");
    assert_eq!(s["added-records"], "20", "{s:?}");
    assert!(!s.contains_key("added-position-delete-files"), "{s:?}");
    assert!(!s.contains_key("removed-dvs"), "{s:?}");
    assert_eq!(s["total-records"], "520", "{s:?}");
    assert_eq!(s["total-position-deletes"], "5", "{s:?}");
    assert_eq!(handle.metadata().next_row_id(), 520, "row lineage");
    let stale_view = handle.clone();

    // More deletes on A: merge with its current DV and replace it.
    let current = destination.current_deletion_vectors(&handle).await.unwrap();
    assert_eq!(current.len(), 2);
    let old_a = current[a.file_path()].clone();
    let mut merged = destination
        .read_deletion_vector(&old_a)
        .await
        .expect("read DV");
    assert_eq!(merged, vector(&[3, 10, 50]));
    merged.extend([11u64, 12]);
    let new_a = destination
        .write_deletion_vectors(&handle, &[(a.file_path().to_string(), merged.clone())])
        .await
        .expect("write the merged DV");
    let two = destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                delete_files: new_a.clone(),
                replaced_dvs: vec![old_a.clone()],
                summary_extra: offsets(522),
                offsets: None,
                ..RowDelta::default()
            },
        )
        .await
        .expect("commit the merged DV");
    let s = &two.summary;
    assert_eq!(s["added-dvs"], "1", "{s:?}");
    assert_eq!(s["removed-dvs"], "1", "{s:?}");
    assert_eq!(s["added-position-deletes"], "5", "{s:?}");
    assert_eq!(s["removed-position-deletes"], "3", "{s:?}");
    assert_eq!(s["total-position-deletes"], "7", "{s:?}");
    assert_eq!(s["total-delete-files"], "2", "{s:?}");
    assert_eq!(s["total-records"], "520", "{s:?}");
    let current = destination.current_deletion_vectors(&handle).await.unwrap();
    assert_eq!(current.len(), 2, "one DV per data file");
    assert_eq!(current[a.file_path()].record_count(), 5);
    assert_eq!(current[a.file_path()].file_path(), new_a[0].file_path());
    assert_eq!(current[b.file_path()].record_count(), 2);

    // A writer that still sees the first DV of A: 409, reload, and the
    // DV it replaces is gone: a conflict the caller resolves by merging.
    let mut stale = stale_view;
    let again = destination
        .write_deletion_vectors(
            &stale,
            &[(a.file_path().to_string(), vector(&[3, 10, 50, 60]))],
        )
        .await
        .unwrap();
    let err = destination
        .commit_row_delta(
            &mut stale,
            RowDelta {
                delete_files: again,
                replaced_dvs: vec![old_a],
                ..RowDelta::default()
            },
        )
        .await
        .expect_err("a stale DV replacement must not commit");
    assert!(is_stale_deletes(&err), "{err}");
    assert!(err.retryable(), "{err}");

    let reloaded = destination
        .load_table(&namespace, name)
        .await
        .expect("reload");
    let ops: Vec<String> = reloaded
        .snapshot_summaries()
        .iter()
        .map(|s| s.operation.clone())
        .collect();
    assert_eq!(ops, ["delete", "overwrite", "append", "append"]);

    let deleted = [3i64, 10, 11, 12, 50, 300, 450];
    let want = expected(&live_ids(&deleted, 1000..1020));
    assert_eq!(want.lines().count(), 513);
    let table = format!("{}.{name}", namespace[0]);
    for engine in ["duckdb", "spark"] {
        assert_reads(engine, &read_table(engine), &want, &table);
    }
}

#[tokio::test]
async fn iceberg_deletes_deletion_vectors_v3_on_fixture() {
    let destination = connect("FIXTURE").await;
    let namespace = vec![unique_name("it_dv")];
    let table = format!("{}.orders", namespace[0]);
    deletion_vectors_merge_and_replace(&destination, &namespace, &|engine| {
        read(engine, "FIXTURE", &table)
    })
    .await;
    drop_all("FIXTURE", &namespace).await;
}

/// A temporary warehouse folder, deleted when the test ends.
struct Folder(PathBuf);

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn iceberg_deletes_deletion_vectors_v3_on_embedded_catalog() {
    const CATALOG: &str = "topicberg_it";
    let folder = Folder(std::env::temp_dir().join(unique_name("tb_it_dv")));
    std::fs::create_dir_all(&folder.0).unwrap();
    let destination = Destination::open_embedded(&folder.0, CATALOG).expect("embedded catalog");
    let namespace = vec![unique_name("it_dv")];
    let table = format!("{}.orders", namespace[0]);
    let path = folder.0.to_str().unwrap().to_string();
    deletion_vectors_merge_and_replace(&destination, &namespace, &|engine| {
        let reader = format!("{}/read", get("TESTBED_READERS"));
        let args = [
            engine,
            "--catalog",
            "sql",
            "--sql-path",
            &path,
            "--sql-name",
            CATALOG,
            &table,
        ];
        let out = command(&reader)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("running {reader}: {e}"));
        assert!(
            out.status.success(),
            "{engine} could not read {table}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 rows")
    })
    .await;
}

/// A position delete file (v2) or deletion vector (v3) committed in the
/// same snapshot as the data file it names retires those rows: the spec
/// applies either to data files whose data sequence number is at most its
/// own, and both carry the snapshot's. An upsert that wrote every message
/// of a sync and retired the sync's own superseded rows this way would rely
/// on every reader doing so (bench/README.md, "Where an upsert's time
/// goes").
async fn same_commit_deletes_read_back(catalog: &str, version: FormatVersion, engines: &[&str]) {
    let (destination, namespace, mut handle) = orders_table(catalog, "it_del_same", version).await;
    let name = "orders";
    // Ids 0..500 at positions 0..500 of one new file.
    let data = new_data(&destination, &handle, 0, 500).await;
    assert_eq!(data.len(), 1);
    let path = data[0].file_path().to_string();
    let deleted = [0i64, 7, 42, 299, 499];
    let positions: Vec<u64> = deleted.iter().map(|&id| id as u64).collect();
    let delete_files = if version == FormatVersion::V3 {
        let vector: RoaringTreemap = positions.iter().copied().collect();
        destination
            .write_deletion_vectors(&handle, &[(path, vector)])
            .await
            .expect("write a deletion vector")
    } else {
        let file = destination
            .write_position_deletes(&handle, &[(path, positions)])
            .await
            .expect("write position deletes")
            .expect("a delete file");
        vec![file]
    };
    let committed = destination
        .commit_row_delta(
            &mut handle,
            RowDelta {
                data_files: data,
                delete_files,
                replaced_dvs: Vec::new(),
                summary_extra: offsets(500),
                offsets: None,
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{catalog}: {e}"));
    assert_eq!(committed.summary["added-records"], "500");
    assert_eq!(committed.summary["added-position-deletes"], "5");
    let want = expected(&live_ids(&deleted, 0..0));
    assert_eq!(want.lines().count(), 495);
    let table = format!("{}.{name}", namespace[0]);
    for engine in engines {
        assert_reads(engine, &read(engine, catalog, &table), &want, &table);
    }
    drop_all(catalog, &namespace).await;
}

#[tokio::test]
async fn iceberg_deletes_position_deletes_on_a_data_file_of_the_same_commit_are_applied() {
    same_commit_deletes_read_back("SEAWEED", FormatVersion::V2, &READERS).await;
}

#[tokio::test]
async fn iceberg_deletes_deletion_vectors_on_a_data_file_of_the_same_commit_are_applied() {
    same_commit_deletes_read_back("FIXTURE", FormatVersion::V3, &DV_READERS).await;
}

//! Commits whose answer is lost. The fault proxy in front of the reference
//! catalog forwards every request, except that it can answer a table
//! commit with 503 (after or instead of forwarding it) and then fail the
//! reloads too; the writer must neither lose nor duplicate an append. And
//! the files a failed or retried commit leaves are cleaned up.

use topicberg_iceberg::{Destination, FormatVersion, IcebergErrorKind};

use crate::fault_proxy::{is_table_commit, Fault, FaultProxy, Rule};
use crate::iceberg_append::{
    append, canonical, catalog_config, columns, offsets, read, rows, storage_config, Row,
};
use crate::testbed::unique_name;

fn commit_rule(fault: Fault) -> Rule {
    Rule::new(fault)
        .method("POST")
        .path(|p| is_table_commit("POST", p))
        .times(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_append_commit_with_lost_answer_lands_exactly_once() {
    let upstream = catalog_config("FIXTURE");
    let proxy = FaultProxy::start(&upstream.uri);
    let mut config = upstream.clone();
    config.uri = proxy.uri.clone();
    config.auth = topicberg_iceberg::rest::CatalogAuth::None;
    let destination = Destination::connect(&config, storage_config())
        .await
        .expect("connect through the proxy");
    let namespace = vec![unique_name("it_faults")];
    let name = "orders";
    let mut handle = destination
        .ensure_table(&namespace, name, &columns(), FormatVersion::V2)
        .await
        .expect("create table");

    // The commit lands but its answer is lost: found on reload, not resent.
    proxy.add(commit_rule(Fault::LoseAnswer));
    let a = rows(0, 100);
    let one = append(&destination, &mut handle, &a, offsets(100)).await;
    assert_eq!(one.attempts, 1, "found after the reload, not sent again");
    assert_eq!(one.summary["total-records"], "100");

    // The commit fails before reaching the catalog: not found, sent again.
    proxy.add(commit_rule(Fault::Status(503)));
    let b = rows(100, 60);
    let two = append(&destination, &mut handle, &b, offsets(160)).await;
    assert_eq!(two.attempts, 2, "not found after the reload, so retried");
    assert_eq!(two.parent_snapshot_id, Some(one.snapshot_id));
    assert_eq!(two.summary["total-records"], "160");

    // The commit lands and every answer after it is lost: unknown state.
    proxy.add(commit_rule(Fault::LoseAnswer));
    proxy.add(Rule::new(Fault::Status(503)));
    let c = rows(160, 40);
    let files = destination
        .write_data_files(&handle, [crate::iceberg_append::batch(&handle, &c)])
        .await
        .expect("write");
    let err = destination
        .commit_append(&mut handle, files, offsets(200))
        .await
        .expect_err("the outcome cannot be known");
    assert_eq!(err.kind, IcebergErrorKind::CommitStateUnknown, "{err}");
    assert!(!err.retryable(), "{err}");
    proxy.reset();

    // Reconciling from the snapshot summary: the third commit did land.
    let reloaded = destination
        .load_table(&namespace, name)
        .await
        .expect("reload");
    assert_eq!(
        reloaded.current_summary().unwrap()["topicberg.offsets"],
        r#"{"orders":{"0":200}}"#
    );
    assert_eq!(reloaded.snapshot_summaries().len(), 3);
    let table = format!("{}.{name}", namespace[0]);
    let all: Vec<Row> = a.into_iter().chain(b).chain(c).collect();
    assert_eq!(read("duckdb", "FIXTURE", &table), canonical(&all));

    destination
        .drop_table(&namespace, name, true)
        .await
        .expect("drop");
    destination
        .catalog()
        .drop_namespace(&namespace)
        .await
        .expect("drop ns");
}

/// The metadata a commit leaves behind: after a commit that landed on its
/// second attempt, only the first attempt's manifest list goes; after a
/// commit that failed for certain, its manifest and every manifest list
/// go, and `delete_uncommitted` removes its data files; the table reads
/// the same throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_failed_commit_files_are_cleaned_up() {
    let upstream = catalog_config("FIXTURE");
    let proxy = FaultProxy::start(&upstream.uri);
    let mut config = upstream.clone();
    config.uri = proxy.uri.clone();
    let destination = Destination::connect(&config, storage_config())
        .await
        .expect("connect through the proxy");
    let namespace = vec![unique_name("it_cleanup")];
    let name = "orders";
    let mut handle = destination
        .ensure_table(&namespace, name, &columns(), FormatVersion::V2)
        .await
        .expect("create table");
    let folder = format!("{}/metadata", handle.metadata().location());
    let storage = destination.storage();

    // Landed on the second attempt (a made-up 409 first).
    proxy.add(commit_rule(Fault::Status(409)));
    let a = rows(0, 50);
    let one = append(&destination, &mut handle, &a, offsets(50)).await;
    assert_eq!(one.attempts, 2);
    let commit_id = one.summary[topicberg_iceberg::COMMIT_ID_PROPERTY].clone();
    let ours = |all: &[String]| -> Vec<String> {
        all.iter()
            .filter(|l| l.contains(&commit_id))
            .cloned()
            .collect()
    };
    let before = ours(&storage.list(&folder).await.unwrap());
    assert_eq!(
        before.len(),
        3,
        "a manifest and two manifest lists: {before:#?}"
    );
    let left = destination
        .delete_commit_metadata(&handle, &commit_id)
        .await
        .expect("cleanup");
    assert!(left.is_empty(), "{left:?}");
    let after = ours(&storage.list(&folder).await.unwrap());
    let live = destination.load_table(&namespace, name).await.unwrap();
    let live_list = live
        .metadata()
        .current_snapshot()
        .unwrap()
        .manifest_list()
        .to_string();
    assert_eq!(after.len(), 2, "{after:#?}");
    assert!(
        after.contains(&live_list),
        "the live manifest list stays: {after:#?}"
    );
    assert!(
        after.iter().any(|l| l.ends_with("-m0.avro")),
        "the live manifest stays"
    );

    // Fails for certain: every commit answered 503 without forwarding.
    proxy.reset();
    proxy.add(commit_rule(Fault::Status(503)).until_reset());
    let listed_before = storage.list(&folder).await.unwrap();
    let b = rows(50, 20);
    let files = destination
        .write_data_files(&handle, [crate::iceberg_append::batch(&handle, &b)])
        .await
        .expect("write");
    let err = destination
        .commit_append(&mut handle, files.clone(), offsets(70))
        .await
        .expect_err("every commit refused");
    assert!(
        err.to_string().contains("gave up after 5 commit attempts"),
        "{err}"
    );
    proxy.reset();
    let new: Vec<String> = storage
        .list(&folder)
        .await
        .unwrap()
        .into_iter()
        .filter(|l| !listed_before.contains(l))
        .collect();
    assert_eq!(new.len(), 6, "a manifest and five manifest lists: {new:#?}");
    let manifest = new.iter().find(|l| l.ends_with("-m0.avro")).unwrap();
    let failed_id = manifest
        .rsplit('/')
        .next()
        .unwrap()
        .trim_end_matches("-m0.avro");
    let left = destination
        .delete_commit_metadata(&handle, failed_id)
        .await
        .expect("cleanup");
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(storage.list(&folder).await.unwrap(), listed_before);
    assert!(destination.delete_uncommitted(&files).await.is_empty());
    for f in &files {
        assert!(!destination.file_io().exists(f.file_path()).await.unwrap());
    }
    let table = format!("{}.{name}", namespace[0]);
    assert_eq!(read("duckdb", "FIXTURE", &table), canonical(&a));

    destination
        .drop_table(&namespace, name, true)
        .await
        .expect("drop");
    destination
        .catalog()
        .drop_namespace(&namespace)
        .await
        .expect("drop ns");
}

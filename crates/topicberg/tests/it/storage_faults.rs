//! Object-store faults, end to end through the `topicberg` binary: the
//! job's `s3_endpoint` is a fault proxy in front of SeaweedFS's S3.
//! Transient upload failures (503, dropped connections, on single `PUT`s
//! and on multipart steps) are retried and the sync lands every message
//! once; a permanent failure fails that table, commits nothing for it,
//! leaves its group offsets alone, and the next healthy sync lands it all.

use std::collections::BTreeSet;
use std::time::Instant;

use serde_json::Value;
use topicberg_iceberg::{Destination, FormatVersion};

use crate::fault_proxy::{is_data_file, Fault, FaultProxy, Rule, SyncRun};
use crate::iceberg_append::{
    append, batch, canonical, catalog_config, columns, offsets, read, rows, storage_config,
};
use crate::support::{create_topic, group_offsets, plaintext, produce, read_rows, Catalog, Job};
use crate::testbed::{get, unique_name};

/// `n` messages with ids from `first` (and `pad` random-ish characters).
fn messages(first: usize, n: usize, pad: usize) -> Vec<(String, String)> {
    (first..first + n)
        .map(|i| {
            let mut text = String::with_capacity(pad);
            let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for _ in 0..pad {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                text.push(char::from(
                    b"abcdefghijklmnopqrstuvwxyz0123456789"[(x % 36) as usize],
                ));
            }
            (format!("k{i}"), format!(r#"{{"id":{i},"pad":"{text}"}}"#))
        })
        .collect()
}

/// The ids a reader sees, asserting none appears twice.
fn ids_once(catalog: Catalog, table: &str) -> BTreeSet<i64> {
    let rows = read_rows("duckdb", catalog, table);
    let ids: BTreeSet<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), rows.len(), "{table}: a message landed twice");
    ids
}

/// 503s and dropped connections on data-file `PUT`s, manifest uploads and
/// multipart steps are retried: each sync succeeds and DuckDB reads
/// exactly the produced messages.
#[test]
fn sync_retries_transient_s3_upload_failures() {
    let topic = unique_name("s3_flaky");
    create_topic(&topic, 1);
    produce(&topic, &messages(0, 500, 8));
    let proxy = FaultProxy::start(&get("TESTBED_S3_ENDPOINT"));
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    proxy.point_s3(&job);

    // Single PUTs: the data file refused three times, the manifest's
    // connection dropped before it was forwarded, the manifest list's
    // after (the object exists, the answer is lost).
    proxy.add(
        Rule::new(Fault::Status(503))
            .method("PUT")
            .path(is_data_file)
            .times(3),
    );
    proxy.add(
        Rule::new(Fault::Close)
            .method("PUT")
            .path(|p| p.contains("/metadata/") && !p.contains("snap-"))
            .times(1),
    );
    proxy.add(
        Rule::new(Fault::ForwardThenClose)
            .method("PUT")
            .path_contains("/metadata/snap-")
            .times(1),
    );
    let started = Instant::now();
    job.sync();
    let first = started.elapsed();
    assert_eq!(proxy.faults_injected(), 5, "{:#?}", proxy.log());
    assert_eq!(
        ids_once(Catalog::Seaweed, &job.table(&topic)),
        (0..500).collect()
    );

    // Multipart: ~10 MB of poorly compressible text makes one data file of
    // more than one 8 MiB part. Creating the upload fails once (500), the
    // first part is refused (503), the next part's connection drops.
    produce(&topic, &messages(500, 8_000, 2_000));
    proxy.reset();
    proxy.add(
        Rule::new(Fault::Status(500))
            .method("POST")
            .path(|p| is_data_file(p) && p.contains("uploads"))
            .times(1),
    );
    proxy.add(
        Rule::new(Fault::Status(503))
            .method("PUT")
            .path_contains("partNumber=")
            .times(1),
    );
    proxy.add(
        Rule::new(Fault::Close)
            .method("PUT")
            .path_contains("partNumber=")
            .times(1),
    );
    let before = proxy.log().len();
    let started = Instant::now();
    job.sync();
    let second = started.elapsed();
    let log = proxy.log();
    let parts: BTreeSet<&str> = log[before..]
        .iter()
        .filter(|s| s.method == "PUT" && s.path.contains("partNumber=") && s.status == Some(200))
        .map(|s| s.path.as_str())
        .collect();
    assert!(
        parts.len() >= 2,
        "a multipart upload of 2+ parts: {parts:#?}"
    );
    assert_eq!(proxy.faults_injected(), 8, "{:#?}", &log[before..]);
    assert_eq!(
        ids_once(Catalog::Seaweed, &job.table(&topic)),
        (0..8_500).collect()
    );
    println!("transient S3 faults: single-PUT sync {first:?}, multipart sync {second:?}");
}

/// A data-file upload that keeps failing (503 past the retry budget, then
/// 403) fails that table with an error naming the file; nothing is
/// committed for it, its group offsets stay where they were, the other
/// table of the job commits; the next healthy sync lands it exactly once.
#[test]
fn sync_permanent_s3_upload_failure_commits_nothing_and_recovers() {
    let broken = unique_name("s3_broken");
    let healthy = unique_name("s3_healthy");
    for topic in [&broken, &healthy] {
        create_topic(topic, 2);
        produce(topic, &messages(0, 300, 8));
    }
    let proxy = FaultProxy::start(&get("TESTBED_S3_ENDPOINT"));
    let job = Job::new(Catalog::Seaweed, &[&broken, &healthy], "", "");
    proxy.point_s3(&job);
    let table_path = broken.to_lowercase();
    let broken_data = move |p: &str| is_data_file(p) && p.contains(&table_path);

    let budget = "max_retries=3,init_backoff_ms=50,max_backoff_ms=200";
    for (round, (fault, expect)) in [(503u16, "503"), (403, "403")].into_iter().enumerate() {
        proxy.reset();
        proxy.add(
            Rule::new(Fault::Status(fault))
                .method("PUT")
                .path(broken_data.clone()),
        );
        let refused_before = proxy.count(|s| s.fault.is_some());
        let started = Instant::now();
        let run = SyncRun::new(&job, &[("TOPICBERG_S3_RETRY", budget)]);
        let elapsed = started.elapsed();
        assert_eq!(run.output.status.code(), Some(1), "{}", run.text());
        let failed = run.table(&job.table(&broken));
        assert_eq!(failed["status"], "failed", "{failed}");
        let error = failed["error"].as_str().unwrap();
        assert!(
            error.contains(".parquet") && error.contains("s3://") && error.contains(expect),
            "the error must name the file and the status: {error}"
        );
        let attempts = proxy.count(|s| s.fault.is_some()) - refused_before;
        if fault == 503 {
            assert!(error.contains("after 3 retries"), "{error}");
        } else {
            assert!(!error.contains("retries"), "403 is not retried: {error}");
        }
        assert!(!run.text().contains(&get("TESTBED_S3_SECRET_KEY")));
        // The other table commits in the first run, has nothing new after.
        let other = ["committed", "unchanged"][round];
        assert_eq!(run.table(&job.table(&healthy))["status"], other);
        println!("HTTP {fault} on every data file: failed in {elapsed:?} after {attempts} refused PUTs: {error}");
        assert!(elapsed.as_secs() < 60, "took {elapsed:?}");

        // Nothing of the broken table is committed and its offsets stay.
        let snapshots = crate::fault_proxy::snapshot_count(Catalog::Seaweed, &job, &broken);
        assert_eq!(snapshots, 0, "no snapshot of the failed table");
        let group = group_offsets(&plaintext(), &job.group(), &broken, 2);
        assert_eq!(group, vec![None, None], "the group offsets did not move");
    }

    proxy.reset();
    produce(&broken, &messages(300, 50, 8));
    let report: Value = job.sync();
    let fixed = crate::support::table_report(&report, &job.table(&broken));
    assert_eq!(fixed["records"], 350, "{fixed}");
    assert_eq!(
        ids_once(Catalog::Seaweed, &job.table(&broken)),
        (0..350).collect()
    );
    assert_eq!(
        ids_once(Catalog::Seaweed, &job.table(&healthy)),
        (0..300).collect()
    );
    let group: Vec<i64> = group_offsets(&plaintext(), &job.group(), &broken, 2)
        .into_iter()
        .map(|o| o.expect("committed"))
        .collect();
    assert_eq!(group.iter().sum::<i64>(), 350);
}

/// `delete_uncommitted` removes the files of a commit that did not land
/// (and nothing the table references), and lists those it could not
/// delete with the storage's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_uncommitted_removes_unreferenced_files_and_lists_failures() {
    let proxy = FaultProxy::start(&get("TESTBED_S3_ENDPOINT"));
    let mut storage = storage_config();
    if let Some(s3) = &mut storage.s3 {
        s3.endpoint = Some(proxy.uri.clone());
    }
    let destination = Destination::connect(&catalog_config("SEAWEED"), storage)
        .await
        .expect("connect");
    let namespace = vec![unique_name("it_cleanup")];
    let mut handle = destination
        .ensure_table(&namespace, "t", &columns(), FormatVersion::V2)
        .await
        .expect("create table");
    let kept = rows(0, 30);
    append(&destination, &mut handle, &kept, offsets(30)).await;

    // Files of a commit that never happened: two data files.
    let orphans = rows(30, 20);
    let mut files = Vec::new();
    for chunk in orphans.chunks(10) {
        files.extend(
            destination
                .write_data_files(&handle, [batch(&handle, chunk)])
                .await
                .expect("write"),
        );
    }
    assert_eq!(files.len(), 2);
    let io = destination.file_io();
    for f in &files {
        assert!(io.exists(f.file_path()).await.unwrap());
    }

    // The store refuses to delete the first one: it is listed with why.
    let refused = files[0].file_path().to_string();
    let key = refused
        .split("://")
        .nth(1)
        .unwrap()
        .split_once('/')
        .unwrap()
        .1
        .to_string();
    proxy.add(
        Rule::new(Fault::Status(403))
            .method("DELETE")
            .path_contains(&key),
    );
    let left = destination.delete_uncommitted(&files).await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].0, refused);
    assert!(
        left[0].1.contains("403") || left[0].1.contains("privileges"),
        "{left:?}"
    );
    assert!(io.exists(&refused).await.unwrap());
    assert!(!io.exists(files[1].file_path()).await.unwrap());

    // Healthy store: the rest goes; deleting again is fine (already gone).
    proxy.reset();
    assert!(destination.delete_uncommitted(&files).await.is_empty());
    assert!(destination.delete_uncommitted(&files).await.is_empty());
    for f in &files {
        assert!(!io.exists(f.file_path()).await.unwrap());
    }
    // The committed rows are untouched.
    let table = format!("{}.t", namespace[0]);
    assert_eq!(read("duckdb", "SEAWEED", &table), canonical(&kept));
    destination
        .drop_table(&namespace, "t", true)
        .await
        .expect("drop");
    destination
        .catalog()
        .drop_namespace(&namespace)
        .await
        .expect("drop ns");
}

/// Every third S3 `PUT` refused with 500, and any S3 request failing at
/// random (seeded, p = 0.3) with a 5xx, a lost answer or a dropped
/// connection: three syncs in a row still land every message once.
#[test]
fn sync_survives_random_s3_faults() {
    let topic = unique_name("s3_random");
    create_topic(&topic, 3);
    let proxy = FaultProxy::start(&get("TESTBED_S3_ENDPOINT"));
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    proxy.point_s3(&job);
    proxy.add(Rule::new(Fault::Status(500)).method("PUT").every(3));
    let seed = 0x5EED_0005;
    proxy.random(
        seed,
        0.3,
        vec![
            Fault::Status(503),
            Fault::Status(500),
            Fault::LoseAnswer,
            Fault::Close,
            Fault::ForwardThenClose,
        ],
        None,
        |_| true,
    );
    for round in 0..3 {
        produce(&topic, &messages(round * 200, 200, 8));
        job.sync();
    }
    let injected = proxy.faults_injected();
    let puts = proxy.count(|s| s.method == "PUT");
    println!(
        "random S3 faults (seed {seed:#x}): {injected} injected over {} requests",
        proxy.log().len()
    );
    assert!(injected >= puts / 3, "{injected} faults, {puts} PUTs");
    assert_eq!(
        ids_once(Catalog::Seaweed, &job.table(&topic)),
        (0..600).collect()
    );
}

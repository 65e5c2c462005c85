//! Catalog faults, end to end through the `topicberg` binary: the job's
//! catalog `uri` (and so its token endpoint) is a fault proxy in front of
//! a test-bed catalog; storage goes straight to SeaweedFS.
//!
//! - a commit that lands but whose answer is lost is found on reload, not
//!   sent again;
//! - a 409 (another writer committed first) rebases and retries, and both
//!   writers' rows stay;
//! - a 401 after the token was issued refreshes the token and goes on;
//! - an unreachable or failing catalog fails the sync with a clear error
//!   after bounded retries, with no secret in the output.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{new_null_array, ArrayRef, Int64Array, RecordBatch};
use topicberg_iceberg::Destination;

use crate::fault_proxy::{is_table_commit, snapshot_count, Fault, FaultProxy, Rule, SyncRun};
use crate::iceberg_append::{catalog_config, storage_config};
use crate::support::{
    create_topic, group_offsets, plaintext, produce, read_rows, table_report, Catalog, Job,
};
use crate::testbed::{get, unique_name};

fn messages(first: usize, n: usize) -> Vec<(String, String)> {
    (first..first + n)
        .map(|i| (format!("k{i}"), format!(r#"{{"id":{i},"amount":{i}.25}}"#)))
        .collect()
}

/// A topic with `n` messages (2 partitions) and a job reading it through
/// a proxy in front of `catalog`.
fn setup(catalog: Catalog, n: usize) -> (String, Job, FaultProxy) {
    let topic = unique_name("cat_faults");
    create_topic(&topic, 2);
    produce(&topic, &messages(0, n));
    let upstream = get(&format!("TESTBED_{}_URI", catalog.prefix()));
    let proxy = FaultProxy::start(&upstream);
    let job = Job::new(catalog, &[&topic], "", "");
    proxy.point_catalog(&job, catalog);
    (topic, job, proxy)
}

fn commit_rule(fault: Fault) -> Rule {
    Rule::new(fault)
        .path(|p| is_table_commit("POST", p))
        .method("POST")
}

fn commits(proxy: &FaultProxy) -> usize {
    proxy.count(|s| is_table_commit(&s.method, &s.path))
}

fn token_requests(proxy: &FaultProxy) -> usize {
    proxy.count(|s| s.path.contains("/oauth/tokens"))
}

/// The ids a reader sees, asserting none appears twice.
fn ids_once(catalog: Catalog, table: &str) -> BTreeSet<i64> {
    let rows = read_rows("duckdb", catalog, table);
    let ids: BTreeSet<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), rows.len(), "{table}: a row landed twice");
    ids
}

fn lost_commit_answer_is_found_on_reload(catalog: Catalog) {
    let (topic, job, proxy) = setup(catalog, 120);
    proxy.add(commit_rule(Fault::LoseAnswer).times(1));
    let report = job.sync();
    assert_eq!(
        table_report(&report, &job.table(&topic))["status"],
        "committed"
    );
    assert_eq!(proxy.faults_injected(), 1, "{:#?}", proxy.log());
    assert_eq!(commits(&proxy), 1, "found on reload, not sent again");
    assert_eq!(snapshot_count(catalog, &job, &topic), 1);
    assert_eq!(ids_once(catalog, &job.table(&topic)), (0..120).collect());
    // The offsets in the found snapshot hold: nothing is read again.
    let report = job.sync();
    assert_eq!(
        table_report(&report, &job.table(&topic))["status"],
        "unchanged"
    );
    assert_eq!(snapshot_count(catalog, &job, &topic), 1);
}

/// (a) A 5xx on a commit that did land: reconciled, one snapshot.
#[test]
fn catalog_lost_commit_answer_lands_once_on_reference_catalog() {
    lost_commit_answer_is_found_on_reload(Catalog::Fixture);
}

/// (a) The same against SeaweedFS's catalog.
#[test]
fn catalog_lost_commit_answer_lands_once_on_seaweed_catalog() {
    lost_commit_answer_is_found_on_reload(Catalog::Seaweed);
}

/// Appends rows with ids `ids` (every other column null) to a job's table
/// as another writer would: its own client, straight to the catalog.
fn other_writer_appends(catalog: &'static str, namespace: String, table: String, ids: Vec<i64>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let destination = Destination::connect(&catalog_config(catalog), storage_config())
            .await
            .expect("other writer connects");
        let namespace = vec![namespace];
        let mut handle = destination
            .load_table(&namespace, &table)
            .await
            .expect("load");
        let schema = handle.arrow_schema().clone();
        let columns: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .map(|f| match f.name().as_str() {
                "id" => Arc::new(Int64Array::from(ids.clone())) as ArrayRef,
                _ => new_null_array(f.data_type(), ids.len()),
            })
            .collect();
        let batch = RecordBatch::try_new(schema, columns).expect("batch");
        let files = destination
            .write_data_files(&handle, [batch])
            .await
            .expect("other writer's files");
        destination
            .commit_append(&mut handle, files, Default::default())
            .await
            .expect("other writer commits");
    });
}

/// (b) Another writer commits between our load and our commit (a real
/// 409 from the catalog), then the catalog answers 409 without looking:
/// both times the commit is rebuilt on the new parent and lands once, and
/// the other writer's rows stay.
#[test]
fn catalog_conflict_rebases_and_keeps_both_writers_rows() {
    let (topic, job, proxy) = setup(Catalog::Fixture, 80);
    let namespace = format!("{}_topics", job.name);
    let table = topic.to_lowercase();
    let (ns, t) = (namespace.clone(), table.clone());
    let hook = move || {
        let (ns, t) = (ns.clone(), t.clone());
        // On a thread of its own: a runtime cannot start inside another.
        std::thread::spawn(move || other_writer_appends("FIXTURE", ns, t, (1000..1010).collect()))
            .join()
            .expect("other writer");
    };
    proxy.add(commit_rule(Fault::RunFirst(Arc::new(hook))).times(1));
    let report = job.sync();
    assert_eq!(
        table_report(&report, &job.table(&topic))["status"],
        "committed"
    );
    let statuses: Vec<Option<u16>> = proxy
        .log()
        .iter()
        .filter(|s| is_table_commit(&s.method, &s.path))
        .map(|s| s.status)
        .collect();
    assert_eq!(
        statuses,
        [Some(409), Some(200)],
        "a real conflict, then the rebased commit"
    );
    assert_eq!(snapshot_count(Catalog::Fixture, &job, &topic), 2);
    let expected: BTreeSet<i64> = (0..80).chain(1000..1010).collect();
    assert_eq!(ids_once(Catalog::Fixture, &job.table(&topic)), expected);

    // A 409 the proxy makes up: reload, nothing changed, rebuilt, lands.
    produce(&topic, &messages(80, 40));
    proxy.reset();
    proxy.add(commit_rule(Fault::Status(409)).times(1));
    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&topic))["records"], 40);
    assert_eq!(proxy.faults_injected(), 2);
    assert_eq!(snapshot_count(Catalog::Fixture, &job, &topic), 3);
    let expected: BTreeSet<i64> = (0..120).chain(1000..1010).collect();
    assert_eq!(ids_once(Catalog::Fixture, &job.table(&topic)), expected);
    let report = job.sync();
    assert_eq!(
        table_report(&report, &job.table(&topic))["status"],
        "unchanged"
    );
}

/// (c) The catalog refuses the token with 401 after it was issued (it
/// expired mid-sync): the client exchanges a new one and resends.
#[test]
fn catalog_token_refused_mid_sync_is_refreshed() {
    let (topic, job, proxy) = setup(Catalog::Fixture, 60);
    proxy.add(commit_rule(Fault::Status(401)).times(1));
    proxy.add(
        Rule::new(Fault::Status(401))
            .method("GET")
            .path(|p| p.contains("/tables/"))
            .times(1),
    );
    let report = job.sync();
    assert_eq!(
        table_report(&report, &job.table(&topic))["status"],
        "committed"
    );
    assert_eq!(proxy.faults_injected(), 2, "{:#?}", proxy.log());
    assert_eq!(token_requests(&proxy), 3, "one token, then one per 401");
    assert_eq!(commits(&proxy), 2, "refused once, sent again");
    assert_eq!(snapshot_count(Catalog::Fixture, &job, &topic), 1);
    assert_eq!(
        ids_once(Catalog::Fixture, &job.table(&topic)),
        (0..60).collect()
    );
}

/// Runs a sync that must fail; checks the output holds no secret and
/// returns it with the time it took.
fn failing_sync(job: &Job) -> (SyncRun, std::time::Duration) {
    let started = Instant::now();
    let run = SyncRun::new(job, &[]);
    let elapsed = started.elapsed();
    assert_ne!(run.output.status.code(), Some(0), "{}", run.text());
    let text = run.text();
    let catalog_secret = get("TESTBED_FIXTURE_CREDENTIAL");
    let catalog_secret = catalog_secret.split_once(':').unwrap().1;
    for secret in [get("TESTBED_S3_SECRET_KEY").as_str(), catalog_secret] {
        assert!(!text.contains(secret), "a secret in the output: {text}");
    }
    assert!(!text.contains("panicked"), "{text}");
    (run, elapsed)
}

/// (d) An unreachable catalog (connections refused), then one answering
/// 503 to everything: the sync fails within a bound, saying which catalog
/// and how many attempts, with no secret in the output; and a catalog
/// failing every commit mid-sync fails the table after bounded attempts,
/// commits nothing and leaves the group offsets; the next healthy sync
/// lands everything once.
#[test]
fn catalog_unreachable_or_failing_fails_clearly_within_a_bound() {
    let (topic, job, proxy) = setup(Catalog::Fixture, 50);

    proxy.refuse();
    let (run, elapsed) = failing_sync(&job);
    let stderr = String::from_utf8_lossy(&run.output.stderr).to_string();
    assert_eq!(run.output.status.code(), Some(2), "{}", run.text());
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {stderr}"));
    assert!(
        line.contains(&format!("{}/v1/oauth/tokens", proxy.uri)),
        "{line}"
    );
    assert!(line.contains("unreachable"), "{line}");
    assert!(line.contains("gave up after 4 attempts"), "{line}");
    println!("refused connections: failed in {elapsed:?}: {line}");
    assert!(elapsed.as_secs() < 120, "took {elapsed:?}");
    proxy.accept_again();

    proxy.add(Rule::new(Fault::Status(503)));
    let (run, elapsed) = failing_sync(&job);
    let stderr = String::from_utf8_lossy(&run.output.stderr).to_string();
    let line = stderr.lines().find(|l| l.starts_with("error: ")).unwrap();
    assert!(line.contains(&proxy.uri), "{line}");
    assert!(
        line.contains("503") && line.contains("gave up after 4 attempts"),
        "{line}"
    );
    assert_eq!(
        proxy.count(|s| s.status == Some(503)),
        4,
        "{:#?}",
        proxy.log()
    );
    println!("503 to everything: failed in {elapsed:?}: {line}");
    assert!(elapsed.as_secs() < 120, "took {elapsed:?}");

    // Healthy up to the commit, which keeps failing.
    proxy.reset();
    proxy.add(commit_rule(Fault::Status(503)));
    let commits_before = commits(&proxy);
    let (run, elapsed) = failing_sync(&job);
    // Each commit sent once per attempt: a 503 on a POST is never resent
    // blindly (the commit loop reloads and looks for it first).
    assert_eq!(commits(&proxy) - commits_before, 5, "{:#?}", proxy.log());
    let failed = run.table(&job.table(&topic));
    assert_eq!(failed["status"], "failed", "{failed}");
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.contains("503") && error.contains("commit attempts"),
        "{error}"
    );
    println!("503 on every commit: failed in {elapsed:?}: {error}");
    assert!(elapsed.as_secs() < 120, "took {elapsed:?}");
    assert_eq!(snapshot_count(Catalog::Fixture, &job, &topic), 0);
    assert_eq!(
        group_offsets(&plaintext(), &job.group(), &topic, 2),
        vec![None, None]
    );

    proxy.reset();
    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&topic))["records"], 50);
    assert_eq!(
        ids_once(Catalog::Fixture, &job.table(&topic)),
        (0..50).collect()
    );
}

/// Another writer's snapshot on top of ours (a compaction, a Spark job)
/// carries no `topicberg.offsets`: the next sync still finds ours further
/// back and reads only the new messages, never everything again.
#[test]
fn catalog_offsets_survive_another_writers_snapshot_on_top() {
    let (topic, job, _proxy) = setup(Catalog::Seaweed, 60);
    job.sync();
    let namespace = format!("{}_topics", job.name);
    other_writer_appends("SEAWEED", namespace, topic.to_lowercase(), vec![1000, 1001]);
    produce(&topic, &messages(60, 10));
    let report = job.sync();
    assert_eq!(
        table_report(&report, &job.table(&topic))["records"],
        10,
        "only the new messages are read"
    );
    let ids = ids_once(Catalog::Seaweed, &job.table(&topic));
    let want: BTreeSet<i64> = (0..70).chain([1000, 1001]).collect();
    assert_eq!(ids, want);
}

//! `topicberg serve`'s continuous jobs end to end: a job in mode
//! `continuous` follows its topic from its creation, its figures are live
//! in the API, `/readyz` says ready, Stop commits and leaves it stopped
//! (also across a restart of the service), Start follows again, and a
//! service stopped with SIGTERM stops its followers cleanly and starts
//! them again with itself. Every message lands exactly once (DuckDB).

use std::time::Duration;

use serde_json::{json, Value};

use crate::fault_injection::check_append;
use crate::serve_support::{plain_source, Client, Server, ADMIN_PASSWORD};
use crate::support::{create_topic, produce};
use crate::testbed::{get, unique_name};

const FOLLOW_WITHIN: Duration = Duration::from_secs(120);

/// `{"id": i}` messages keyed by id.
fn ids(range: std::ops::Range<u64>) -> Vec<(String, String)> {
    range
        .map(|i| (i.to_string(), json!({"id": i}).to_string()))
        .collect()
}

/// Now, in ms since the epoch (message timestamps are on this clock).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// Waits until the job's follower has written `records` records since it
/// started; the job as the API shows it.
fn wait_records(client: &Client, job: &str, records: u64) -> Value {
    client.poll(job, FOLLOW_WITHIN, |v| {
        v["follower"]["report"]["records"].as_u64() >= Some(records)
    })
}

fn follow_runs(client: &Client, job_id: &Value) -> Vec<Value> {
    let runs = client
        .get(&format!("/api/jobs/{job_id}/runs"))
        .expect(200)
        .json();
    runs.as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "follow")
        .cloned()
        .collect()
}

#[test]
fn serve_continuous_job_follows_stops_and_restarts_with_the_service() {
    let topic = unique_name("it_serve_follow");
    create_topic(&topic, 2);
    produce(&topic, &ids(0..50));
    let dir = crate::serve_support::temp_data_dir();
    let mut server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let source = plain_source(&client, &topic);
    let destination = client
        .json(
            "POST",
            "/api/destinations",
            Some(&json!({
                "name": "seaweed",
                "catalog": "rest",
                "uri": get("TESTBED_SEAWEED_URI"),
                "warehouse": get("TESTBED_SEAWEED_WAREHOUSE"),
                "credential": get("TESTBED_SEAWEED_CREDENTIAL"),
                "s3_endpoint": get("TESTBED_S3_ENDPOINT"),
                "s3_region": "us-east-1",
                "s3_access_key": get("TESTBED_S3_ACCESS_KEY"),
                "s3_secret_key": get("TESTBED_S3_SECRET_KEY"),
            })),
        )
        .expect(201)
        .json();
    let name = unique_name("it_serve_follow_job");
    let table = format!("{name}_topics.{topic}");
    // A continuous job refuses a sync schedule, naming the field.
    let refused = client
        .json(
            "POST",
            "/api/jobs",
            Some(&json!({
                "name": name, "source_id": source["id"], "destination_id": destination["id"],
                "mode": "continuous", "schedule": "every 5 minutes",
            })),
        )
        .expect(400)
        .json();
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("schedule: a continuous job"),
        "{refused}"
    );
    let job = client
        .json(
            "POST",
            "/api/jobs",
            Some(&json!({
                "name": name, "source_id": source["id"], "destination_id": destination["id"],
                "mode": "continuous", "sync": {"commit_interval": "1s"},
            })),
        )
        .expect(201)
        .json();
    let (id, path) = (job["id"].clone(), format!("/api/jobs/{}", job["id"]));
    assert_eq!(job["mode"], "continuous", "{job}");
    assert_eq!(job["next_run"], Value::Null, "{job}");

    // Created, it follows: the messages already there, then new ones.
    let live = wait_records(&client, &path, 50);
    check_append("duckdb", &table, &(0..50).collect::<Vec<_>>(), 0);
    let report = &live["follower"]["report"];
    assert_eq!(report["group_protocol"], "consumer", "{live}");
    assert!(report["snapshots"].as_u64().unwrap() >= 1, "{live}");
    assert!(report["last_commit_ms"].as_u64().is_some(), "{live}");
    let before_ms = now_ms();
    produce(&topic, &ids(50..80));
    let live = wait_records(&client, &path, 80);
    check_append("duckdb", &table, &(0..80).collect::<Vec<_>>(), 1);
    let ready = client.get("/readyz").expect(200).json();
    assert_eq!(ready["status"], "ready", "{ready}");
    let metrics = client.get("/metrics").expect(200).body;
    let line = format!("topicberg_records_total{{job=\"{name}\",table=\"{table}\"}} 80");
    assert!(
        metrics.contains(&line),
        "each round is in the metrics: {metrics}"
    );
    // Per table: the newest committed message is one produced just now
    // (the visibility lag is measured from it), its rows, files, commits.
    let figures = &live["follower"]["report"]["tables"][0];
    assert_eq!(figures["table"], table.as_str(), "{live}");
    assert_eq!(figures["records"], 80, "{live}");
    let newest = figures["newest_committed_ms"]
        .as_i64()
        .expect("a newest timestamp");
    assert!(
        newest >= before_ms && newest <= now_ms(),
        "{newest} vs {before_ms}: {live}"
    );
    assert!(figures["data_files"].as_u64() >= Some(2), "{live}");
    assert!(
        figures["last_commit_duration_ms"].as_u64().is_some(),
        "{live}"
    );
    let labels = format!("job=\"{name}\",table=\"{table}\"");
    for family in [
        "topicberg_visibility_lag_seconds",
        "topicberg_seconds_since_last_commit",
    ] {
        let value = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{family}{{{labels}}} ")))
            .unwrap_or_else(|| panic!("no {family} for the table: {metrics}"));
        let seconds: f64 = value.parse().unwrap();
        assert!(
            (0.0..120.0).contains(&seconds),
            "{family} {seconds}: {metrics}"
        );
    }
    let commits = format!("topicberg_commits_total{{{labels},outcome=\"committed\"}} ");
    assert!(metrics.contains(&commits), "{metrics}");

    // Stop: it commits, leaves, and its run is recorded.
    client
        .json("POST", &format!("{path}/stop"), None)
        .expect(200);
    let stopped = client.poll(&path, FOLLOW_WITHIN, |v| v["follower"].is_null());
    assert_eq!(stopped["paused"], true, "stopped stays stopped: {stopped}");
    let runs = follow_runs(&client, &id);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["status"], "succeeded", "{runs:?}\n{}", server.log());
    assert_eq!(runs[0]["records"], 80, "{runs:?}");
    assert_eq!(runs[0]["trigger"], "manual", "{runs:?}");

    // Stopped, it stays stopped across a restart of the service.
    server.stop();
    produce(&topic, &ids(80..100));
    server = Server::start(&dir, Some(ADMIN_PASSWORD));
    client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let after = client.get(&path).expect(200).json();
    assert_eq!(after["follower"], Value::Null, "{after}");
    check_append("duckdb", &table, &(0..80).collect::<Vec<_>>(), 2);
    // Start: it follows again from the table's offsets.
    client
        .json("POST", &format!("{path}/start"), None)
        .expect(200);
    wait_records(&client, &path, 20);
    check_append("duckdb", &table, &(0..100).collect::<Vec<_>>(), 3);

    // A service stopped with SIGTERM stops its follower cleanly (the run
    // succeeded) and starts it again with itself.
    server.stop();
    produce(&topic, &ids(100..110));
    server = Server::start(&dir, Some(ADMIN_PASSWORD));
    client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    wait_records(&client, &path, 10);
    check_append("duckdb", &table, &(0..110).collect::<Vec<_>>(), 4);
    let runs = follow_runs(&client, &id);
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert_eq!(runs[0]["trigger"], "service", "{runs:?}");
    assert_eq!(
        runs[1]["status"], "succeeded",
        "stopped by SIGTERM: {runs:?}"
    );
    assert_eq!(runs[1]["records"], 20, "{runs:?}");
    client
        .json("POST", &format!("{path}/stop"), None)
        .expect(200);
    client.poll(&path, FOLLOW_WITHIN, |v| v["follower"].is_null());
    server.stop();
}

/// In headless Chromium: a stopped continuous job is started from its
/// page, its live figures grow as messages arrive (without reloading),
/// the jobs list says it is following, and Stop stops it.
#[test]
fn serve_browser_starts_a_continuous_job_sees_its_live_commits_and_stops_it() {
    let topic = unique_name("it_ui_follow");
    create_topic(&topic, 2);
    produce(&topic, &ids(0..30));
    let dir = crate::serve_support::temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut api = server.client();
    api.login(ADMIN_PASSWORD).expect(200);
    let source = plain_source(&api, &topic);
    let destination = crate::serve_support::embedded_destination(&api);
    // Created stopped (paused): the browser starts it.
    let name = unique_name("it_ui_follow_job");
    let table = format!("{name}_topics.{topic}");
    let job = api
        .json(
            "POST",
            "/api/jobs",
            Some(&json!({
                "name": name, "source_id": source["id"],
                "destination_id": destination["id"], "mode": "continuous", "paused": true,
                "sync": {"commit_interval": "1s"},
            })),
        )
        .expect(201)
        .json();
    let id = job["id"].as_i64().unwrap();
    crate::serve_browser::drive(browse_follow(&dir, &server.base, id, (&topic, &table)));
    let after = api.get(&format!("/api/jobs/{id}")).expect(200).json();
    assert_eq!(after["follower"], Value::Null, "stopped: {after}");
    assert_eq!(after["paused"], true, "{after}");
}

async fn browse_follow(dir: &std::path::Path, base: &str, id: i64, (topic, table): (&str, &str)) {
    let (_driver, page) = crate::serve_browser::logged_in_page(dir, base).await;
    let limit = Duration::from_secs(60);
    // The list says which jobs are continuous, and that this one is stopped.
    let row = page
        .text_until(&format!("#job-{id}"), limit, |t| t.contains("continuous"))
        .await;
    assert!(row.contains("stopped"), "{row}");
    // Its form has the mode, set to continuous, and no schedule shown.
    page.go(&format!("#/jobs/{id}/edit")).await;
    let mode = page
        .value_until("#job-job_mode", limit, |v| !v.is_empty())
        .await;
    assert_eq!(mode, "continuous");
    // Start, from the job's page: its figures appear and grow live.
    page.go(&format!("#/jobs/{id}")).await;
    page.click(&format!("#start-{id}")).await;
    page.text_until("#follower-records", limit, |t| t == "30")
        .await;
    let snapshots = page
        .text_until("#follower-snapshots", limit, |t| t != "0")
        .await;
    assert!(snapshots.parse::<u64>().unwrap() >= 1, "{snapshots}");
    // The commit rate beside it, a number a minute.
    let rate = page
        .text_until("#follower-per-minute", limit, |t| t.contains("a minute"))
        .await;
    let per_minute: f64 = rate
        .trim()
        .trim_start_matches('(')
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{rate}: {e}"));
    assert!(per_minute > 0.0, "{rate}");
    produce(topic, &ids(30..45));
    page.text_until("#follower-records", limit, |t| t == "45")
        .await;
    // Each table's live figures: rows, and how far behind Kafka it is.
    let row = page
        .text_until(&format!("[id='follower-table-{table}']"), limit, |t| {
            t.contains("45")
        })
        .await;
    let lag = page
        .text_until(
            &format!("[id='follower-table-{table}'] .visibility-lag"),
            limit,
            |t| t != "-",
        )
        .await;
    assert!(
        lag.ends_with(" s") || lag.ends_with(" ms"),
        "{lag} in {row}"
    );
    let card = page
        .text_until("#follower", limit, |t| t.contains("following"))
        .await;
    assert!(card.contains("consumer protocol"), "{card}");
    // The local spill: empty while the catalog and the store answer.
    let spill = page
        .text_until("#follower-buffered", limit, |t| !t.is_empty())
        .await;
    assert!(spill.starts_with("0 B of the 1000 MB allowed"), "{spill}");
    page.go("#/jobs").await;
    page.text_until(&format!("#job-{id}"), limit, |t| t.contains("following"))
        .await;
    // Stop: it commits, leaves the group, and says it is stopped.
    page.go(&format!("#/jobs/{id}")).await;
    page.click(&format!("#stop-{id}")).await;
    page.text_until("#follower", limit, |t| t.contains("stopped"))
        .await;
    page.wait(&format!("#start-{id}")).await;
}

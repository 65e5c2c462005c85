//! `topicberg serve`'s scheduler end to end: a job on a seconds-level cron
//! schedule runs by itself, and after a restart the slot missed while the
//! service was down runs once at start.

use std::time::Duration;

use serde_json::{json, Value};

use crate::serve_support::{
    assert_test_green, messages, plain_source, temp_data_dir, Server, ADMIN_PASSWORD,
};
use crate::support::{create_topic, produce};
use crate::testbed::unique_name;

/// A job on a seconds-level cron schedule into the embedded catalog (under
/// the data folder): the scheduler starts runs by itself, and after a
/// restart the slot missed while the service was down runs once at start.
#[test]
fn serve_schedule_runs_and_survives_restart() {
    let topic = unique_name("it_serve_sched");
    create_topic(&topic, 1);
    produce(&topic, &messages("s", &[1, 2, 3, 4]));

    let dir = temp_data_dir();
    let mut server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let source = plain_source(&client, &topic);
    let destination = client
        .json(
            "POST",
            "/api/destinations",
            Some(&json!({"name": "local", "catalog": "sql"})),
        )
        .expect(201)
        .json();
    assert_test_green(
        &client,
        &format!("/api/destinations/{}/test", destination["id"]),
        &[
            "catalog",
            "create table",
            "storage credentials",
            "write file",
            "drop table",
        ],
    );
    let job = client
        .json(
            "POST",
            "/api/jobs",
            Some(&json!({
                "name": unique_name("it_serve_sched_job"),
                "source_id": source["id"],
                "destination_id": destination["id"],
                "schedule": "*/3 * * * * *",
            })),
        )
        .expect(201)
        .json();
    let runs_path = format!("/api/jobs/{}/runs", job["id"]);
    let runs = client.poll(&runs_path, Duration::from_secs(120), |v| {
        v.as_array()
            .unwrap()
            .iter()
            .any(|r| r["trigger"] == "schedule" && r["status"] == "succeeded")
    });
    let first = runs.as_array().unwrap().last().unwrap().clone();
    assert_eq!(first["trigger"], "schedule", "{runs}");
    assert_eq!(first["status"], "succeeded", "{runs}\n{}", server.log());
    assert_eq!(first["records"], 4, "{runs}");
    // The embedded catalog lives in the data folder.
    assert!(dir.join("warehouse").is_dir());

    // Stop, and stay down until the slot after the last run (which started
    // before the service stopped; slots are 3 s apart) has passed.
    server.stop();
    let stopped_ms = chrono::Utc::now().timestamp_millis();
    while chrono::Utc::now().timestamp_millis() < stopped_ms + 3500 {
        std::thread::sleep(Duration::from_millis(100));
    }
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let runs = client.poll(&runs_path, Duration::from_secs(120), |v| {
        v.as_array()
            .unwrap()
            .iter()
            .any(|r| r["trigger"] == "missed" && r["status"] != "running")
    });
    let missed: Vec<&Value> = runs
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["trigger"] == "missed")
        .collect();
    assert_eq!(missed.len(), 1, "{runs}");
    assert_eq!(missed[0]["status"], "succeeded", "{runs}");
    assert_eq!(missed[0]["records"], 0, "{runs}");
    let job_after = client
        .get(&format!("/api/jobs/{}", job["id"]))
        .expect(200)
        .json();
    assert_eq!(job_after["schedule"], "*/3 * * * * *");
    client
        .json("POST", &format!("/api/jobs/{}/pause", job["id"]), None)
        .expect(200);
}

//! The members of a job's consumer group on the job page: a continuous
//! job of the service and a worker on "another machine" (`topicberg sync
//! --follow` on the job's export, with its own state directory) share the
//! topic's partitions, and the service names each member with its
//! partitions, as the group's coordinator says (KIP-848's protocol on the
//! test bed's Kafka).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::serve_support::{
    embedded_destination, plain_source, temp_data_dir, Server, ADMIN_PASSWORD,
};
use crate::support::{create_topic, produce, Running};
use crate::testbed::{command, unique_name};

/// `(topic, partition)` pairs of a member in the answer.
fn partitions(member: &Value) -> Vec<(String, i64)> {
    member["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_owned(), p[1].as_i64().unwrap()))
        .collect()
}

#[test]
fn serve_job_page_names_each_group_member_with_its_partitions() {
    let topic = unique_name("ui_workers");
    create_topic(&topic, 2);
    let messages: Vec<(String, String)> = (0..20)
        .map(|i| (i.to_string(), json!({"id": i}).to_string()))
        .collect();
    produce(&topic, &messages);
    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut api = server.client();
    api.login(ADMIN_PASSWORD).expect(200);
    let source = plain_source(&api, &topic);
    let destination = embedded_destination(&api);
    let job = api
        .json(
            "POST",
            "/api/jobs",
            Some(&json!({
                "name": unique_name("ui_workers_job"), "source_id": source["id"],
                "destination_id": destination["id"], "mode": "continuous",
                "sync": {"commit_interval": "1s"},
            })),
        )
        .expect(201)
        .json();
    let id = job["id"].as_i64().unwrap();
    let limit = Duration::from_secs(120);
    api.poll(&format!("/api/jobs/{id}"), limit, |j| {
        j["follower"]["report"]["records"].as_u64() >= Some(20)
    });
    // The service's follower alone: both partitions.
    let members = api
        .get(&format!("/api/jobs/{id}/members"))
        .expect(200)
        .json();
    assert_eq!(members["protocol"], "Consumer", "{members:#}");
    assert_eq!(
        members["members"].as_array().map(Vec::len),
        Some(1),
        "{members:#}"
    );
    assert_eq!(
        partitions(&members["members"][0]),
        [(topic.clone(), 0), (topic.clone(), 1)],
        "{members:#}"
    );

    // A worker on the job's export (its `[serve]` table is ignored; the
    // embedded catalog's folder is relative to the same data folder).
    let export = api.get(&format!("/api/jobs/{id}/export")).expect(200).body;
    let file = dir.join("worker.toml");
    std::fs::write(&file, export).unwrap();
    let log = std::fs::File::create(dir.join("worker.log")).unwrap();
    let _worker = Running(
        command(env!("CARGO_BIN_EXE_topicberg"))
            .args(["sync", "-c"])
            .arg(&file)
            .arg("--follow")
            .arg("--state-dir")
            .arg(dir.join("worker-state"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting the worker"),
    );
    let shared = api.poll(&format!("/api/jobs/{id}/members"), limit, |m| {
        let members = m["members"].as_array().cloned().unwrap_or_default();
        members.len() == 2 && members.iter().all(|m| partitions(m).len() == 1)
    });
    let mut all: Vec<(String, i64)> = shared["members"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(partitions)
        .collect();
    all.sort();
    assert_eq!(all, [(topic.clone(), 0), (topic.clone(), 1)], "{shared:#}");
    crate::serve_browser::drive(browse(&dir, &server.base, id, &topic));
}

/// The job page's button asks Kafka and lists both members, one partition
/// each.
async fn browse(dir: &std::path::Path, base: &str, id: i64, topic: &str) {
    let (_driver, page) = crate::serve_browser::logged_in_page(dir, base).await;
    let limit = Duration::from_secs(30);
    page.go(&format!("#/jobs/{id}")).await;
    page.click("#show-members").await;
    let listed = page
        .text_until("#group-members", limit, |t| t.contains("2 members"))
        .await;
    for partition in [0, 1] {
        assert!(
            listed.contains(&format!("{topic}: {partition}")),
            "{listed}"
        );
    }
    page.assert_accessible("the job page with its group's members")
        .await;
    page.client.close().await.unwrap();
}

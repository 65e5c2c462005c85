//! The web UI's mistakes from issue 16, in headless Chromium: a wrong
//! password shows its error; saving a source, a destination or the streams
//! keeps every field the forms do not show (and what the user did not
//! change); one invalid message does not break the streams page (it is
//! counted, with an example); "Test connection" tests what the form shows;
//! saves say so; a new job stays paused until its streams are saved.

use std::time::Duration;

use serde_json::{json, Value};

use crate::serve_browser::{browser, start_chromedriver, Page};
use crate::serve_support::{temp_data_dir, Server, ADMIN_PASSWORD};
use crate::support::{create_topic, produce};
use crate::testbed::{get, unique_name};

struct Ids {
    source: i64,
    destination: i64,
    job: i64,
    topic_a: String,
    topic_b: String,
    new_job: Option<i64>,
}

#[test]
fn serve_browser_saves_keep_what_the_forms_do_not_show() {
    let topic_a = unique_name("ui_keep_a");
    let topic_b = unique_name("ui_keep_b");
    let not_offered = unique_name("ui_keep_c");
    create_topic(&topic_a, 1);
    create_topic(&topic_b, 1);
    let mut a_messages: Vec<(String, String)> = (1..=3)
        .map(|i| {
            (
                i.to_string(),
                json!({"id": i, "name": format!("n{i}")}).to_string(),
            )
        })
        .collect();
    a_messages.insert(1, ("9".into(), "this is not JSON".into()));
    produce(&topic_a, &a_messages);
    produce(&topic_b, &[("1".into(), json!({"id": 1}).to_string())]);

    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut api = server.client();
    api.login(ADMIN_PASSWORD).expect(200);
    let group = unique_name("ui_keep_group");
    let source = api
        .json(
            "POST",
            "/api/sources",
            Some(
                &json!({"name": "kafka", "bootstrap_servers": get("TESTBED_KAFKA_BOOTSTRAP"),
                "topic_pattern": format!("^({topic_a}|{topic_b})$"),
                "consumer_group": group, "max_threads": 3}),
            ),
        )
        .expect(201)
        .json();
    let destination = api
        .json(
            "POST",
            "/api/destinations",
            Some(&json!({"name": "embedded", "path": "wh"})),
        )
        .expect(201)
        .json();
    let stream_a = json!({"topic": topic_a, "mode": "upsert", "dedup_keys": ["name", "id"],
        "on_invalid": "skip", "columns": ["id", "name"], "table": "custom_a",
        "delete_format": "equality"});
    let stream_c = json!({"topic": not_offered, "on_invalid": "dlq"});
    let job = api
        .json(
            "POST",
            "/api/jobs",
            Some(
                &json!({"name": unique_name("ui_keep_job"), "source_id": source["id"],
                "destination_id": destination["id"], "streams": [stream_a, stream_c],
                "target_engines": ["spark", "trino<480"]}),
            ),
        )
        .expect(201)
        .json();
    let mut ids = Ids {
        source: source["id"].as_i64().unwrap(),
        destination: destination["id"].as_i64().unwrap(),
        job: job["id"].as_i64().unwrap(),
        topic_a: topic_a.clone(),
        topic_b: topic_b.clone(),
        new_job: None,
    };
    crate::serve_browser::drive(browse(&dir, &server.base, &mut ids));

    let strip = |mut v: Value| {
        let o = v.as_object_mut().unwrap();
        o.remove("id");
        o.remove("name");
        v
    };
    let source_now = api
        .get(&format!("/api/sources/{}", ids.source))
        .expect(200)
        .json();
    assert_eq!(source_now["name"], "kafka-renamed");
    assert_eq!(
        strip(source_now),
        strip(source),
        "renaming in the form changed nothing else (the unsaved test neither)"
    );
    let destination_now = api
        .get(&format!("/api/destinations/{}", ids.destination))
        .expect(200)
        .json();
    assert_eq!(destination_now["name"], "embedded-renamed");
    assert_eq!(
        strip(destination_now),
        strip(destination),
        "no catalog = \"rest\" added"
    );
    let job_now = api
        .get(&format!("/api/jobs/{}", ids.job))
        .expect(200)
        .json();
    assert_eq!(
        job_now["streams"],
        json!([stream_a, {"topic": topic_b, "mode": "append"}, stream_c]),
        "the streams page changed only the ticked topic"
    );
    assert_eq!(
        job_now["target_engines"],
        json!(["spark", "trino<480"]),
        "the job form kept the engine with a release"
    );
    let new_job = api
        .get(&format!("/api/jobs/{}", ids.new_job.unwrap()))
        .expect(200)
        .json();
    assert_eq!(
        new_job["paused"], false,
        "saving its streams started it: {new_job}"
    );
    assert_eq!(new_job["schedule"], "every 60 minutes");
}

async fn browse(dir: &std::path::Path, base: &str, ids: &mut Ids) {
    let (_driver, webdriver) = start_chromedriver();
    let client = browser(&webdriver, &dir.join("chromium-profile")).await;
    let shots = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots-forms");
    std::fs::create_dir_all(&shots).unwrap();
    let mut page = Page {
        client,
        base: base.to_string(),
        shots,
        shot: 0,
    };
    let limit = Duration::from_secs(30);

    // A wrong password says so (and stays on the login page).
    page.go("").await;
    page.fill("#password", "not-the-password").await;
    page.click("#login").await;
    let msg = page
        .text_until("#login-result", limit, |t| !t.is_empty())
        .await;
    assert!(msg.contains("wrong username or password"), "{msg}");
    page.screenshot("login-wrong-password").await;
    page.fill("#password", ADMIN_PASSWORD).await;
    page.click("#login").await;
    page.wait("#new-job").await;

    // The source: rename, save ("Saved"), then test an unsaved change.
    page.go(&format!("#/sources/{}", ids.source)).await;
    page.fill("#source-name", "kafka-renamed").await;
    page.click("#source-save").await;
    let saved = page
        .text_until("#source-result", limit, |t| t.contains("Saved"))
        .await;
    assert!(saved.contains("Saved kafka-renamed"), "{saved}");
    page.fill("#source-bootstrap_servers", "127.0.0.1:9").await;
    page.click("#source-test").await;
    let tested = page
        .text_until("#source-result", Duration::from_secs(90), |t| {
            t.contains("Connection OK") || t.contains("failed")
        })
        .await;
    assert!(
        tested.contains("Connection failed"),
        "the test used the form's brokers: {tested}"
    );
    page.screenshot("source-unsaved-test").await;

    // The destination: rename only.
    page.go(&format!("#/destinations/{}", ids.destination))
        .await;
    page.fill("#destination-name", "embedded-renamed").await;
    page.click("#destination-save").await;
    page.text_until("#destination-result", limit, |t| t.contains("Saved"))
        .await;

    // The streams page: topic A's invalid message is counted, not fatal;
    // tick B only.
    page.go(&format!("#/jobs/{}/streams", ids.job)).await;
    let row_a = format!("#stream-{}", ids.topic_a);
    let invalid = page
        .text_until(&format!("{row_a} .invalid"), Duration::from_secs(90), |t| {
            !t.is_empty()
        })
        .await;
    assert!(
        invalid.contains("1 of 4 sampled messages cannot become rows"),
        "{invalid}"
    );
    assert!(
        invalid.contains(&format!("{}[0]@1", ids.topic_a)),
        "{invalid}"
    );
    let columns = page.text_until(&row_a, limit, |t| !t.is_empty()).await;
    assert!(columns.contains("id: long"), "{columns}");
    page.screenshot("streams-invalid-message").await;
    page.click(&format!("#stream-{} .tick", ids.topic_b)).await;
    page.click("#streams-save").await;
    page.text_until("main", limit, |t| t.contains("Streams saved"))
        .await;

    // The job form shows an engine with a release in its text field, and
    // saving the form keeps it.
    page.go(&format!("#/jobs/{}/edit", ids.job)).await;
    let versions = page
        .value_until("#job-engine_versions", limit, |v| !v.is_empty())
        .await;
    assert_eq!(versions, "trino<480");
    page.click("#job-save").await;
    page.wait("#streams-table").await;

    // A new job with a schedule waits, paused, until its streams are saved.
    page.go("#/jobs/new").await;
    page.fill("#job-name", &unique_name("ui_new_job")).await;
    page.click("#job-save").await;
    page.wait("#streams-table").await;
    let id = page.job_id().await;
    ids.new_job = Some(id);
    page.go(&format!("#/jobs/{id}")).await;
    let waiting = page
        .text_until("main", limit, |t| t.contains("Paused until"))
        .await;
    assert!(
        waiting.contains("Next run: -") || waiting.contains("next run: -"),
        "{waiting}"
    );
    page.click("#choose-streams").await;
    page.wait("#streams-table").await;
    page.click("#streams-save").await;
    page.text_until("main", limit, |t| t.contains("schedule is on"))
        .await;
    page.client.close().await.unwrap();
}

/// The job form's schedule builder: a common schedule fills the field,
/// the next five runs show as the service reads the field, and a schedule
/// it cannot read is said under the field as one types.
pub(crate) async fn schedule_builder_fills_and_lists_the_next_runs(page: &Page) {
    let limit = Duration::from_secs(30);
    page.wait("#job-schedule-common")
        .await
        .select_by_value("daily at 02:00")
        .await
        .unwrap();
    page.value_until("#job-schedule", limit, |v| v == "daily at 02:00")
        .await;
    let next = page
        .text_until("#job-schedule-next", limit, |t| t.contains("02:00:00 UTC"))
        .await;
    assert_eq!(next.matches("02:00:00 UTC").count(), 5, "{next}");
    page.fill("#job-schedule", "every 7 parsecs").await;
    let problem = page
        .text_until("#job-schedule-error", limit, |t| !t.is_empty())
        .await;
    assert!(problem.contains("parsecs"), "{problem}");
    page.text_until("#job-schedule-next", limit, str::is_empty)
        .await;
}

/// `form` shows every label of `shown` and none of `hidden`.
pub(crate) fn assert_labels(form: &str, shown: &[&str], hidden: &[&str]) {
    for label in shown {
        assert!(form.contains(label), "no {label:?} on the form: {form}");
    }
    for label in hidden {
        assert!(!form.contains(label), "{label:?} shows: {form}");
    }
}

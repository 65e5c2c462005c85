//! `topicberg serve`'s JSON API against the real binary and the test bed:
//! setup and login, refusal without a session (401) or CSRF token (403),
//! sources, destinations and their connection tests, jobs, the streams
//! page, Sync Now and the run history, export to a job file that
//! `topicberg sync` runs, import, restart on the same data folder, and
//! that no secret ever comes back.

use std::time::Duration;

use serde_json::{json, Value};

use crate::serve_support::{
    assert_test_green, messages, temp_data_dir, Client, Server, ADMIN_PASSWORD,
};
use crate::support::{create_topic, produce};
use crate::testbed::{get, unique_name};

/// Every route behind the login, with a method.
const PROTECTED: &[(&str, &str)] = &[
    ("POST", "/api/logout"),
    ("GET", "/api/sources"),
    ("POST", "/api/sources"),
    ("GET", "/api/sources/1"),
    ("PUT", "/api/sources/1"),
    ("DELETE", "/api/sources/1"),
    ("POST", "/api/sources/1/test"),
    ("GET", "/api/destinations"),
    ("POST", "/api/destinations"),
    ("GET", "/api/destinations/1"),
    ("PUT", "/api/destinations/1"),
    ("DELETE", "/api/destinations/1"),
    ("POST", "/api/destinations/1/test"),
    ("GET", "/api/jobs"),
    ("POST", "/api/jobs"),
    ("POST", "/api/jobs/import"),
    ("GET", "/api/jobs/1"),
    ("PUT", "/api/jobs/1"),
    ("DELETE", "/api/jobs/1"),
    ("GET", "/api/jobs/1/streams"),
    ("POST", "/api/jobs/1/sync"),
    ("POST", "/api/jobs/1/cancel"),
    ("POST", "/api/jobs/1/pause"),
    ("POST", "/api/jobs/1/resume"),
    ("GET", "/api/jobs/1/export"),
    ("GET", "/api/jobs/1/runs"),
    ("GET", "/api/runs/1"),
    ("GET", "/api/runs/1/log"),
];

#[test]
fn serve_setup_login_and_refusals() {
    let dir = temp_data_dir();
    let mut server = Server::start(&dir, None);
    let mut client = server.client();

    // No password yet: health and metrics answer, the API asks for setup.
    client.get("/healthz").expect(200);
    client.get("/metrics").expect(200);
    for (method, path) in PROTECTED {
        let r = client.json(method, path, Some(&json!({})));
        assert_eq!(r.status, 503, "{method} {path}: {}", r.body);
        assert_eq!(r.json()["error"], "set the admin password: POST /api/setup");
    }
    client.login(ADMIN_PASSWORD).expect(503);
    let token = server.setup_token();
    let short = client.json(
        "POST",
        "/api/setup",
        Some(&json!({"password": "short", "setup_token": token})),
    );
    assert_eq!(
        short.expect(400).json()["error"],
        "the password needs at least 8 characters"
    );
    client
        .json(
            "POST",
            "/api/setup",
            Some(&json!({"password": ADMIN_PASSWORD, "setup_token": token})),
        )
        .expect(200);
    // Only while unset.
    let again = client.json(
        "POST",
        "/api/setup",
        Some(&json!({"password": "another-password", "setup_token": token})),
    );
    again.expect(409);

    // Without a session: 401 everywhere behind the login.
    for (method, path) in PROTECTED {
        let r = client.json(method, path, Some(&json!({})));
        assert_eq!(r.status, 401, "{method} {path}: {}", r.body);
    }
    // A body of the wrong shape is refused without quoting its values.
    let typed = client.json_csrf(
        "POST",
        "/api/login",
        Some(&json!({"username": "admin", "password": 81726354})),
        false,
    );
    assert_eq!(typed.status, 400, "{}", typed.body);
    assert!(!typed.body.contains("81726354"), "{}", typed.body);
    let wrong = client.login("not-the-password");
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json()["error"], "wrong username or password");
    assert!(wrong.header("set-cookie").is_empty());

    let ok = client.login(ADMIN_PASSWORD).expect(200);
    let cookie = ok.header("set-cookie");
    for attribute in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
        assert!(
            cookie.contains(attribute),
            "cookie lacks {attribute}: {cookie}"
        );
    }
    client.get("/api/sources").expect(200);

    // A session without the CSRF header (or with a wrong one): 403 on every write.
    for (method, path) in PROTECTED.iter().filter(|(m, _)| *m != "GET") {
        let r = client.json_csrf(method, path, Some(&json!({})), false);
        assert_eq!(r.status, 403, "{method} {path}: {}", r.body);
    }
    // A url-encoded form may carry the token as its `csrf` field instead.
    let token = client.csrf.clone().unwrap();
    client
        .post_form("/api/jobs/1/pause", &format!("a=1&csrf={token}"))
        .expect(404);
    client
        .post_form("/api/jobs/1/pause", "csrf=wrong-token")
        .expect(403);
    let real = client.csrf.replace("wrong-token".into());
    client
        .json(
            "POST",
            "/api/sources",
            Some(&json!({"name": "x", "bootstrap_servers": "b:1"})),
        )
        .expect(403);
    client.csrf = real;

    // Logout ends the session.
    client.json("POST", "/api/logout", None).expect(200);
    client.get("/api/sources").expect(401);

    // The password set through setup survives a restart.
    server.stop();
    let server = Server::start(&dir, None);
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    client.get("/api/jobs").expect(200);
    assert!(!server.log().contains(ADMIN_PASSWORD));
}

/// The test bed's source (SASL PLAIN, so it has a secret) for `topics`.
fn source_body(name: &str, topics: &[&str]) -> Value {
    json!({
        "name": name,
        "bootstrap_servers": get("TESTBED_KAFKA_SASL_BOOTSTRAP"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_username": get("TESTBED_KAFKA_PLAIN_USER"),
        "sasl_password": get("TESTBED_KAFKA_PLAIN_PASSWORD"),
        "topic_pattern": format!("^({})$", topics.join("|")),
        "max_threads": 2,
    })
}

/// The SeaweedFS REST catalog and S3 store (as `support::Job::new`).
fn destination_body(name: &str) -> Value {
    json!({
        "name": name,
        "catalog": "rest",
        "uri": get("TESTBED_SEAWEED_URI"),
        "warehouse": get("TESTBED_SEAWEED_WAREHOUSE"),
        "credential": get("TESTBED_SEAWEED_CREDENTIAL"),
        "s3_endpoint": get("TESTBED_S3_ENDPOINT"),
        "s3_region": "us-east-1",
        "s3_access_key": get("TESTBED_S3_ACCESS_KEY"),
        "s3_secret_key": get("TESTBED_S3_SECRET_KEY"),
    })
}

fn secrets() -> Vec<String> {
    vec![
        get("TESTBED_KAFKA_PLAIN_PASSWORD"),
        get("TESTBED_SEAWEED_CREDENTIAL"),
        get("TESTBED_S3_SECRET_KEY"),
    ]
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in secrets() {
        assert!(!text.contains(&secret), "{what} contains a secret: {text}");
    }
}

#[test]
fn serve_api_end_to_end() {
    let upsert_topic = unique_name("it_serve_customers");
    let append_topic = unique_name("it_serve_events");
    create_topic(&upsert_topic, 2);
    create_topic(&append_topic, 1);
    produce(&upsert_topic, &messages("c", &[1, 2, 3, 4, 2, 3]));
    produce(&append_topic, &messages("e", &[1, 2, 3, 4, 5, 6, 7]));

    let dir = temp_data_dir();
    let mut server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);

    // --- sources ---
    let topics = [upsert_topic.as_str(), append_topic.as_str()];
    let mut bad = source_body("bad", &topics);
    bad.as_object_mut().unwrap().remove("name");
    assert!(client
        .json("POST", "/api/sources", Some(&bad))
        .expect(400)
        .json()["error"]
        .as_str()
        .unwrap()
        .contains("name"));
    let mut typo = source_body("typo", &topics);
    typo["sasl_pasword"] = typo["sasl_password"].clone();
    let e = client
        .json("POST", "/api/sources", Some(&typo))
        .expect(400)
        .json();
    assert!(e["error"].as_str().unwrap().contains("sasl_pasword"), "{e}");
    let mut no_mechanism = source_body("nomech", &topics);
    no_mechanism
        .as_object_mut()
        .unwrap()
        .remove("sasl_mechanism");
    let e = client
        .json("POST", "/api/sources", Some(&no_mechanism))
        .expect(400)
        .json();
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("source.sasl_mechanism"),
        "{e}"
    );

    let source = client
        .json("POST", "/api/sources", Some(&source_body("kafka", &topics)))
        .expect(201)
        .json();
    let sid = source["id"].as_i64().unwrap();
    assert_eq!(source["sasl_password"], json!({"set": true}));
    assert_eq!(source["sasl_username"], get("TESTBED_KAFKA_PLAIN_USER"));
    client
        .json("POST", "/api/sources", Some(&source_body("kafka", &topics)))
        .expect(409);
    let listed = client.get("/api/sources").expect(200).json();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["name"], "kafka");
    let shown = client
        .get(&format!("/api/sources/{sid}"))
        .expect(200)
        .json();
    assert_eq!(shown, source);
    client.get("/api/sources/999999").expect(404);
    let t = assert_test_green(
        &client,
        &format!("/api/sources/{sid}/test"),
        &["kafka", "topics", "consumer group"],
    );
    let topics_message = t["steps"][1]["message"].as_str().unwrap();
    assert!(topics_message.contains("2 topic(s) match"), "{t}");
    assert!(topics_message.contains(&upsert_topic) && topics_message.contains(&append_topic));

    // An update without the secret (and one echoing the placeholder) keeps it:
    // the connection test stays green.
    let mut update = shown.clone();
    update.as_object_mut().unwrap().remove("sasl_password");
    update["max_threads"] = json!(3);
    let updated = client
        .json("PUT", &format!("/api/sources/{sid}"), Some(&update))
        .expect(200)
        .json();
    assert_eq!(updated["max_threads"], 3);
    assert_eq!(updated["sasl_password"], json!({"set": true}));
    let mut echo = updated.clone();
    echo["max_threads"] = json!(2);
    client
        .json("PUT", &format!("/api/sources/{sid}"), Some(&echo))
        .expect(200);
    assert_test_green(
        &client,
        &format!("/api/sources/{sid}/test"),
        &["kafka", "topics", "consumer group"],
    );

    // A wrong password is a red test naming the step, not the password.
    let wrong = client
        .json(
            "POST",
            "/api/sources",
            Some(&{
                let mut b = source_body("wrong", &topics);
                b["sasl_password"] = json!("definitely-wrong-pw");
                b
            }),
        )
        .expect(201)
        .json();
    let wid = wrong["id"].as_i64().unwrap();
    let r = client
        .json("POST", &format!("/api/sources/{wid}/test"), None)
        .expect(200)
        .json();
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["steps"][0]["step"], "kafka");
    assert_eq!(r["steps"][0]["ok"], false);
    assert!(!r.to_string().contains("definitely-wrong-pw"));
    client
        .json("DELETE", &format!("/api/sources/{wid}"), None)
        .expect(204);
    client.get(&format!("/api/sources/{wid}")).expect(404);

    // --- destinations ---
    let e = client
        .json(
            "POST",
            "/api/destinations",
            Some(&json!({"name": "d", "catalog": "rest"})),
        )
        .expect(400)
        .json();
    assert!(
        e["error"].as_str().unwrap().contains("destination.uri"),
        "{e}"
    );
    let destination = client
        .json(
            "POST",
            "/api/destinations",
            Some(&destination_body("seaweed")),
        )
        .expect(201)
        .json();
    let did = destination["id"].as_i64().unwrap();
    assert_eq!(destination["credential"], json!({"set": true}));
    assert_eq!(destination["s3_secret_key"], json!({"set": true}));
    assert_eq!(
        client
            .get("/api/destinations")
            .expect(200)
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let mut update = client
        .get(&format!("/api/destinations/{did}"))
        .expect(200)
        .json();
    update["s3_region"] = json!("us-east-1");
    client
        .json("PUT", &format!("/api/destinations/{did}"), Some(&update))
        .expect(200);
    assert_test_green(
        &client,
        &format!("/api/destinations/{did}/test"),
        &[
            "catalog",
            "create table",
            "storage credentials",
            "write file",
            "drop table",
        ],
    );

    // --- jobs ---
    let job_name = unique_name("it_serve_job");
    let mut job_body = json!({
        "name": job_name,
        "source_id": sid,
        "destination_id": did,
        "target_engines": ["spark", "duckdb"],
        "streams": [
            {"topic": upsert_topic, "mode": "upsert", "sort_by": ["id desc"]},
            {"topic": append_topic, "partition_by": ["bucket(4, id)"]},
        ],
        "schedule": "daily at 03:00",
        "maintain": {"keep_snapshots": 2, "orphan_min_age": "1d"},
        "maintain_schedule": "daily at 04:00",
    });
    let e = client
        .json("POST", "/api/jobs", Some(&job_body))
        .expect(400)
        .json();
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("streams[0].dedup_keys"),
        "{e}"
    );
    job_body["streams"][0]["dedup_keys"] = json!(["id"]);
    // Both schedules wrong: one problem each, for its own field.
    job_body["schedule"] = json!("every blue moon");
    job_body["maintain_schedule"] = json!("now and then");
    let e = client
        .json("POST", "/api/jobs", Some(&job_body))
        .expect(400)
        .json();
    let problems: Vec<&str> = e["problems"]
        .as_array()
        .unwrap_or_else(|| panic!("{e}"))
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(problems.len(), 2, "{e}");
    assert!(
        problems[0].starts_with("schedule: ") && !problems[0].contains("now and then"),
        "{e}"
    );
    assert!(problems[1].starts_with("maintain_schedule: "), "{e}");
    job_body["maintain_schedule"] = json!("daily at 04:00");
    let e = client
        .json("POST", "/api/jobs", Some(&job_body))
        .expect(400)
        .json();
    assert!(e["error"].as_str().unwrap().starts_with("schedule:"), "{e}");
    job_body["schedule"] = json!("daily at 03:00");
    job_body["maintain_schedule"] = json!("now and then");
    let e = client
        .json("POST", "/api/jobs", Some(&job_body))
        .expect(400)
        .json();
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .starts_with("maintain_schedule:"),
        "{e}"
    );
    job_body["maintain_schedule"] = json!("daily at 04:00");
    let job = client
        .json("POST", "/api/jobs", Some(&job_body))
        .expect(201)
        .json();
    let jid = job["id"].as_i64().unwrap();
    assert_eq!(job["maintain"]["keep_snapshots"], 2, "{job}");
    assert_eq!(job["maintain_schedule"], "daily at 04:00", "{job}");
    assert_eq!(job["paused"], false);
    assert_eq!(job["running"], false);
    assert!(
        job["next_run"].as_str().unwrap().ends_with("T03:00:00Z"),
        "{job}"
    );
    client
        .json("POST", "/api/jobs", Some(&job_body))
        .expect(409);
    assert_eq!(client.get("/api/jobs").expect(200).json()[0]["id"], jid);
    // Engines with no common delete format are refused with the reason.
    let mut no_format = job_body.clone();
    no_format["target_engines"] = json!(["databricks", "athena"]);
    let e = client
        .json("PUT", &format!("/api/jobs/{jid}"), Some(&no_format))
        .expect(400)
        .json();
    assert!(e["error"].as_str().unwrap().contains("databricks"), "{e}");
    // A source in use cannot be deleted.
    client
        .json("DELETE", &format!("/api/sources/{sid}"), None)
        .expect(409);
    client
        .json("DELETE", &format!("/api/destinations/{did}"), None)
        .expect(409);

    // --- streams page ---
    let streams = client
        .get(&format!("/api/jobs/{jid}/streams"))
        .expect(200)
        .json();
    assert_eq!(streams["namespace"], format!("{job_name}_topics"));
    let topic = |name: &str| {
        streams["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topic"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {streams}"))
            .clone()
    };
    let customers = topic(&upsert_topic);
    let events = topic(&append_topic);
    assert_eq!(streams["topics"].as_array().unwrap().len(), 2);
    let columns: Vec<&str> = customers["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["id", "name", "score"]);
    assert_eq!(customers["columns"][0]["type"], "long");
    assert_eq!(customers["sampled_messages"], 6);
    assert_eq!(customers["partitions"], 2);
    assert_eq!(customers["mode"], "upsert");
    assert_eq!(customers["dedup_keys"], json!(["id"]));
    assert_eq!(
        customers["upsert_delete_format"]["delete_format"],
        "position"
    );
    assert_eq!(customers["upsert_delete_format"]["format_version"], 2);
    assert!(!customers["upsert_delete_format"]["reason"]
        .as_str()
        .unwrap()
        .is_empty());
    assert_eq!(events["mode"], "append");
    assert_eq!(events["sampled_messages"], 7);

    // --- Sync Now and the history ---
    let run_id = client
        .json("POST", &format!("/api/jobs/{jid}/sync"), None)
        .expect(202)
        .json()["run_id"]
        .as_i64()
        .unwrap();
    let second = client.json("POST", &format!("/api/jobs/{jid}/sync"), None);
    let first_still_running = client
        .get(&format!("/api/runs/{run_id}"))
        .expect(200)
        .json()["status"]
        == "running";
    if first_still_running {
        assert_eq!(second.status, 409, "{}", second.body);
    }
    let runs = client.poll(
        &format!("/api/jobs/{jid}/runs"),
        Duration::from_secs(180),
        |v| {
            v.as_array()
                .unwrap()
                .iter()
                .all(|r| r["status"] != "running")
        },
    );
    let run = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == run_id)
        .unwrap()
        .clone();
    assert_eq!(run["status"], "succeeded", "{run}\n{}", server.log());
    assert_eq!(run["trigger"], "manual");
    assert_eq!(run["records"], 13);
    let records = |run: &Value, topic: &str| {
        run["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topic"] == topic)
            .unwrap_or_else(|| panic!("{topic} missing: {run}"))["records"]
            .clone()
    };
    assert_eq!(records(&run, &upsert_topic), 6);
    assert_eq!(records(&run, &append_topic), 7);
    let detail = client
        .get(&format!("/api/runs/{run_id}"))
        .expect(200)
        .json();
    assert_eq!(detail["report"]["job"], job_name.as_str());
    assert!(detail["duration_ms"].as_i64().unwrap() >= 0);
    let log = client.get(&format!("/api/runs/{run_id}/log")).expect(200);
    assert!(log.header("content-disposition").contains("attachment"));
    assert!(log.body.contains(&upsert_topic), "log:\n{}", log.body);
    client.get("/api/runs/999999").expect(404);

    // The table page: schema, snapshots (ids as strings), rows.
    let table_page = |client: &Client, topic: &str| {
        client
            .get(&format!("/api/jobs/{jid}/tables/{}", topic.to_lowercase()))
            .expect(200)
            .json()
    };
    let table = table_page(&client, &upsert_topic);
    let columns: Vec<&str> = table["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        columns.contains(&"id") && columns.contains(&"_olake_id"),
        "{table}"
    );
    assert_eq!(table["rows_written"], 4, "one row per key: {table}");
    assert_eq!(table["rows_deleted"], 0, "{table}");
    assert_eq!(table["partition_by"], json!([]), "{table}");
    assert_eq!(table["sort_by"], json!(["id desc nulls last"]), "{table}");
    let events_table = table_page(&client, &append_topic);
    assert_eq!(
        events_table["partition_by"],
        json!(["bucket(4, id)"]),
        "{events_table}"
    );
    assert_eq!(events_table["sort_by"], json!([]), "{events_table}");
    let snapshot = &table["snapshots"][0];
    assert!(
        snapshot["snapshot_id"]
            .as_str()
            .unwrap()
            .parse::<i64>()
            .is_ok(),
        "{table}"
    );
    assert_eq!(snapshot["added_records"], 4, "{table}");
    let history = table["schema_history"].as_array().unwrap();
    assert_eq!(history.len(), 1, "{table}");
    assert!(
        history[0]["added"]
            .as_array()
            .unwrap()
            .contains(&json!("id")),
        "{table}"
    );
    assert!(
        table["dead_letters"].is_null(),
        "no dead-letter table: {table}"
    );
    assert_eq!(run["lag"], 0, "nothing left behind after the run: {run}");
    client
        .get(&format!("/api/jobs/{jid}/tables/no_such_table"))
        .expect(404);
    let metrics = client.get("/metrics").expect(200).body;
    assert!(metrics.contains(&job_name), "{metrics}");

    // --- Maintain Now: a run of kind `maintain` on the job's tables ---
    let maintain_id = client
        .json("POST", &format!("/api/jobs/{jid}/maintain"), None)
        .expect(202)
        .json()["run_id"]
        .as_i64()
        .unwrap();
    let maintained = client.poll(
        &format!("/api/runs/{maintain_id}"),
        Duration::from_secs(180),
        |r| r["status"] != "running",
    );
    assert_eq!(maintained["kind"], "maintain", "{maintained}");
    assert_eq!(
        maintained["status"],
        "succeeded",
        "{maintained}\n{}",
        server.log()
    );
    let tables = maintained["report"]["tables"].as_array().unwrap();
    assert!(
        tables.iter().any(|t| t["table"]
            .as_str()
            .unwrap()
            .ends_with(&upsert_topic.to_lowercase())),
        "the job's tables are maintained: {maintained}"
    );
    for t in tables {
        assert!(t["error"].is_null(), "{t}");
        assert!(
            t["before"]["data_files"].as_u64().unwrap()
                >= t["after"]["data_files"].as_u64().unwrap(),
            "{t}"
        );
    }
    // The rows are still there after it.
    let table = table_page(&client, &upsert_topic);
    assert_eq!(
        table["rows_written"], 4,
        "one row per key after maintenance: {table}"
    );
    // The jobs list keeps the last sync and the last maintenance apart.
    let listed = client.get("/api/jobs").expect(200).json();
    let listed = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == jid)
        .unwrap_or_else(|| panic!("job {jid} listed: {listed}"));
    assert_eq!(listed["last_run"]["id"], run_id, "{listed}");
    assert_eq!(listed["last_maintain"]["id"], maintain_id, "{listed}");

    // --- pause, resume, cancel ---
    let paused = client
        .json("POST", &format!("/api/jobs/{jid}/pause"), None)
        .expect(200)
        .json();
    assert_eq!(paused["paused"], true);
    assert!(paused["next_run"].is_null());
    let resumed = client
        .json("POST", &format!("/api/jobs/{jid}/resume"), None)
        .expect(200)
        .json();
    assert_eq!(resumed["paused"], false);
    let cancel = client
        .json("POST", &format!("/api/jobs/{jid}/cancel"), None)
        .expect(200)
        .json();
    assert_eq!(cancel["cancelled"], false);

    // --- export: a job file `topicberg sync` runs ---
    produce(&upsert_topic, &messages("c2", &[5, 1]));
    produce(&append_topic, &messages("e2", &[8, 9, 10]));
    let exported = client.get(&format!("/api/jobs/{jid}/export")).expect(200);
    assert!(exported.header("content-disposition").contains(".toml"));
    let toml = exported.body.clone();
    assert!(
        toml.contains("[serve]")
            && toml.contains("maintain_schedule = \"daily at 04:00\"")
            && toml.contains("[maintain]")
            && toml.contains("keep_snapshots = 2"),
        "the [maintain] table is exported:\n{toml}"
    );
    for var in [
        "${TOPICBERG_SOURCE_SASL_PASSWORD}",
        "${TOPICBERG_DESTINATION_CREDENTIAL}",
        "${TOPICBERG_DESTINATION_S3_SECRET_KEY}",
    ] {
        assert!(toml.contains(var), "{var} missing:\n{toml}");
    }
    let job_file = dir.join("exported.toml");
    std::fs::write(&job_file, &toml).unwrap();
    let report_file = dir.join("exported-report.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_topicberg"))
        .args(["sync", "-c"])
        .arg(&job_file)
        .arg("--report-json")
        .arg(&report_file)
        .current_dir(&dir)
        .env(
            "TOPICBERG_SOURCE_SASL_PASSWORD",
            get("TESTBED_KAFKA_PLAIN_PASSWORD"),
        )
        .env(
            "TOPICBERG_DESTINATION_CREDENTIAL",
            get("TESTBED_SEAWEED_CREDENTIAL"),
        )
        .env(
            "TOPICBERG_DESTINATION_S3_SECRET_KEY",
            get("TESTBED_S3_SECRET_KEY"),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "exported job failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report_file).unwrap()).unwrap();
    let cli_records = |topic: &str| {
        report["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topic"] == topic)
            .unwrap()["records"]
            .clone()
    };
    // The CLI continued from the service's offsets: only the new messages.
    assert_eq!(cli_records(&upsert_topic), 2, "{report}");
    assert_eq!(cli_records(&append_topic), 3, "{report}");
    // Key 1 written again: its old row is deleted, key 5 is new.
    let table = table_page(&client, &upsert_topic);
    assert_eq!(
        (&table["rows_written"], &table["rows_deleted"]),
        (&json!(6), &json!(1)),
        "five live rows, one deleted: {table}"
    );

    // --- import ---
    client.post_text("/api/jobs/import", &toml).expect(409);
    let copy_name = unique_name("it_serve_copy");
    let copy_toml = toml.replace(
        &format!("name = \"{job_name}\""),
        &format!("name = \"{copy_name}\""),
    );
    assert_ne!(copy_toml, toml);
    let e = client
        .post_text("/api/jobs/import", "name = 1\n")
        .expect(400)
        .json();
    assert!(e["error"].is_string());
    let copy = client
        .post_text("/api/jobs/import", &copy_toml)
        .expect(201)
        .json();
    let cid = copy["id"].as_i64().unwrap();
    assert_eq!(copy["name"], copy_name.as_str());
    assert_eq!(copy["streams"], job["streams"]);
    assert_eq!(copy["target_engines"], job["target_engines"]);
    assert_eq!(copy["maintain"], job["maintain"], "import keeps [maintain]");
    for setting in ["schedule", "maintain_schedule", "mode"] {
        assert_eq!(copy[setting], job[setting], "import keeps {setting}");
    }
    let warned = copy["warnings"]
        .as_array()
        .unwrap_or_else(|| panic!("{copy}"));
    assert!(
        warned.iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("source.sasl_password was written as ${VAR}")),
        "the unset secrets are named: {copy}"
    );
    let copy_source = client
        .get(&format!("/api/sources/{}", copy["source_id"]))
        .expect(200)
        .json();
    assert_eq!(copy_source["name"], format!("{copy_name}-source"));
    // The placeholder left the secret unset; everything else came across.
    assert!(copy_source.get("sasl_password").is_none(), "{copy_source}");
    // A job with streams syncs exactly those topics: its export's [source]
    // has no topic_pattern; [serve] carries the pattern the streams page
    // offers topics from, back into the imported source.
    assert!(!toml.contains("[source]\ntopic_pattern"), "{toml}");
    assert_eq!(
        copy_source["topic_pattern"],
        format!("^({})$", topics.join("|")),
        "{copy_source}"
    );
    // Setting the secret makes the export equal to the original's.
    let mut set = copy_source.clone();
    set["sasl_password"] = json!(get("TESTBED_KAFKA_PLAIN_PASSWORD"));
    client
        .json(
            "PUT",
            &format!("/api/sources/{}", copy["source_id"]),
            Some(&set),
        )
        .expect(200);
    let mut copy_dest = client
        .get(&format!("/api/destinations/{}", copy["destination_id"]))
        .expect(200)
        .json();
    copy_dest["credential"] = json!(get("TESTBED_SEAWEED_CREDENTIAL"));
    copy_dest["s3_secret_key"] = json!(get("TESTBED_S3_SECRET_KEY"));
    client
        .json(
            "PUT",
            &format!("/api/destinations/{}", copy["destination_id"]),
            Some(&copy_dest),
        )
        .expect(200);
    let copy_export = client
        .get(&format!("/api/jobs/{cid}/export"))
        .expect(200)
        .body;
    let body_of = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        body_of(&copy_export).replace(&copy_name, "JOB"),
        body_of(&toml).replace(&job_name, "JOB")
    );

    // --- restart on the same data folder keeps everything ---
    let before: Vec<Value> = [
        "/api/sources",
        "/api/destinations",
        &format!("/api/jobs/{jid}/runs"),
    ]
    .iter()
    .map(|p| client.get(p).expect(200).json())
    .collect();
    let job_before = client.get(&format!("/api/jobs/{jid}")).expect(200).json();
    server.stop();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client2 = server.client();
    client2.login(ADMIN_PASSWORD).expect(200);
    let after: Vec<Value> = [
        "/api/sources",
        "/api/destinations",
        &format!("/api/jobs/{jid}/runs"),
    ]
    .iter()
    .map(|p| client2.get(p).expect(200).json())
    .collect();
    assert_eq!(before, after);
    let job_after = client2.get(&format!("/api/jobs/{jid}")).expect(200).json();
    assert_eq!(job_after["schedule"], "daily at 03:00");
    assert_eq!(job_after["streams"], job_before["streams"]);
    // The latest sync and the latest maintenance, apart.
    assert_eq!(job_after["last_run"]["id"], run_id);
    assert_eq!(job_after["last_maintain"]["id"], maintain_id);

    // --- deletes ---
    client2
        .json("DELETE", &format!("/api/jobs/{cid}"), None)
        .expect(204);
    client2.get(&format!("/api/jobs/{cid}")).expect(404);
    client2
        .json(
            "DELETE",
            &format!("/api/sources/{}", copy["source_id"]),
            None,
        )
        .expect(204);
    client2
        .json(
            "DELETE",
            &format!("/api/destinations/{}", copy["destination_id"]),
            None,
        )
        .expect(204);

    // No secret in any body either client received, nor in the service's log.
    for body in client
        .seen
        .borrow()
        .iter()
        .chain(client2.seen.borrow().iter())
    {
        assert_no_secret("a response", body);
    }
    assert_no_secret("the service log", &server.log());
    assert_no_secret("the first service log", &{
        let mut all = String::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                all.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
        all
    });
}

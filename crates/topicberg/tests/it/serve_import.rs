//! Importing a job file with its `[serve]` table: the service's settings
//! come back (mode, schedules), a job that would run by itself comes
//! paused and says so, a schedule the service cannot read is refused
//! naming `serve.schedule` with nothing stored, and a file without secrets
//! or `[serve]` imports without a warning.

use serde_json::Value;

use crate::serve_support::{temp_data_dir, Client, Server, ADMIN_PASSWORD};
use crate::testbed::unique_name;

fn file(name: &str, serve: &str) -> String {
    format!(
        "name = \"{name}\"\n[source]\nbootstrap_servers = \"127.0.0.1:9092\"\n\
         topic_pattern = \"^imported$\"\n[destination]\ncatalog = \"sql\"\npath = \"wh\"\n{serve}"
    )
}

fn warnings(job: &Value) -> Vec<String> {
    job["warnings"]
        .as_array()
        .unwrap_or_else(|| panic!("{job}"))
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

fn count(client: &Client, path: &str) -> usize {
    client
        .get(path)
        .expect(200)
        .json()
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn serve_import_brings_the_services_settings_back_and_pauses_what_would_run() {
    let dir = temp_data_dir();
    let server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);

    let plain = client
        .post_text("/api/jobs/import", &file(&unique_name("imp_plain"), ""))
        .expect(201)
        .json();
    assert_eq!(warnings(&plain), Vec::<String>::new(), "{plain}");
    assert_eq!(
        (&plain["paused"], &plain["mode"]),
        (&Value::Bool(false), &Value::from("scheduled"))
    );

    let continuous = file(
        &unique_name("imp_cont"),
        "[serve]\nmode = \"continuous\"\nmaintain_schedule = \"daily at 04:00\"\n",
    );
    let job = client
        .post_text("/api/jobs/import", &continuous)
        .expect(201)
        .json();
    assert_eq!(job["mode"], "continuous", "{job}");
    assert_eq!(job["maintain_schedule"], "daily at 04:00", "{job}");
    assert_eq!(job["paused"], true, "{job}");
    assert!(job["follower"].is_null(), "not started: {job}");
    assert_eq!(
        warnings(&job),
        ["imported paused: start it once its settings are checked"]
    );

    let scheduled = file(
        &unique_name("imp_sched"),
        "[serve]\nschedule = \"every 5 minutes\"\n",
    );
    let job = client
        .post_text("/api/jobs/import", &scheduled)
        .expect(201)
        .json();
    assert_eq!(
        (&job["schedule"], &job["paused"]),
        (&Value::from("every 5 minutes"), &Value::Bool(true)),
        "{job}"
    );
    assert!(job["next_run"].is_null(), "paused: {job}");

    let (sources, jobs) = (count(&client, "/api/sources"), count(&client, "/api/jobs"));
    let bad = file(
        &unique_name("imp_bad"),
        "[serve]\nschedule = \"every blue moon\"\n",
    );
    let refused = client
        .post_text("/api/jobs/import", &bad)
        .expect(400)
        .json();
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .starts_with("serve.schedule: "),
        "{refused}"
    );
    assert_eq!(
        count(&client, "/api/sources"),
        sources,
        "no source left behind"
    );
    assert_eq!(count(&client, "/api/jobs"), jobs);
}

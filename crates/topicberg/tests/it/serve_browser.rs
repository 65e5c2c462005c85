//! The web UI end to end in headless Chromium (Debian `chromium` driven
//! through `chromedriver`, both started here): log in, create a source and
//! a destination ("Test connection" green), a job with two topics (one
//! upsert on `id`, one append), press Sync Now and see the history row
//! with the right record count; then schedule the job and see the
//! scheduled run pick up new messages. Screenshots of each page go to
//! `target/tmp/screenshots/` (printed at the end).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::serve_support::{free_port, temp_data_dir, Server, ADMIN_PASSWORD};
use crate::support::{create_topic, create_topic_with_retention, produce};
use crate::testbed::{get, unique_name};

pub(crate) struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts chromedriver on a free port and waits until it answers.
pub(crate) fn start_chromedriver() -> (Driver, String) {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (Debian chromium-driver; scripts/install-deps installs it)");
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Driver(child), url)
}

/// Runs a browser test's steps (the WebDriver client is async) to their
/// end on a runtime of their own.
pub(crate) fn drive<F: std::future::Future>(steps: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(steps)
}

/// A chromedriver and a Chromium page logged in to the service at `base`
/// as the admin (its profile and screenshots under `dir`); the page lives
/// as long as the driver.
pub(crate) async fn logged_in_page(dir: &std::path::Path, base: &str) -> (Driver, Page) {
    let (driver, webdriver) = start_chromedriver();
    let client = browser(&webdriver, &dir.join("chromium-profile")).await;
    let page = Page {
        client,
        base: base.to_string(),
        shots: dir.to_path_buf(),
        shot: 0,
    };
    page.log_in().await;
    (driver, page)
}

pub(crate) async fn browser(webdriver: &str, profile: &std::path::Path) -> Client {
    browser_with(webdriver, profile, &[]).await
}

/// [`browser`] with more Chromium arguments.
pub(crate) async fn browser_with(
    webdriver: &str,
    profile: &std::path::Path,
    extra: &[String],
) -> Client {
    let mut args = vec![
        "--headless=new".to_string(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-dev-shm-usage".into(),
        "--disable-quic".into(),
        "--no-first-run".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--window-size=1280,1000".into(),
        format!("--user-data-dir={}", profile.display()),
    ];
    args.extend_from_slice(extra);
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({ "binary": "/usr/bin/chromium", "args": args }),
    );
    ClientBuilder::native()
        .capabilities(caps)
        .connect(webdriver)
        .await
        .expect("a Chromium session")
}

pub(crate) struct Page {
    pub(crate) client: Client,
    pub(crate) base: String,
    pub(crate) shots: PathBuf,
    pub(crate) shot: u32,
}

impl Page {
    /// Logs in as the admin from the login page and waits for the jobs page.
    pub(crate) async fn log_in(&self) {
        self.go("").await;
        self.fill("#password", ADMIN_PASSWORD).await;
        self.click("#login").await;
        self.wait("#new-job").await;
    }

    pub(crate) async fn go(&self, hash: &str) {
        self.client
            .goto(&format!("{}/{hash}", self.base))
            .await
            .unwrap();
    }

    pub(crate) async fn wait(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css} did not appear: {e}"))
    }

    /// Types `text` into `css` (found again if the page re-rendered it
    /// meanwhile).
    pub(crate) async fn fill(&self, css: &str, text: &str) {
        for attempt in 1..=3 {
            let el = self.wait(css).await;
            let typed = match el.clear().await {
                Ok(()) => el.send_keys(text).await,
                Err(e) => Err(e),
            };
            match typed {
                Ok(()) => return,
                Err(e) if attempt < 3 && is_stale(&e) => continue,
                Err(e) => panic!("typing into {css}: {e}"),
            }
        }
    }

    pub(crate) async fn click(&self, css: &str) {
        for attempt in 1..=3 {
            match self.wait(css).await.click().await {
                Ok(()) => return,
                Err(e) if attempt < 3 && is_stale(&e) => continue,
                Err(e) => panic!("clicking {css}: {e}"),
            }
        }
    }

    /// Polls the text of `css` (re-found each time: pages re-render) until
    /// `done` holds; returns it.
    pub(crate) async fn text_until(
        &self,
        css: &str,
        limit: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        self.read_until(css, None, limit, done).await
    }

    /// Polls the value of the input `css` until `done` holds; returns it.
    pub(crate) async fn value_until(
        &self,
        css: &str,
        limit: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        self.read_until(css, Some("value"), limit, done).await
    }

    /// Polls the text (`property` None) or a property of `css` until
    /// `done` holds.
    async fn read_until(
        &self,
        css: &str,
        property: Option<&str>,
        limit: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(el) = self.client.find(Locator::Css(css)).await {
                let read = match property {
                    None => el.text().await.ok(),
                    Some(name) => el.prop(name).await.ok().flatten(),
                };
                if let Some(read) = read.filter(|r| done(r)) {
                    return read;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{css} never showed what was expected"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    pub(crate) async fn screenshot(&mut self, name: &str) {
        self.shot += 1;
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{:02}-{name}.png", self.shot)), png).unwrap();
    }

    /// The job id in the current URL (`#/jobs/<id>...`).
    pub(crate) async fn job_id(&self) -> i64 {
        let url = self.client.current_url().await.unwrap();
        let fragment = url.fragment().unwrap_or_default().to_string();
        fragment
            .trim_start_matches("/jobs/")
            .split('/')
            .next()
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| panic!("no job id in {url}"))
    }
}

fn is_stale(e: &fantoccini::error::CmdError) -> bool {
    e.to_string().contains("stale element")
}

fn messages(prefix: &str, ids: &[i64]) -> Vec<(String, String)> {
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            (
                id.to_string(),
                json!({"id": id, "name": format!("{prefix}{id}-{i}")}).to_string(),
            )
        })
        .collect()
}

#[test]
fn serve_browser_create_source_destination_job_sync_now_and_scheduled_run() {
    let customers = unique_name("ui_customers");
    let events = unique_name("ui_events");
    // Offered by the source, not ticked: never synced.
    let unticked = unique_name("ui_unticked");
    // A day of retention: with the warning fraction set tiny below, any
    // time without a success is "too long", so the job page warns.
    create_topic_with_retention(&customers, 2, 24 * 3_600_000);
    create_topic(&events, 1);
    create_topic(&unticked, 1);
    produce(&unticked, &messages("u", &[1, 2, 3, 4, 5]));
    produce(&customers, &messages("c", &[1, 2, 3, 4, 2, 3]));
    produce(&events, &messages("e", &[1, 2, 3, 4, 5, 6, 7]));
    let dir = temp_data_dir();
    let server = Server::start_with(
        &dir,
        Some(ADMIN_PASSWORD),
        &["--retention-warning-fraction", "0.0000001"],
    );
    let (run_id, commits) = drive(browse(&dir, &server.base, customers, events, unticked));
    // Snapshot ids use 64 bits: sent as strings, shown exactly.
    let mut api = server.client();
    api.login(ADMIN_PASSWORD).expect(200);
    let run = api.get(&format!("/api/runs/{run_id}")).expect(200).json();
    let tables = run["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 2, "{run}");
    for t in tables {
        let id = t["snapshot_id"]
            .as_str()
            .unwrap_or_else(|| panic!("not a string: {t}"));
        id.parse::<i64>().unwrap();
        assert_eq!(t["commit"]["snapshotId"].as_str(), Some(id), "{t}");
        assert!(
            commits.contains(&format!("snapshotId={id}")),
            "{id} not shown exactly: {commits}"
        );
    }
}

async fn browse(
    dir: &std::path::Path,
    base: &str,
    customers: String,
    events: String,
    unticked: String,
) -> (i64, String) {
    let (_driver, webdriver) = start_chromedriver();
    let client = browser(&webdriver, &dir.join("chromium-profile")).await;
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut page = Page {
        client,
        base: base.to_string(),
        shots: shots.clone(),
        shot: 0,
    };

    // Log in.
    page.go("").await;
    page.fill("#password", ADMIN_PASSWORD).await;
    page.screenshot("login").await;
    page.click("#login").await;
    page.wait("#new-job").await;
    // The empty dashboard says what to do first, and leads there.
    let steps = page
        .text_until("#first-steps", Duration::from_secs(30), |t| {
            t.contains("Add a source")
        })
        .await;
    assert_eq!(steps.matches("to do").count(), 3, "{steps}");
    page.screenshot("jobs-empty").await;
    page.click("#first-step").await;

    // A source, tested green.
    page.wait("#source-form").await;
    page.fill("#source-name", "testbed-kafka").await;
    page.fill("#source-bootstrap_servers", &get("TESTBED_KAFKA_BOOTSTRAP"))
        .await;
    page.fill(
        "#source-topic_pattern",
        &format!("^({customers}|{events}|{unticked})$"),
    )
    .await;
    page.click("#source-save").await;
    page.click("#source-test").await;
    let result = page
        .text_until("#source-result", Duration::from_secs(60), |t| {
            t.contains("Connection OK") || t.contains("failed")
        })
        .await;
    assert!(result.contains("Connection OK"), "{result}");
    page.screenshot("source-tested").await;

    // A destination, tested green.
    page.go("#/destinations/new").await;
    page.fill("#destination-name", "testbed-seaweed").await;
    page.fill("#destination-uri", &get("TESTBED_SEAWEED_URI"))
        .await;
    page.fill("#destination-warehouse", &get("TESTBED_SEAWEED_WAREHOUSE"))
        .await;
    page.fill(
        "#destination-credential",
        &get("TESTBED_SEAWEED_CREDENTIAL"),
    )
    .await;
    page.fill("#destination-s3_endpoint", &get("TESTBED_S3_ENDPOINT"))
        .await;
    page.fill("#destination-s3_region", "us-east-1").await;
    page.fill("#destination-s3_access_key", &get("TESTBED_S3_ACCESS_KEY"))
        .await;
    page.fill("#destination-s3_secret_key", &get("TESTBED_S3_SECRET_KEY"))
        .await;
    page.click("#destination-save").await;
    page.click("#destination-test").await;
    let result = page
        .text_until("#destination-result", Duration::from_secs(60), |t| {
            t.contains("Connection OK") || t.contains("failed")
        })
        .await;
    assert!(result.contains("Connection OK"), "{result}");
    page.screenshot("destination-tested").await;

    // Source and destination done: the first step left is the job.
    page.go("#/jobs").await;
    let steps = page
        .text_until("#first-steps", Duration::from_secs(30), |t| {
            t.matches("done").count() == 2
        })
        .await;
    assert_eq!(steps.matches("to do").count(), 1, "{steps}");
    page.click("#first-step").await;

    // A job: manual for now; two streams, one upsert on id, one append.
    let job_name = unique_name("ui_job");
    page.wait("#job-name").await;
    page.fill("#job-name", &job_name).await;
    page.fill("#job-schedule", "").await;
    page.click("#job-save").await;
    page.wait("#streams-table").await;
    page.wait(&format!("#stream-{unticked}")).await;
    let upsert_row = format!("#stream-{customers}");
    let append_row = format!("#stream-{events}");
    page.click(&format!("{upsert_row} .tick")).await;
    page.wait(&format!("{upsert_row} .mode"))
        .await
        .select_by_value("upsert")
        .await
        .unwrap();
    page.wait(&format!("{upsert_row} .keys"))
        .await
        .select_by_value("id")
        .await
        .unwrap();
    page.click(&format!("{append_row} .tick")).await;
    let format_text = page
        .text_until(&upsert_row, Duration::from_secs(5), |t| !t.is_empty())
        .await;
    assert!(format_text.contains("id: long"), "{format_text}");
    page.screenshot("streams").await;
    page.click("#streams-save").await;
    page.wait("#streams").await;
    let job_id = page.job_id().await;

    // Sync Now: 6 + 7 messages read, followed on the run's own page.
    page.click(&format!("#sync-{job_id}")).await;
    let tables = page
        .text_until("#tables", Duration::from_secs(120), |t| {
            t.contains("committed") || t.contains("failed")
        })
        .await;
    assert!(tables.contains("committed"), "the run's page: {tables}");
    page.go(&format!("#/jobs/{job_id}")).await;
    let row = page
        .text_until("#runs tr.run", Duration::from_secs(120), |t| {
            t.contains("succeeded") || t.contains("failed")
        })
        .await;
    assert!(row.contains("succeeded"), "{row}");
    let records = page
        .text_until("#runs tr.run td.records", Duration::from_secs(5), |t| {
            !t.is_empty()
        })
        .await;
    assert_eq!(
        records, "13",
        "history row (the unticked topic is not read): {row}"
    );
    let warning = page
        .text_until(".banner.warn", Duration::from_secs(10), |t| !t.is_empty())
        .await;
    assert!(
        warning.contains(&format!(
            "shortest retention of its topics ({customers}: 24.0 h)"
        )),
        "{warning}"
    );
    page.screenshot("job-after-sync-now").await;
    page.click("#runs tr.run a").await;
    let log = page
        .text_until("#log", Duration::from_secs(10), |t| !t.is_empty())
        .await;
    assert!(log.contains("committed"), "the run's log: {log}");
    // The job reads its ticked streams: the cluster's other topics are not
    // listed as "does not match topic_pattern: ...".
    assert!(
        !log.contains(&unticked),
        "the run's log names the unticked topic: {log}"
    );
    assert!(!log.contains("does not match topic_pattern"), "{log}");
    let run_url = page.client.current_url().await.unwrap();
    let run_id: i64 = run_url
        .fragment()
        .and_then(|f| f.strip_prefix("/runs/"))
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no run id in {run_url}"));
    let commits = page
        .text_until("#tables", Duration::from_secs(10), |t| {
            t.contains("snapshotId=")
        })
        .await;
    page.screenshot("run").await;

    // Scheduled every minute: the next run picks up 3 new messages.
    produce(&events, &messages("e", &[8, 9, 10]));
    page.go(&format!("#/jobs/{job_id}/edit")).await;
    page.fill("#job-schedule", "* * * * *").await;
    page.click("#job-save").await;
    page.wait("#streams-table").await;
    page.go(&format!("#/jobs/{job_id}")).await;
    let row = page
        .text_until("#runs tr.run", Duration::from_secs(150), |t| {
            t.contains("schedule") && (t.contains("succeeded") || t.contains("failed"))
        })
        .await;
    assert!(row.contains("succeeded"), "{row}");
    let records = page
        .text_until("#runs tr.run td.records", Duration::from_secs(5), |t| {
            !t.is_empty()
        })
        .await;
    assert_eq!(
        records, "3",
        "the scheduled run read the new messages: {row}"
    );
    page.screenshot("job-after-scheduled-run").await;
    page.client.close().await.unwrap();
    eprintln!("screenshots in {}", shots.display());
    (run_id, commits)
}

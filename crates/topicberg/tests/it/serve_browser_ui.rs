//! Issue 16's "what is missing", in headless Chromium: every setting as a
//! labelled field, validation errors next to their fields (all at once,
//! in words); the job overview (source, destination, streams, schedule,
//! last success, lag per topic); Sync Now disabled while a run goes; a run
//! that wrote dead letters marked, its counts and human units; the log
//! filter; the history chart and pages; clone, delete (confirmed) and
//! import. The pages' screenshots go to docs/screenshots/.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve_a11y::{assert_fits_narrow_viewports, narrow_pages};
use crate::serve_browser::{browser, start_chromedriver, Page};
use crate::serve_browser_forms::{assert_labels, schedule_builder_fills_and_lists_the_next_runs};
use crate::serve_support::{temp_data_dir, Server, ADMIN_PASSWORD};
use crate::support::{create_topic, produce};
use crate::testbed::{get, unique_name};

fn docs_screenshots() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/screenshots")
}

#[test]
fn serve_browser_fields_overview_marks_log_filter_clone_delete_import() {
    let topic = unique_name("ui_dlq");
    create_topic(&topic, 2);
    let mut messages: Vec<(String, String)> = (1..=5)
        .map(|i| {
            (
                i.to_string(),
                json!({"id": i, "name": format!("n{i}")}).to_string(),
            )
        })
        .collect();
    messages.push(("9".into(), "not JSON at all".into()));
    produce(&topic, &messages);
    let dir = temp_data_dir();
    let release = dir.join("release-commit");
    // Present: no run waits before its drain until the cancel step
    // removes it.
    let drain_release = release.with_file_name("release-drain");
    std::fs::write(&drain_release, "").unwrap();
    let pause = format!(
        "before_iceberg_commit:{},before_drain:{}",
        release.display(),
        drain_release.display()
    );
    let server = Server::start_env(
        &dir,
        Some(ADMIN_PASSWORD),
        &[],
        &[("TOPICBERG_PAUSE", pause.as_str())],
    );
    let mut api = server.client();
    api.login(ADMIN_PASSWORD).expect(200);
    let destination = crate::serve_support::embedded_destination(&api);
    crate::serve_browser::drive(browse(
        &dir,
        &server.base,
        &topic,
        &release,
        destination["id"].as_i64().unwrap(),
    ));

    // The secret typed into the destination form is write-only.
    let destinations = api.get("/api/destinations").expect(200).json();
    let stored = destinations
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "azure-lake")
        .cloned()
        .unwrap();
    assert_eq!(stored["azure_access_key"], json!({"set": true}), "{stored}");
    assert_eq!(stored["azure_account"], "devstoreaccount9", "{stored}");
    assert!(!destinations.to_string().contains("az-s3cr3t"));
    let jobs = api.get("/api/jobs").expect(200).json();
    let names: Vec<&str> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["name"].as_str())
        .collect();
    assert!(names.iter().any(|n| n.ends_with("_imported")), "{names:?}");
    assert!(
        !names.iter().any(|n| n.ends_with("_copy")),
        "the clone was deleted: {names:?}"
    );
}

/// The running run's page shows its progress, polled live: every
/// partition's offsets read of those planned (6 messages, all read: the
/// run waits before its commit), the table's status and the phase.
async fn run_progress_is_live(page: &Page, limit: Duration) {
    page.click("#runs tr.run a").await;
    let progress = page
        .text_until("#run-progress", limit, |t| t.contains("6 of 6"))
        .await;
    assert!(progress.contains("committing"), "phase: {progress}");
    assert!(progress.contains("100%"), "{progress}");
    let tables = page
        .text_until("#progress-tables", limit, |t| t.contains("written"))
        .await;
    // A row per partition with messages (the keys decide which of the 2),
    // each read to its end.
    let rows = page
        .client
        .find_all(fantoccini::Locator::Css(
            "#progress-tables tr.progress-partition",
        ))
        .await
        .unwrap();
    assert!(!rows.is_empty(), "no partition rows: {tables}");
    for row in rows {
        let text = row.text().await.unwrap();
        assert!(text.contains("100%"), "{text} in {tables}");
    }
    assert_bar_fill_is_rendered(page).await;
    page.screenshot_as("serve-run-progress").await;
    page.assert_accessible("serve-run-progress").await;
}

/// A bar of 1 read of 4 planned, drawn by the page's own module, is a
/// quarter filled as the browser renders it (an inline `style` attribute,
/// which the page's Content-Security-Policy blocks, drew every bar full).
async fn assert_bar_fill_is_rendered(page: &Page) {
    let ratio = page
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             import('/ui/progress.js').then((m) => {
               const bar = m.bar(1, 4);
               document.querySelector('main').append(bar);
               const whole = bar.getBoundingClientRect().width;
               const fill = bar.firstChild.getBoundingClientRect().width;
               bar.remove();
               done([fill, whole]);
             }, (e) => done(String(e)));",
            vec![],
        )
        .await
        .unwrap();
    let widths: Vec<f64> = ratio
        .as_array()
        .unwrap_or_else(|| panic!("{ratio}"))
        .iter()
        .map(|w| w.as_f64().unwrap())
        .collect();
    assert!(widths[1] > 0.0, "{widths:?}");
    let filled = widths[0] / widths[1];
    assert!(
        (filled - 0.25).abs() < 0.02,
        "fill / bar = {filled} ({widths:?})"
    );
}

/// The charts' value axes: ticks of 1, 2 or 5 times a power of ten from
/// the data (the page's own `ticks`), none repeated on the drawn charts
/// (a run of 1 record once drew `0 / 1 / 1`), each axis with its unit.
async fn assert_chart_axes(page: &Page) {
    let found = page
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             import('/ui/chart.js').then((m) => {
               const drawn = {};
               for (const c of document.querySelectorAll('svg.chart')) {
                 drawn[c.id] = [c.querySelector('.axis-unit').textContent,
                   [...c.querySelectorAll('.axis-tick')].map((t) => t.textContent)];
               }
               done({ ticks: [m.ticks(1, true), m.ticks(3, true), m.ticks(7, true),
                 m.ticks(0.37, false), m.ticks(0, true), m.ticks(12500, true)], drawn });
             }, (e) => done(String(e)));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        found["ticks"],
        serde_json::json!([
            [0, 1],
            [0, 1, 2, 3],
            [0, 2, 4, 6, 8],
            [0, 0.1, 0.2, 0.3, 0.4],
            [0, 1],
            [0, 5000, 10000, 15000]
        ]),
        "{found}"
    );
    let unit_of = |id: &str| {
        found["drawn"][id][0]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let (duration, bytes) = (unit_of("chart-duration"), unit_of("chart-bytes"));
    assert!(["s", "min"].contains(&duration.as_str()), "{found}");
    assert!(["B", "KB", "MB", "GB"].contains(&bytes.as_str()), "{found}");
    let units = [
        ("chart-records", "msg"),
        ("chart-rate", "msg/s"),
        ("chart-lag", "msg"),
        ("chart-bytes", bytes.as_str()),
        ("chart-duration", duration.as_str()),
    ];
    for (id, unit) in units {
        let chart = &found["drawn"][id];
        assert_eq!(chart[0], unit, "{id}: {found}");
        let ticks: Vec<&str> = chart[1]
            .as_array()
            .unwrap_or_else(|| panic!("{id}: {found}"))
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let mut distinct = ticks.clone();
        distinct.dedup();
        assert!(ticks.len() >= 2 && distinct == ticks, "{id}: {ticks:?}");
    }
}

async fn browse(
    dir: &std::path::Path,
    base: &str,
    topic: &str,
    release: &std::path::Path,
    destination: i64,
) {
    let (_driver, webdriver) = start_chromedriver();
    let client = browser(&webdriver, &dir.join("chromium-profile")).await;
    let shots = docs_screenshots();
    std::fs::create_dir_all(&shots).unwrap();
    let page = Page {
        client,
        base: base.to_string(),
        shots: shots.clone(),
        shot: 0,
    };
    let limit = Duration::from_secs(30);
    page.go("").await;
    page.fill("#password", ADMIN_PASSWORD).await;
    page.screenshot_as("serve-login").await;
    page.assert_axe_finds_a_nameless_button().await;
    page.assert_accessible("serve-login").await;
    page.click("#login").await;
    page.wait("#new-job").await;

    // The source form: labels in words; a client-side and three server
    // problems shown at once, each next to its field, in words.
    page.go("#/sources/new").await;
    let form = page
        .text_until("#source-form", limit, |t| t.contains("Brokers"))
        .await;
    // ("CA certificate" is also in "Registry CA certificate".)
    let tls = [
        "Client certificate",
        "Client certificate key",
        "Check the brokers' host names",
    ];
    let sasl = ["SASL mechanism", "SASL user", "SASL password"];
    let oauth = [
        "OAuth token endpoint",
        "OAuth client id",
        "OAuth client secret",
        "OAuth scope",
    ];
    let always = [
        "Consumer group",
        "Max threads",
        "Schema registry URL",
        "Registry password",
    ];
    // PLAINTEXT (the default): no TLS, SASL or OAuth field shows.
    assert_labels(&form, &always, &[&tls[..], &sasl, &oauth].concat());
    // Each protocol shows its own; OAUTHBEARER its token settings.
    let protocol = "#source-security_protocol";
    page.wait(protocol)
        .await
        .select_by_value("SSL")
        .await
        .unwrap();
    let form = page
        .text_until("#source-form", limit, |t| t.contains(tls[0]))
        .await;
    assert_labels(&form, &tls, &[&sasl[..], &oauth].concat());
    page.wait(protocol)
        .await
        .select_by_value("SASL_PLAINTEXT")
        .await
        .unwrap();
    let form = page
        .text_until("#source-form", limit, |t| t.contains(sasl[0]))
        .await;
    assert_labels(&form, &sasl, &[&tls[..], &oauth].concat());
    page.wait(protocol)
        .await
        .select_by_value("SASL_SSL")
        .await
        .unwrap();
    page.wait("#source-sasl_mechanism")
        .await
        .select_by_value("OAUTHBEARER")
        .await
        .unwrap();
    let form = page
        .text_until("#source-form", limit, |t| t.contains(oauth[0]))
        .await;
    assert_labels(&form, &[&tls[..], &sasl, &oauth].concat(), &[]);
    // Back to nothing chosen: a field holding a value would stay shown.
    page.wait("#source-sasl_mechanism")
        .await
        .select_by_value("")
        .await
        .unwrap();
    page.wait(protocol)
        .await
        .select_by_value("PLAINTEXT")
        .await
        .unwrap();
    page.text_until("#source-form", limit, |t| !t.contains(tls[0]))
        .await;
    page.fill("#source-name", "kafka").await;
    page.fill("#source-bootstrap_servers", "127.0.0.1").await;
    page.fill("#source-max_threads", "0").await;
    page.click("#source-save").await;
    let threads = page
        .text_until("#source-max_threads-error", limit, |t| !t.is_empty())
        .await;
    assert!(threads.contains("whole number of 1 or more"), "{threads}");
    page.fill("#source-max_threads", "2").await;
    page.wait("#source-security_protocol")
        .await
        .select_by_value("SASL_SSL")
        .await
        .unwrap();
    page.click("#source-save").await;
    let brokers = page
        .text_until("#source-bootstrap_servers-error", limit, |t| !t.is_empty())
        .await;
    assert!(brokers.contains("is not host:port"), "{brokers}");
    let user = page
        .text_until("#source-sasl_username-error", limit, |t| !t.is_empty())
        .await;
    assert!(user.contains("“Security protocol”"), "in words: {user}");
    assert!(!user.contains("security_protocol"), "{user}");
    page.text_until("#source-sasl_password-error", limit, |t| {
        t.contains("enter it")
    })
    .await;
    page.text_until("#source-result", limit, |t| t.contains("fields need a fix"))
        .await;
    page.screenshot_as("serve-source-errors").await;
    page.assert_accessible("serve-source-errors").await;
    page.wait("#source-security_protocol")
        .await
        .select_by_value("PLAINTEXT")
        .await
        .unwrap();
    page.fill("#source-bootstrap_servers", &get("TESTBED_KAFKA_BOOTSTRAP"))
        .await;
    page.fill("#source-topic_pattern", &format!("^{topic}$"))
        .await;
    page.fill("#source-consumer_group", &unique_name("ui_group"))
        .await;
    page.click("#source-save").await;
    page.text_until("#source-result", limit, |t| t.contains("Saved kafka"))
        .await;

    // The destination form: the storage settings of this session; the
    // Azure key is write-only.
    page.go(&format!("#/destinations/{destination}")).await;
    let form = page
        .text_until("#destination-form", limit, |t| t.contains("Warehouse"))
        .await;
    // An embedded catalog: its folder, no REST catalog login.
    let storage = [
        "Format version",
        "Azure account key",
        "Azure Blob endpoint",
        "GCS service account file",
    ];
    let rest = [
        "Catalog URL",
        "OAuth2 token URI",
        "OAuth2 scope",
        "Bearer token",
    ];
    assert_labels(&form, &[&storage[..], &["Catalog folder"]].concat(), &rest);
    // A REST catalog: its URL and login (the folder, which holds "wh",
    // stays in sight: a field holding a value is never hidden).
    let catalog = "#destination-catalog";
    page.wait(catalog)
        .await
        .select_by_value("rest")
        .await
        .unwrap();
    let form = page
        .text_until("#destination-form", limit, |t| t.contains(rest[0]))
        .await;
    assert_labels(
        &form,
        &[&storage[..], &rest, &["Catalog folder"]].concat(),
        &[],
    );
    page.wait(catalog)
        .await
        .select_by_value("sql")
        .await
        .unwrap();
    // Azure settings on a destination whose tables are local: refused,
    // the problem next to the first of them, in words.
    page.fill("#destination-azure_account", "devstoreaccount9")
        .await;
    page.fill("#destination-azure_access_key", "az-s3cr3t")
        .await;
    page.click("#destination-save").await;
    let refused = page
        .text_until("#destination-azure_account-error", limit, |t| !t.is_empty())
        .await;
    assert!(refused.contains("“Warehouse”"), "{refused}");
    assert!(refused.contains("“Azure account key”"), "{refused}");
    page.screenshot_as("serve-destination-errors").await;
    page.assert_accessible("serve-destination-errors").await;
    // A new embedded destination with its tables in Azure: saved.
    page.go("#/destinations/new").await;
    page.fill("#destination-name", "azure-lake").await;
    page.wait("#destination-catalog")
        .await
        .select_by_value("sql")
        .await
        .unwrap();
    page.fill(
        "#destination-warehouse",
        "abfss://warehouse@devstoreaccount9.dfs.core.windows.net/lake",
    )
    .await;
    page.fill("#destination-azure_account", "devstoreaccount9")
        .await;
    page.fill("#destination-azure_access_key", "az-s3cr3t")
        .await;
    page.click("#destination-save").await;
    let saved = page
        .text_until("#destination-result", limit, |t| t.contains("aved"))
        .await;
    assert!(saved.contains("Saved azure-lake"), "{saved}");
    page.screenshot_as("serve-destination").await;
    page.assert_accessible("serve-destination").await;

    // A job on that topic; on the streams page, under "More": a table
    // name the validator refuses (shown next to it), then dead letters.
    let job_name = unique_name("ui_overview");
    page.go("#/jobs/new").await;
    page.fill("#job-name", &job_name).await;
    schedule_builder_fills_and_lists_the_next_runs(&page).await;
    page.fill("#job-schedule", "").await;
    page.wait("#job-destination")
        .await
        .select_by_value(&destination.to_string())
        .await
        .unwrap();
    page.click("#job-save").await;
    let row = format!("#stream-{topic}");
    page.wait(&format!("{row} .tick")).await;
    page.click(&format!("{row} .tick")).await;
    page.click(&format!("#settings-{topic} summary")).await;
    page.fill(&format!("#stream-{topic}-table"), "Not A Table!")
        .await;
    page.wait(&format!("#stream-{topic}-on_invalid"))
        .await
        .select_by_value("dlq")
        .await
        .unwrap();
    page.click("#streams-save").await;
    let table_error = page
        .text_until(&format!("#stream-{topic}-table-error"), limit, |t| {
            !t.is_empty()
        })
        .await;
    assert!(!table_error.is_empty());
    page.screenshot_as("serve-streams").await;
    page.assert_accessible("serve-streams").await;
    page.fill(&format!("#stream-{topic}-table"), "dlq_orders")
        .await;
    // Partitioning and sort order: a transform holds a comma, so the
    // partitioning field separates its items with ";".
    page.fill(
        &format!("#stream-{topic}-partition_by"),
        "bucket(2, id); truncate(1, name)",
    )
    .await;
    page.fill(&format!("#stream-{topic}-sort_by"), "name desc, id")
        .await;
    page.click("#streams-save").await;
    page.text_until("main", limit, |t| t.contains("schedule is on"))
        .await;
    let job_id = page.job_id().await;

    // Sync Now: while the run waits before its commit, Sync Now is off.
    page.click(&format!("#sync-{job_id}")).await;
    let ready = release.with_extension("ready");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ready.exists() {
        assert!(
            Instant::now() < deadline,
            "the run never reached its commit"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let disabled = poll(limit, || async {
        page.go(&format!("#/jobs/{job_id}")).await;
        let button = page.wait(&format!("#sync-{job_id}")).await;
        button.attr("disabled").await.ok().flatten().is_some()
    })
    .await;
    assert!(disabled, "Sync Now stays enabled while the job runs");
    run_progress_is_live(&page, limit).await;
    std::fs::write(release, "").unwrap();
    // The run's page, once the run ended, shows its report instead.
    page.text_until("#tables", Duration::from_secs(120), |t| {
        t.contains("committed")
    })
    .await;
    page.go(&format!("#/jobs/{job_id}")).await;
    let run_row = page
        .text_until("#runs tr.run", Duration::from_secs(120), |t| {
            t.contains("succeeded") || t.contains("failed")
        })
        .await;
    assert!(run_row.contains("succeeded"), "{run_row}");
    assert!(
        run_row.contains("1 dead letters written"),
        "marked: {run_row}"
    );

    // The overview: source, destination, streams, last success, lag.
    let overview = page
        .text_until("#overview", limit, |t| t.contains("Last success"))
        .await;
    assert!(
        overview.contains("kafka") && overview.contains("embedded"),
        "{overview}"
    );
    assert!(!overview.contains("Last success never"), "{overview}");
    let lag = page.text_until("#lag", limit, |t| t.contains(topic)).await;
    assert!(lag.contains('0'), "{lag}");
    page.text_until("#overview-streams", limit, |t| t.contains("dlq_orders"))
        .await;
    page.wait("#chart-records rect.bar").await;
    page.wait("#chart-duration rect.bar").await;
    // The lag measured right after the run, kept with it.
    page.wait("#chart-lag rect.bar").await;
    assert_chart_axes(&page).await;
    page.text_until("#runs-page", limit, |t| t.contains("page 1"))
        .await;
    page.screenshot_as("serve-job-overview").await;
    page.assert_accessible("serve-job-overview").await;

    // The table page, from the overview's link: schema, snapshots (ids in
    // full), rows, the dead-letter table's newest messages.
    page.click("#overview-streams a.table-link").await;
    let columns = page
        .text_until("#table-columns", limit, |t| t.contains("_olake_id"))
        .await;
    assert!(columns.contains("id"), "{columns}");
    let snapshot = page
        .text_until("#table-snapshots .snapshot-id", limit, |t| !t.is_empty())
        .await;
    assert!(
        snapshot.len() > 15 && snapshot.chars().all(|c| c.is_ascii_digit()),
        "a 64-bit id shown in full: {snapshot}"
    );
    page.text_until("#table-overview", limit, |t| t.contains("Rows"))
        .await;
    let dead = page
        .text_until("#table-dead-letters", limit, |t| {
            t.contains("not JSON at all")
        })
        .await;
    let rows = dead
        .lines()
        .filter(|l| l.contains("not JSON at all"))
        .count();
    assert_eq!(rows, 1, "the one invalid message, raw: {dead}");
    page.screenshot_as("serve-table").await;
    page.assert_accessible("serve-table").await;
    page.go(&format!("#/jobs/{job_id}")).await;
    page.wait("#runs tr.run a").await;

    // The run: its counts, human units, the log filter.
    page.click("#runs tr.run a").await;
    let figures = page
        .text_until("#run-figures", limit, |t| t.contains("Dead letters"))
        .await;
    let compact: String = figures.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(compact.contains("Deadletters1"), "{figures}");
    assert!(
        figures.contains(" B") || figures.contains("KB"),
        "human units: {figures}"
    );
    page.text_until("#run-notes", limit, |t| t.contains("dead letters written"))
        .await;
    let all = page
        .text_until("#log-count", limit, |t| t.contains("lines"))
        .await;
    page.fill("#log-search", "committed snapshot").await;
    let filtered = page
        .text_until("#log-count", limit, |t| t.contains(" of "))
        .await;
    assert!(filtered != all, "{filtered} vs {all}");
    let log = page.text_until("#log", limit, |t| !t.is_empty()).await;
    assert!(
        log.lines().all(|l| l.contains("committed snapshot")),
        "the filter kept other lines: {log}"
    );
    page.screenshot_as("serve-run").await;
    page.assert_accessible("serve-run").await;

    // Clone (named in a prompt), then delete the clone (confirmed).
    page.go(&format!("#/jobs/{job_id}")).await;
    page.click("#clone-job").await;
    page.wait("dialog[open] input").await;
    page.assert_accessible("the clone dialog").await;
    page.fill("dialog[open] input", &format!("{job_name}_copy"))
        .await;
    page.click("dialog[open] .dialog-ok").await;
    page.text_until("main", limit, |t| {
        t.contains(&format!("Job {job_name}_copy"))
    })
    .await;
    page.click("#delete-job").await;
    page.wait("dialog[open]").await;
    page.assert_accessible("the delete dialog").await;
    // Escape cancels (the focus is in the dialog, on Cancel): nothing goes.
    page.client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E00C}")
        .await
        .unwrap();
    assert!(
        poll(limit, || async {
            page.client
                .find_all(fantoccini::Locator::Css("dialog"))
                .await
                .is_ok_and(|d| d.is_empty())
        })
        .await,
        "Escape did not close the dialog"
    );
    page.text_until("main", limit, |t| {
        t.contains(&format!("Job {job_name}_copy"))
    })
    .await;
    page.click("#delete-job").await;
    page.click("dialog[open] .dialog-ok").await;
    page.text_until("main", limit, |t| t.contains("Deleted job"))
        .await;

    // Import: the exported job file under another name.
    let export = page
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(arguments[0], {credentials: 'same-origin'}).then((r) => r.text()).then(done);",
            vec![Value::String(format!("/api/jobs/{job_id}/export"))],
        )
        .await
        .unwrap();
    let exported = export.as_str().unwrap();
    for saved in [
        r#"partition_by = ["bucket(2, id)", "truncate(1, name)"]"#,
        r#"sort_by = ["name desc", "id"]"#,
    ] {
        assert!(
            exported.contains(saved),
            "{saved} not in the export: {exported}"
        );
    }
    let text = exported.replace(
        &format!("name = \"{job_name}\""),
        &format!("name = \"{job_name}_imported\""),
    );
    page.go("#/import").await;
    page.wait("#import-text").await;
    page.client
        .execute(
            "document.getElementById('import-text').value = arguments[0];",
            vec![Value::String(text)],
        )
        .await
        .unwrap();
    page.screenshot_as("serve-import").await;
    page.assert_accessible("serve-import").await;
    page.click("#import-save").await;
    page.text_until("main", limit, |t| t.contains("Imported"))
        .await;
    page.go("#/jobs").await;
    page.text_until("main", limit, |t| t.contains("_imported"))
        .await;
    page.screenshot_as("serve-jobs").await;
    page.assert_accessible("serve-jobs").await;
    let narrow = narrow_pages(&page, job_id, destination).await;
    assert_fits_narrow_viewports(&webdriver, dir, base, &narrow).await;
    cancel_on_the_run_page_commits_nothing(&page, job_id, topic, release).await;
    page.client.close().await.unwrap();
}

/// While a run goes (held before its drain, so the cancel lands before
/// anything is read), the job page says its lag is from before that run
/// and links to the run's live page; Cancel there ends the run, which
/// then says it committed nothing. (Sync Now opening the run's page is
/// checked in `serve_browser.rs`.)
async fn cancel_on_the_run_page_commits_nothing(
    page: &Page,
    job_id: i64,
    topic: &str,
    release: &std::path::Path,
) {
    let limit = Duration::from_secs(120);
    let release = &release.with_file_name("release-drain");
    std::fs::remove_file(release).unwrap();
    let _ = std::fs::remove_file(release.with_extension("ready"));
    produce(
        topic,
        &[("70".into(), json!({"id": 70, "name": "n70"}).to_string())],
    );
    page.go(&format!("#/jobs/{job_id}")).await;
    // The job's schedule may have started a run first: either one is held.
    let sync = page.wait(&format!("#sync-{job_id}")).await;
    if sync.attr("disabled").await.ok().flatten().is_none() {
        sync.click().await.unwrap();
    }
    let ready = release.with_extension("ready");
    let deadline = Instant::now() + limit;
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no run reached its drain");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    page.go(&format!("#/jobs/{job_id}")).await;
    page.text_until("#lag-before-run", limit, |t| {
        t.contains("a run is in progress")
    })
    .await;
    page.click("#lag-before-run a").await;
    page.click("#run-cancel").await;
    page.click("dialog[open] .dialog-ok").await;
    std::fs::write(release, "").unwrap();
    let figures = page
        .text_until("#run-figures", limit, |t| t.contains("cancelled"))
        .await;
    assert!(figures.contains("nothing (cancelled"), "{figures}");
    assert!(!figures.contains("0 B"), "{figures}");
}

/// Polls `check` until it holds or `limit` passes; whether it held.
async fn poll<F, Fut>(limit: Duration, check: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Page {
    /// A screenshot written as `<shots>/<name>.png` (docs/screenshots).
    async fn screenshot_as(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }
}

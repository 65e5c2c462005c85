//! The embedded catalog with its tables on an object store: `warehouse =
//! "abfss://..."` (Azurite), `"gs://..."` (fake-gcs-server) and
//! `"s3://..."` (SeaweedFS). Append and upsert syncs, twice, with `check`
//! naming the credentials, read back by independent engines through the
//! catalog file (which points at metadata in the store).

use serde_json::Value;

use crate::support::{create_topic, produce, table_report, versioned_messages, Job};
use crate::testbed::{get, unique_name};

/// An embedded-catalog job (SQLite file in a fresh local folder) whose
/// tables go to `warehouse`, with the store's `settings` lines.
fn job_on(topics: &[&str], warehouse: &str, settings: &str, streams: &str) -> Job {
    let job = Job::embedded(topics);
    let text = std::fs::read_to_string(&job.path).unwrap();
    std::fs::write(
        &job.path,
        format!("{text}warehouse = \"{warehouse}\"\n{settings}\n{streams}"),
    )
    .unwrap();
    job
}

/// Syncs an append and an upsert topic onto `warehouse` twice (new and
/// updated keys in between); `check` must name `credentials`; each of
/// `engines` must read the model's rows.
fn append_and_upsert_onto(
    store: &str,
    warehouse: &str,
    settings: &str,
    credentials: &str,
    engines: &[&str],
) {
    let appended = unique_name(&format!("{store}_append"));
    let upserted = unique_name(&format!("{store}_upsert"));
    for t in [&appended, &upserted] {
        create_topic(t, 2);
        produce(t, &versioned_messages(0..20, "a"));
    }
    let run = unique_name("wh");
    let warehouse = format!("{warehouse}/{run}");
    let streams =
        format!("[[streams]]\ntopic = \"{upserted}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    let job = job_on(&[&appended, &upserted], &warehouse, settings, &streams);

    let check = job.run("check", &[], &[]);
    let out = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(out.contains(&format!("tables in {warehouse}")), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains("storage credentials"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains(credentials), "{line}");

    job.sync();
    for t in [&appended, &upserted] {
        produce(t, &versioned_messages(10..30, "b"));
    }
    let report = job.sync();
    let upsert_table = job.table(&upserted);
    let t = table_report(&report, &upsert_table);
    assert_eq!(t["records"], 20, "{t}");

    // The table's files are in the store, not beside the catalog file.
    let local = job.path.with_file_name("warehouse");
    let entries: Vec<String> = std::fs::read_dir(&local)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("catalog.db"))
        .collect();
    assert!(
        entries.is_empty(),
        "local files beside the catalog: {entries:?}"
    );

    for (topic, rows) in [(&appended, 40), (&upserted, 30)] {
        let table = job.table(topic);
        let mut first: Option<String> = None;
        for engine in engines {
            let read = job.read_embedded(engine, &table);
            assert_eq!(read.lines().count(), rows, "{engine} {table}");
            match &first {
                None => first = Some(read),
                Some(first) => assert_eq!(&read, first, "{engine} differs on {table}"),
            }
        }
    }
    let upsert_rows = job.read_embedded(engines[0], &upsert_table);
    for row in upsert_rows
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        let id = row["id"].as_i64().unwrap();
        let want = if id < 10 { "a" } else { "b" };
        assert!(row["v"].as_str().unwrap().starts_with(want), "{row}");
    }
}

#[test]
fn embedded_catalog_on_azure_syncs_append_and_upsert_read_back_by_duckdb_and_pyiceberg() {
    let settings = format!(
        "azure_access_key = \"{}\"\nazure_endpoint = \"{}\"\n",
        get("TESTBED_AZURE_KEY"),
        get("TESTBED_AZURITE_BLOB_ENDPOINT")
    );
    let warehouse = format!(
        "abfss://{}@{}.dfs.core.windows.net",
        get("TESTBED_AZURE_CONTAINER"),
        get("TESTBED_AZURE_ACCOUNT")
    );
    append_and_upsert_onto(
        "azure",
        &warehouse,
        &settings,
        "Azure account key",
        &["pyiceberg", "duckdb"],
    );
}

#[test]
fn embedded_catalog_on_google_cloud_storage_syncs_append_and_upsert_read_back_by_duckdb_and_pyiceberg(
) {
    let settings = format!(
        "gcs_service_account_path = \"{}\"\n",
        get("TESTBED_GCS_SERVICE_ACCOUNT")
    );
    let warehouse = format!("gs://{}", get("TESTBED_GCS_BUCKET"));
    append_and_upsert_onto(
        "gcs",
        &warehouse,
        &settings,
        "service account key file",
        &["pyiceberg", "duckdb"],
    );
}

#[test]
fn embedded_catalog_on_s3_syncs_append_and_upsert_read_back_by_duckdb_and_pyiceberg() {
    let settings = format!(
        "s3_endpoint = \"{}\"\ns3_access_key = \"{}\"\ns3_secret_key = \"${{TESTBED_S3_SECRET_KEY}}\"\n",
        get("TESTBED_S3_ENDPOINT"),
        get("TESTBED_S3_ACCESS_KEY"),
    );
    // The plain bucket the reference catalog uses (`s3://fixture-warehouse/`).
    let warehouse = get("TESTBED_FIXTURE_WAREHOUSE")
        .trim_end_matches('/')
        .to_string();
    append_and_upsert_onto(
        "s3",
        &warehouse,
        &settings,
        "keys (s3_access_key",
        &["pyiceberg", "duckdb"],
    );
}

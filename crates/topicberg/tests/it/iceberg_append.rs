//! The append write path against both REST catalogs of the test bed: our
//! Parquet files, manifests and snapshots, read back by DuckDB, PyIceberg
//! and Spark, row for row.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use topicberg_iceberg::rest::{CatalogAuth, RestCatalogConfig};
use topicberg_iceberg::{
    Column, ColumnType, CommittedSnapshot, Destination, FormatVersion, S3Config, S3Credentials,
    StorageConfig, TableHandle,
};

use crate::testbed::{command, get, unique_name};

pub(crate) fn catalog_config(catalog: &str) -> RestCatalogConfig {
    let credential = get(&format!("TESTBED_{catalog}_CREDENTIAL"));
    let (client_id, client_secret) = credential.split_once(':').expect("credential is id:secret");
    RestCatalogConfig {
        uri: get(&format!("TESTBED_{catalog}_URI")),
        warehouse: Some(get(&format!("TESTBED_{catalog}_WAREHOUSE"))),
        auth: CatalogAuth::ClientCredentials {
            client_id: client_id.to_string(),
            client_secret: client_secret.into(),
            token_uri: Some(get(&format!("TESTBED_{catalog}_OAUTH2_URI"))),
            scope: None,
        },
        request_timeout: Duration::from_secs(30),
        vended_credentials: false,
        ca_pem: None,
    }
}

pub(crate) fn storage_config() -> StorageConfig {
    StorageConfig::s3(S3Config {
        endpoint: Some(get("TESTBED_S3_ENDPOINT")),
        region: get("TESTBED_S3_REGION"),
        credentials: S3Credentials::Keys {
            access_key_id: get("TESTBED_S3_ACCESS_KEY"),
            secret_access_key: get("TESTBED_S3_SECRET_KEY").into(),
        },
        path_style: true,
        ca_pem: None,
    })
}

/// A destination on the test bed's `catalog` (`SEAWEED` or `FIXTURE`) and S3.
pub(crate) async fn connect(catalog: &str) -> Destination {
    Destination::connect(&catalog_config(catalog), storage_config())
        .await
        .unwrap_or_else(|e| panic!("{catalog} catalog: {e}; run scripts/testbed up"))
}

/// A new `orders` table (of [`columns`]) in format `format`, in a
/// namespace of its own (`prefix` and a random suffix) on `catalog`.
pub(crate) async fn orders_table(
    catalog: &str,
    prefix: &str,
    format: FormatVersion,
) -> (Destination, Vec<String>, TableHandle) {
    let destination = connect(catalog).await;
    let namespace = vec![unique_name(prefix)];
    let handle = destination
        .ensure_table(&namespace, "orders", &columns(), format)
        .await
        .unwrap_or_else(|e| panic!("{catalog}: {e}"));
    (destination, namespace, handle)
}

pub(crate) fn columns() -> Vec<Column> {
    vec![
        Column::optional("id", 1, ColumnType::Long),
        Column::optional("qty", 2, ColumnType::Int),
        Column::optional("amount", 3, ColumnType::Double),
        Column::optional("name", 4, ColumnType::String),
        Column::optional("created_at", 5, ColumnType::TimestampTz),
        Column::optional("flag", 6, ColumnType::Boolean),
    ]
}

/// One row of the test table.
pub(crate) struct Row {
    id: Option<i64>,
    qty: Option<i32>,
    amount: Option<f64>,
    name: Option<String>,
    created_at: Option<i64>,
    flag: Option<bool>,
}

/// `count` rows with ids from `first`: nulls in every column, non-ASCII
/// and escaped text, negative ints, the epoch.
pub(crate) fn rows(first: i64, count: i64) -> Vec<Row> {
    (first..first + count)
        .map(|id| Row {
            id: Some(id),
            qty: (id % 11 != 3).then(|| ((id * 37) % 2001) as i32 - 1000),
            amount: (id % 13 != 5).then_some(id as f64 * 1.25 + 0.1),
            name: match id % 50 {
                _ if id % 17 == 7 => None,
                1 => Some(format!("São Paulo \"{id}\" back\\slash")),
                2 => Some("日本語 ✓".to_string()),
                3 => Some("line\nbreak\ttab".to_string()),
                4 => Some(String::new()),
                _ => Some(format!("name-{id}")),
            },
            created_at: match id {
                0 => Some(0),
                _ if id % 19 == 2 => None,
                _ => Some(1_700_000_000_000_000 + id * 1_234_567_891),
            },
            flag: (id % 23 != 9).then_some(id % 3 == 0),
        })
        .collect()
}

pub(crate) fn batch(handle: &TableHandle, rows: &[Row]) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.id))),
        Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.qty))),
        Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.amount))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.name.as_deref()),
        )),
        Arc::new(
            TimestampMicrosecondArray::from_iter(rows.iter().map(|r| r.created_at))
                .with_timezone("+00:00"),
        ),
        Arc::new(BooleanArray::from_iter(rows.iter().map(|r| r.flag))),
    ];
    RecordBatch::try_new(handle.arrow_schema().clone(), columns).expect("batch in table schema")
}

/// `YYYY-MM-DD` of a day count since 1970-01-01 (proleptic Gregorian).
fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The readers' canonical `timestamptz` text.
fn timestamptz(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let (y, mo, d) = civil_date(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}+00:00",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

macro_rules! json {
    ($value:expr) => {
        serde_json::json!($value).to_string()
    };
}

/// The rows as the readers print them: one JSON object per line, keys in
/// schema order, lines sorted bytewise.
pub(crate) fn canonical(rows: &[Row]) -> String {
    let mut lines: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                r#"{{"id":{},"qty":{},"amount":{},"name":{},"created_at":{},"flag":{}}}"#,
                json!(r.id),
                json!(r.qty),
                json!(r.amount),
                json!(r.name),
                json!(r.created_at.map(timestamptz)),
                json!(r.flag),
            )
        })
        .collect();
    lines.sort();
    lines.iter().map(|l| format!("{l}\n")).collect()
}

pub(crate) fn read(engine: &str, catalog: &str, table: &str) -> String {
    let reader = format!("{}/read", get("TESTBED_READERS"));
    let started = Instant::now();
    let out = command(&reader)
        .args([engine, "--catalog", &catalog.to_lowercase(), table])
        .output()
        .unwrap_or_else(|e| panic!("running {reader}: {e}"));
    assert!(
        out.status.success(),
        "{engine} could not read {table} from {catalog} ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{engine} read {table} in {:?}", started.elapsed());
    String::from_utf8(out.stdout).expect("UTF-8 rows")
}

pub(crate) fn offsets(next: i64) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "topicberg.offsets".to_string(),
            format!(r#"{{"orders":{{"0":{next}}}}}"#),
        ),
        ("topicberg.run".to_string(), "it".to_string()),
    ])
}

pub(crate) async fn append(
    destination: &Destination,
    handle: &mut TableHandle,
    rows: &[Row],
    extra: BTreeMap<String, String>,
) -> CommittedSnapshot {
    let files = destination
        .write_data_files(handle, [batch(handle, rows)])
        .await
        .expect("write data files");
    assert_eq!(files.len(), 1, "a few hundred rows make one file");
    let file = &files[0];
    assert_eq!(file.record_count(), rows.len() as u64);
    assert!(file.file_path().contains("/data/"), "{}", file.file_path());
    assert!(
        file.file_path().ends_with("-00000.parquet"),
        "{}",
        file.file_path()
    );
    let size = destination
        .file_io()
        .new_input(file.file_path())
        .expect("input")
        .metadata()
        .await
        .expect("stat the data file")
        .size;
    assert_eq!(file.file_size_in_bytes(), size, "file_size_in_bytes");
    let ids: Vec<i64> = rows.iter().filter_map(|r| r.id).collect();
    let id_nulls = rows.iter().filter(|r| r.qty.is_none()).count() as u64;
    assert_eq!(
        file.null_value_counts().get(&2),
        Some(&id_nulls),
        "qty nulls"
    );
    assert_eq!(file.value_counts().get(&1), Some(&(rows.len() as u64)));
    assert_eq!(
        file.lower_bounds().get(&1).map(|d| d.to_string()),
        ids.iter().min().map(|v| v.to_string())
    );
    assert_eq!(
        file.upper_bounds().get(&1).map(|d| d.to_string()),
        ids.iter().max().map(|v| v.to_string())
    );
    assert!(file.column_sizes().get(&4).is_some_and(|s| *s > 0));
    destination
        .commit_append(handle, files, extra)
        .await
        .expect("commit the append")
}

/// Two appends, read back by every engine, with the summaries checked.
async fn two_appends_read_back(catalog: &str, format: FormatVersion, engines: &[&str]) {
    let (destination, namespace, mut handle) = orders_table(catalog, "it_append", format).await;
    let name = "orders";
    assert_eq!(handle.metadata().format_version(), format);
    assert!(handle.current_summary().is_none());

    let first = rows(0, 300);
    let second = rows(300, 250);
    let one = append(&destination, &mut handle, &first, offsets(300)).await;
    let two = append(&destination, &mut handle, &second, offsets(550)).await;

    assert_eq!(one.parent_snapshot_id, None);
    assert_eq!(two.parent_snapshot_id, Some(one.snapshot_id));
    assert_eq!((one.sequence_number, two.sequence_number), (1, 2));
    assert_eq!((one.attempts, two.attempts), (1, 1));
    for (committed, added, total) in [(&one, 300, 300), (&two, 250, 550)] {
        let s = &committed.summary;
        assert_eq!(s["added-records"], added.to_string(), "{s:?}");
        assert_eq!(s["total-records"], total.to_string(), "{s:?}");
        assert_eq!(s["added-data-files"], "1", "{s:?}");
        assert_eq!(s["total-delete-files"], "0", "{s:?}");
        assert_eq!(s["total-position-deletes"], "0", "{s:?}");
        assert_eq!(s["total-equality-deletes"], "0", "{s:?}");
        assert_eq!(s["changed-partition-count"], "1", "{s:?}");
        assert_eq!(s["topicberg.run"], "it", "{s:?}");
    }
    assert_eq!(two.summary["total-data-files"], "2");
    let sizes: u64 = [&one, &two]
        .iter()
        .map(|c| c.summary["added-files-size"].parse::<u64>().unwrap())
        .sum();
    assert_eq!(two.summary["total-files-size"], sizes.to_string());

    // What another process sees: a fresh load from the catalog.
    let reloaded = destination
        .load_table(&namespace, name)
        .await
        .expect("reload");
    let summaries = reloaded.snapshot_summaries();
    assert_eq!(summaries.len(), 2);
    assert_eq!(summaries[0].snapshot_id, two.snapshot_id);
    assert_eq!(summaries[0].operation, "append");
    assert_eq!(summaries[0].summary, two.summary);
    assert_eq!(
        reloaded.current_summary().unwrap()["topicberg.offsets"],
        r#"{"orders":{"0":550}}"#
    );
    assert_eq!(
        summaries[1].summary["topicberg.offsets"],
        r#"{"orders":{"0":300}}"#
    );
    if format == FormatVersion::V3 {
        assert_eq!(reloaded.metadata().next_row_id(), 550, "row lineage");
    }

    let table = format!("{}.{name}", namespace[0]);
    let all: Vec<Row> = first.into_iter().chain(second).collect();
    let expected = canonical(&all);
    assert_eq!(expected.lines().count(), 550);
    for engine in engines {
        let got = read(engine, catalog, &table);
        assert!(
            got == expected,
            "{engine} read {table} ({catalog}) differently: {} lines, first difference:\n got:  {:?}\n want: {:?}",
            got.lines().count(),
            got.lines().zip(expected.lines()).find(|(a, b)| a != b).map(|(a, _)| a),
            got.lines().zip(expected.lines()).find(|(a, b)| a != b).map(|(_, b)| b),
        );
    }

    destination
        .drop_table(&namespace, name, true)
        .await
        .unwrap_or_else(|e| panic!("{catalog}: {e}"));
    destination
        .catalog()
        .drop_namespace(&namespace)
        .await
        .unwrap_or_else(|e| panic!("{catalog}: {e}"));
}

const ALL_ENGINES: [&str; 3] = ["duckdb", "pyiceberg", "spark"];

#[tokio::test]
async fn iceberg_append_seaweed_v2_read_by_all_engines() {
    two_appends_read_back("SEAWEED", FormatVersion::V2, &ALL_ENGINES).await;
}

#[tokio::test]
async fn iceberg_append_fixture_v2_read_by_all_engines() {
    two_appends_read_back("FIXTURE", FormatVersion::V2, &ALL_ENGINES).await;
}

#[tokio::test]
async fn iceberg_append_fixture_v3_with_row_lineage_read_by_all_engines() {
    two_appends_read_back("FIXTURE", FormatVersion::V3, &ALL_ENGINES).await;
}

#[tokio::test]
async fn iceberg_append_seaweed_v3_read_by_all_engines() {
    two_appends_read_back("SEAWEED", FormatVersion::V3, &ALL_ENGINES).await;
}

/// The second writer starts from the metadata before the first commit:
/// its commit gets 409, reloads, and lands on top, both appends once.
async fn stale_parent_is_rebased(catalog: &str) {
    let (destination, namespace, mut fresh) =
        orders_table(catalog, "it_race", FormatVersion::V2).await;
    let name = "orders";
    let base = rows(0, 120);
    append(&destination, &mut fresh, &base, offsets(120)).await;
    let mut stale = fresh.clone();

    let winner_rows = rows(120, 200);
    let late_rows = rows(320, 180);
    let winner = append(&destination, &mut fresh, &winner_rows, offsets(320)).await;
    let late = append(&destination, &mut stale, &late_rows, offsets(500)).await;

    assert_eq!(winner.attempts, 1);
    assert_eq!(late.attempts, 2, "the stale commit must be retried once");
    assert_eq!(late.parent_snapshot_id, Some(winner.snapshot_id));
    assert_eq!(late.sequence_number, winner.sequence_number + 1);
    assert_eq!(late.summary["total-records"], "500");
    assert_eq!(late.summary["total-data-files"], "3");
    assert_eq!(late.summary["added-records"], "180");

    let reloaded = destination
        .load_table(&namespace, name)
        .await
        .expect("reload");
    let summaries = reloaded.snapshot_summaries();
    assert_eq!(summaries.len(), 3, "{summaries:?}");
    assert_eq!(summaries[0].snapshot_id, late.snapshot_id);

    // Offsets moved on but no row was written: an append without files.
    let empty = destination
        .commit_append(&mut stale, Vec::new(), offsets(520))
        .await
        .expect("an append without files");
    assert_eq!(empty.parent_snapshot_id, Some(late.snapshot_id));
    assert_eq!(empty.summary["total-records"], "500");
    assert_eq!(empty.summary["total-data-files"], "3");
    assert!(!empty.summary.contains_key("added-records"));

    let table = format!("{}.{name}", namespace[0]);
    let all: Vec<Row> = base
        .into_iter()
        .chain(winner_rows)
        .chain(late_rows)
        .collect();
    assert_eq!(read("duckdb", catalog, &table), canonical(&all));

    destination
        .drop_table(&namespace, name, true)
        .await
        .expect("drop");
    destination
        .catalog()
        .drop_namespace(&namespace)
        .await
        .expect("drop ns");
}

#[tokio::test]
async fn iceberg_append_stale_parent_is_rebased_on_seaweed() {
    stale_parent_is_rebased("SEAWEED").await;
}

#[tokio::test]
async fn iceberg_append_stale_parent_is_rebased_on_fixture() {
    stale_parent_is_rebased("FIXTURE").await;
}

#[test]
fn iceberg_append_timestamp_text_matches_the_readers() {
    assert_eq!(timestamptz(0), "1970-01-01T00:00:00.000000+00:00");
    assert_eq!(
        timestamptz(1_705_314_600_123_456),
        "2024-01-15T10:30:00.123456+00:00"
    );
    assert_eq!(
        timestamptz(951_782_400_000_001),
        "2000-02-29T00:00:00.000001+00:00"
    );
}

/// Objects past the part size go up as S3 multipart uploads.
#[tokio::test]
async fn iceberg_append_storage_streams_a_large_object_to_s3() {
    let destination = connect("FIXTURE").await;
    let location = format!(
        "s3://fixture-warehouse/{}/big.bin",
        unique_name("it_storage")
    );
    let chunk: Vec<u8> = (0..7 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let mut writer = destination
        .file_io()
        .new_output(&location)
        .expect("output")
        .writer()
        .await
        .expect("open");
    for _ in 0..3 {
        writer
            .write(chunk.clone().into())
            .await
            .expect("write a part");
    }
    writer.close().await.expect("complete the upload");
    let input = destination.file_io().new_input(&location).expect("input");
    assert_eq!(
        input.metadata().await.expect("stat").size,
        3 * chunk.len() as u64
    );
    let at = chunk.len() as u64 * 2 - 2;
    let reader = input.reader().await.expect("reader");
    let got = reader.read(at..at + 4).await.expect("range read");
    let want: Vec<u8> = (at..at + 4)
        .map(|i| ((i % chunk.len() as u64) % 251) as u8)
        .collect();
    assert_eq!(got.as_ref(), want.as_slice());
    destination
        .file_io()
        .delete(&location)
        .await
        .expect("delete");
    assert!(!destination
        .file_io()
        .exists(&location)
        .await
        .expect("exists"));
}

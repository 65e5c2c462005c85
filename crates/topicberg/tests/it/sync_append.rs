//! `topicberg sync` in append mode, end to end: real broker, real catalogs,
//! independent readers.

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::time::Instant;

use serde_json::Value;

use crate::support::{
    create_topic, produce, read_lines, read_rows, sample_messages, table_report, Catalog, Job,
    READERS,
};
use crate::testbed::{get, unique_name};

/// The seeds' first sync (8 customers, 40 orders), read identically by
/// every reader (DuckDB, PyIceberg, Spark, Polars, DataFusion, chDB, Trino,
/// Daft) with the documented types; then the seeds' second batch of 12, of
/// which the second sync reads only the new ones.
fn seeds_first_and_second_sync(catalog: Catalog) {
    let customers = unique_name("customers");
    let orders = unique_name("orders");
    create_topic(&customers, 1);
    create_topic(&orders, 1);
    produce(&customers, &sample_messages("customers", "first"));
    produce(&orders, &sample_messages("orders", "first"));
    let job = Job::new(catalog, &[&customers, &orders], "", "");

    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&customers))["records"], 8);
    assert_eq!(table_report(&report, &job.table(&orders))["records"], 40);
    for (topic, expected) in [(&customers, 8), (&orders, 40)] {
        let table = job.table(topic);
        let duckdb = read_lines("duckdb", catalog, &table);
        assert_eq!(duckdb.lines().count(), expected, "{table} via DuckDB");
        for engine in READERS.into_iter().filter(|e| *e != "duckdb") {
            assert_eq!(
                read_lines(engine, catalog, &table),
                duckdb,
                "{engine} differs from DuckDB on {table}"
            );
        }
    }
    // Types as documented: JSON integer -> long, decimal -> double,
    // ISO 8601 string -> timestamptz (UTC), the message key in base64.
    let rows = read_rows("duckdb", catalog, &job.table(&orders));
    let first = rows.iter().find(|r| r["id"] == 1).expect("order 1");
    assert!(
        first["id"].is_i64() && first["customer_id"].is_i64(),
        "{first}"
    );
    assert!(first["amount"].is_f64(), "amount must be a double: {first}");
    assert_eq!(
        first["created_at"], "2026-10-29T15:22:04.000000+00:00",
        "timestamptz in UTC"
    );
    assert_eq!(first["_kafka_key"], "MQ==", "key \"1\" in base64");
    assert_eq!(first["_op_type"], "c");
    assert_eq!(first["_kafka_partition"], 0);
    assert_eq!(first["_kafka_offset"], 0);
    let offsets: BTreeSet<i64> = rows
        .iter()
        .map(|r| r["_kafka_offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, (0..40).collect(), "every offset exactly once");

    // The seeds' second batch: 4 customers, 8 orders.
    produce(&customers, &sample_messages("customers", "second"));
    produce(&orders, &sample_messages("orders", "second"));
    let report = job.sync();
    assert_eq!(
        table_report(&report, &job.table(&customers))["records"],
        4,
        "only the new messages are read"
    );
    assert_eq!(
        table_report(&report, &job.table(&orders))["records"],
        8,
        "only the new messages are read"
    );
    let customers_rows = read_rows("spark", catalog, &job.table(&customers));
    let orders_rows = read_rows("spark", catalog, &job.table(&orders));
    assert_eq!(
        customers_rows.len() + orders_rows.len(),
        60,
        "append mode keeps every message"
    );
    let liam: Vec<&Value> = customers_rows.iter().filter(|r| r["id"] == 3).collect();
    assert_eq!(
        liam.len(),
        2,
        "append mode keeps both versions of customer 3"
    );

    // A third sync with nothing new commits nothing.
    let report = job.sync();
    for topic in [&customers, &orders] {
        let t = table_report(&report, &job.table(topic));
        assert_eq!(t["status"], "unchanged", "{t}");
        assert_eq!(t["records"], 0);
    }
}

#[test]
fn sync_append_seeds_on_seaweed_catalog() {
    seeds_first_and_second_sync(Catalog::Seaweed);
}

#[test]
fn sync_append_seeds_on_reference_catalog() {
    seeds_first_and_second_sync(Catalog::Fixture);
}

/// Kills the sync with SIGKILL at every stage (while fetching, after the
/// data files are written, between two tables' commits, between the
/// Iceberg commits and the group commit), reruns it, and checks that the
/// tables hold every produced message exactly once.
#[test]
fn sync_crash_at_any_point_never_loses_or_duplicates_a_message() {
    let topics = [unique_name("crash_a"), unique_name("crash_b")];
    for t in &topics {
        create_topic(t, 3);
    }
    let job = Job::new(
        Catalog::Seaweed,
        &[&topics[0], &topics[1]],
        "",
        "[sync]\nbatch_rows = 100\n",
    );
    let mut produced = 0usize;
    let mut next_id = 0usize;
    let mut produce_round = |n: usize| {
        for t in &topics {
            let messages: Vec<(String, String)> = (next_id..next_id + n)
                .map(|i| {
                    (
                        format!("k{i}"),
                        format!(r#"{{"id":{i},"topic":"{t}","amount":{i}.5}}"#),
                    )
                })
                .collect();
            produce(t, &messages);
            produced += n;
        }
        next_id += n;
    };
    let faults = [
        "after_records:450",
        "before_iceberg_commit",
        "after_first_table_commit",
        "before_group_commit",
    ];
    for fault in faults {
        produce_round(400);
        let out = job.run("sync", &[], &[("TOPICBERG_FAULT", fault)]);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGKILL),
            "the sync should have been killed at {fault}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    produce_round(100);
    job.sync();
    job.sync();

    let mut total = 0;
    for t in &topics {
        let rows = read_rows("duckdb", Catalog::Seaweed, &job.table(t));
        let positions: BTreeSet<(i64, i64)> = rows
            .iter()
            .map(|r| {
                (
                    r["_kafka_partition"].as_i64().unwrap(),
                    r["_kafka_offset"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            positions.len(),
            rows.len(),
            "{t}: a message was written twice"
        );
        let ids: BTreeSet<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        assert_eq!(
            ids,
            (0..next_id as i64).collect(),
            "{t}: every produced id exactly once"
        );
        total += rows.len();
    }
    assert_eq!(total, produced);
}

/// SASL_PLAINTEXT with SCRAM-SHA-512 and with PLAIN syncs; a wrong
/// password fails `check` with an authentication error, no stack trace.
#[test]
fn sync_over_sasl_scram_and_plain_and_wrong_password_fails_check() {
    let topic = unique_name("sasl");
    create_topic(&topic, 2);
    let messages: Vec<(String, String)> = (0..25)
        .map(|i| (format!("{i}"), format!(r#"{{"id":{i}}}"#)))
        .collect();
    produce(&topic, &messages);
    let sasl = get("TESTBED_KAFKA_SASL_BOOTSTRAP");
    for (mechanism, user, password) in [
        (
            "SCRAM-SHA-512",
            get("TESTBED_KAFKA_SCRAM_USER"),
            get("TESTBED_KAFKA_SCRAM_PASSWORD"),
        ),
        (
            "PLAIN",
            get("TESTBED_KAFKA_PLAIN_USER"),
            get("TESTBED_KAFKA_PLAIN_PASSWORD"),
        ),
    ] {
        let source = format!(
            "security_protocol = \"SASL_PLAINTEXT\"\nsasl_mechanism = \"{mechanism}\"\nsasl_username = \"{user}\"\nsasl_password = \"{password}\"\n"
        );
        let job = Job::new(Catalog::Seaweed, &[&topic], &source, "");
        let text = std::fs::read_to_string(&job.path)
            .unwrap()
            .replace(&get("TESTBED_KAFKA_BOOTSTRAP"), &sasl);
        std::fs::write(&job.path, text).unwrap();
        let report = job.sync();
        assert_eq!(
            table_report(&report, &job.table(&topic))["records"],
            25,
            "{mechanism}"
        );
        assert_eq!(
            read_rows("duckdb", Catalog::Seaweed, &job.table(&topic)).len(),
            25,
            "{mechanism}"
        );

        let wrong = std::fs::read_to_string(&job.path)
            .unwrap()
            .replace(&password, "not-the-password");
        std::fs::write(&job.path, wrong).unwrap();
        let out = job.run("check", &[], &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{mechanism}: {stdout}{stderr}");
        assert!(
            stdout.contains("authentication failed"),
            "{mechanism}: {stdout}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("backtrace"),
            "{stderr}"
        );
        assert!(!stdout.contains("not-the-password") && !stderr.contains("not-the-password"));
    }
}

/// A broker address that does not answer fails `check` within 30 s with
/// `failed to ping kafka brokers: <cause>`.
#[test]
fn check_with_unreachable_broker_fails_fast_with_the_cause() {
    let job = Job::new(Catalog::Seaweed, &["nothing"], "", "");
    let text = std::fs::read_to_string(&job.path)
        .unwrap()
        .replace(&get("TESTBED_KAFKA_BOOTSTRAP"), "127.0.0.1:9");
    std::fs::write(&job.path, text).unwrap();
    let started = Instant::now();
    let out = job.run("check", &[], &[]);
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("failed to ping kafka brokers: "),
        "{stdout}"
    );
    assert!(elapsed.as_secs() < 30, "check took {elapsed:?}");
}

/// Nested objects and arrays land as JSON text, and still do on a later
/// sync into the existing table (the column keeps its JSON marker).
#[test]
fn sync_nested_json_fields_land_as_json_text_across_syncs() {
    let topic = unique_name("nested");
    create_topic(&topic, 1);
    let message = |i: i64| {
        (
            i.to_string(),
            format!(
                r#"{{"id":{i},"address":{{"city":"Pune","zip":"4110{i}"}},"tags":["a",{i}],"ok":true}}"#
            ),
        )
    };
    produce(&topic, &[message(1), message(2)]);
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    job.sync();
    produce(&topic, &[message(3)]);
    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&topic))["records"], 1);
    let rows = read_rows("duckdb", Catalog::Seaweed, &job.table(&topic));
    assert_eq!(rows.len(), 3);
    let third = rows.iter().find(|r| r["id"] == 3).unwrap();
    assert_eq!(third["address"], r#"{"city":"Pune","zip":"41103"}"#);
    assert_eq!(third["tags"], r#"["a",3]"#);
    assert_eq!(third["ok"], true);
}

/// The embedded default catalog: a SQLite file and a local folder that
/// PyIceberg's SqlCatalog, DuckDB, Spark, Polars, DataFusion, Daft and Trino
/// (a JDBC catalog on the SQLite file, created for the read) read as they
/// are.
#[test]
fn sync_append_into_embedded_catalog_is_read_by_every_reader() {
    let orders = unique_name("orders");
    create_topic(&orders, 2);
    produce(&orders, &sample_messages("orders", "first"));
    let job = Job::embedded(&[&orders]);
    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&orders))["records"], 40);
    produce(&orders, &sample_messages("orders", "second"));
    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&orders))["records"], 8);
    let pyiceberg = job.read_embedded("pyiceberg", &job.table(&orders));
    assert_eq!(pyiceberg.lines().count(), 48);
    // Not chDB: its reader refuses a local folder outside its user files
    // ("File path ... is not inside . (PATH_ACCESS_DENIED)").
    for engine in ["duckdb", "spark", "polars", "datafusion", "daft", "trino"] {
        assert_eq!(
            job.read_embedded(engine, &job.table(&orders)),
            pyiceberg,
            "{engine} differs from PyIceberg"
        );
    }
}

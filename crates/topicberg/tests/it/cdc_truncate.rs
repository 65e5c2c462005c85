//! `TRUNCATE` of a PostgreSQL table reaches the Iceberg table through
//! Debezium (`op` t, emitted with `skipped.operations=none`): by default
//! the rows from before it are deleted in the sync's one commit, those
//! after it stay; `on_truncate = "fail"` stops the sync at it, naming the
//! topic, partition and offset, and commits nothing.

use std::time::Duration;

use serde_json::Value;

use crate::support::cdc::{change_job, copy_rows, psql, query_json, read_changes, Connector};
use crate::testbed::unique_name;

const PARTITIONS: i32 = 3;

fn source_rows(table: &str) -> Vec<Value> {
    query_json(&format!("select id, name from {table} order by id"))
}

/// Waits until `topic` holds `n` messages.
fn wait_for(topic: &str, n: usize) {
    read_changes(topic, Duration::from_secs(60), |c| c.len() >= n);
}

#[test]
fn a_truncate_deletes_the_rows_before_it_in_one_commit_and_keeps_those_after() {
    let (kept, refused) = (unique_name("cdc_trunc"), unique_name("cdc_trunc_fail"));
    for t in [&kept, &refused] {
        psql(&format!("create table {t} (id int primary key, name text)"));
        psql(&format!(
            "insert into {t} select i, 'first' || i from generate_series(1, 10) i"
        ));
    }
    let connector = Connector::start(&[&kept, &refused], PARTITIONS, false);
    let (topic, refused_topic) = (connector.topic(&kept), connector.topic(&refused));
    let job = change_job(&topic, &kept, "");
    wait_for(&topic, 10);
    let first = job.sync();
    // The events by operation: the connector's snapshot reads.
    let operations = |report: &Value| report["tables"][0]["change_operations"].clone();
    assert_eq!(
        operations(&first),
        serde_json::json!({"created": 0, "read": 10, "updated": 0, "deleted": 0,
            "truncated": 0, "unstated": 0}),
        "{first:#}"
    );
    let copy = || copy_rows("duckdb", &job, &kept).expect("DuckDB reads the table");
    assert_eq!(copy(), source_rows(&kept));

    // Rows before the truncate in this sync, and the table's: all gone;
    // the rows after it, updated too, stay.
    psql(&format!(
        "insert into {kept} select i, 'doomed' || i from generate_series(11, 15) i"
    ));
    psql(&format!("update {kept} set name = 'doomed' where id = 2"));
    psql(&format!("truncate {kept}"));
    psql(&format!(
        "insert into {kept} select i, 'after' || i from generate_series(14, 18) i"
    ));
    psql(&format!(
        "update {kept} set name = 'after again' where id = 16"
    ));
    wait_for(&topic, 10 + 5 + 1 + 1 + 5 + 1);
    let before = job.sync();
    assert_eq!(
        operations(&before),
        serde_json::json!({"created": 10, "read": 0, "updated": 2, "deleted": 0,
            "truncated": 1, "unstated": 0}),
        "{before:#}"
    );
    assert_eq!(copy(), source_rows(&kept));
    assert_eq!(source_rows(&kept).len(), 5);
    let snapshots = |report: &Value| report["tables"][0]["snapshot_id"].clone();
    // A truncate and nothing else: the table empties.
    psql(&format!("truncate {kept}"));
    wait_for(&topic, 24);
    let after = job.sync();
    assert_ne!(snapshots(&before), snapshots(&after), "{after}");
    assert_eq!(copy(), Vec::<Value>::new());
    // And fills again.
    psql(&format!("insert into {kept} values (1, 'again')"));
    wait_for(&topic, 25);
    job.sync();
    assert_eq!(copy(), source_rows(&kept));

    // on_truncate = "fail": the sync fails at the truncate, nothing of
    // the table is committed, and the next sync meets it again.
    let failing = change_job(&refused_topic, &refused, "on_truncate = \"fail\"\n");
    psql(&format!("truncate {refused}"));
    wait_for(&refused_topic, 11);
    for _ in 0..2 {
        let stderr = failing.sync_failing();
        assert!(
            stderr.contains(&format!("{refused_topic}["))
                && stderr.contains("a truncate of the source table")
                && stderr.contains("on_truncate"),
            "{stderr}"
        );
        // The table may have been created; it has no row.
        let rows = copy_rows("duckdb", &failing, &refused).unwrap_or_default();
        assert_eq!(rows, Vec::<Value>::new());
    }
    drop(connector);
}

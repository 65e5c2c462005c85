//! A change stream keyed by payload fields (`dedup_keys = ["code"]`): a
//! PostgreSQL table without a primary key or unique index (Debezium
//! writes its events without a Kafka key, on any partition; it would key
//! them by a unique index) and with `REPLICA IDENTITY FULL`, keyed on its
//! `code`. A delete names its row by its `before`; an update that changes
//! `code` moves the row (the old key's row goes); the Kafka tombstones name
//! no row and are passed. The table equals the source after each round.
//! With the default identity a delete's `before` lacks the key: a null
//! value fails the sync naming the fix and commits nothing; Debezium's
//! placeholder for a `NOT NULL` column (`""`) names no row, which the sync
//! logs as a warning.

use std::time::Duration;

use serde_json::Value;

use crate::support::cdc::{
    change_job, copy_rows, psql, query_json, read_changes, Change, Connector,
};
use crate::testbed::unique_name;

fn source_rows(table: &str) -> Vec<Value> {
    query_json(&format!("select id, code, name from {table} order by id"))
}

/// Runs `sql` and waits until the topic holds `total` messages after its
/// `messages`.
fn change(topic: &str, total: &mut usize, sql: &str, messages: usize) {
    psql(sql);
    *total += messages;
    read_changes(topic, Duration::from_secs(60), |c| c.len() >= *total);
}

/// [`change`] for a statement that makes at least one event: waits also
/// for an event at or past the statement's place in the source's log (a
/// count alone passes early when a statement makes more events than
/// expected).
fn change_seen(topic: &str, total: &mut usize, sql: &str, messages: usize) {
    let before: i64 = psql("select pg_current_wal_lsn() - '0/0'")
        .parse()
        .expect("an LSN");
    psql(sql);
    *total += messages;
    read_changes(topic, Duration::from_secs(60), |c| {
        c.len() >= *total && c.iter().any(|c| lsn(c) >= Some(before))
    });
}

/// An event's `source.lsn` (`None` for a tombstone).
fn lsn(change: &Change) -> Option<i64> {
    change.event()?["source"]["lsn"].as_i64()
}

/// The topic's `total` events, one line each (partition, op, LSN, `after`),
/// for a failure's message.
fn events(topic: &str, total: usize) -> String {
    let changes = read_changes(topic, Duration::from_secs(60), |c| c.len() >= total);
    let line = |c: &Change| {
        let event = c.event();
        format!(
            "p{} {:?} lsn {} after {}",
            c.partition,
            c.op(),
            event.map_or(Value::Null, |e| e["source"]["lsn"].clone()),
            event.map_or(Value::Null, |e| e["after"].clone()),
        )
    };
    changes.iter().map(line).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_change_stream_keyed_by_payload_fields_follows_a_table_without_primary_key() {
    let table = unique_name("cdc_paykey");
    psql(&format!(
        "create table {table} (id int not null, code text not null, name text);\
         alter table {table} replica identity full;\
         insert into {table} select i, 'c' || i, 'n' || i from generate_series(1, 5) i"
    ));
    let connector = Connector::start(&[&table], 2, true);
    let topic = connector.topic(&table);
    let job = change_job(&topic, &table, "dedup_keys = [\"code\"]\n");
    let mut total = 5;
    let snapshot = read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
    assert!(
        snapshot.iter().all(|c| c.key().is_null()),
        "a table without a primary key or unique index has no message key"
    );
    job.sync();
    assert_eq!(copy_rows("duckdb", &job, &table), Some(source_rows(&table)));
    let rounds: [&[(String, usize)]; 2] = [
        &[
            (format!("insert into {table} values (6, 'c6', 'six')"), 1),
            (format!("update {table} set name = 'two' where id = 2"), 1),
            (format!("delete from {table} where id = 3"), 2),
        ],
        &[
            // The key moves: the row of c4 goes, x4 comes.
            (
                format!("update {table} set code = 'x4', name = 'four' where id = 4"),
                1,
            ),
            (format!("delete from {table} where id = 1"), 2),
            (
                format!("insert into {table} values (7, 'c1', 'c1 again')"),
                1,
            ),
            (format!("update {table} set name = 'six!' where id = 6"), 1),
        ],
    ];
    for (round, statements) in rounds.iter().enumerate() {
        for (sql, messages) in *statements {
            change_seen(&topic, &mut total, sql, *messages);
        }
        job.sync();
        assert_eq!(
            copy_rows("duckdb", &job, &table),
            Some(source_rows(&table)),
            "round {round}; the topic's events:\n{}",
            events(&topic, total)
        );
    }
    // The other readers agree at the end.
    for engine in ["pyiceberg", "spark", "trino"] {
        assert_eq!(
            copy_rows(engine, &job, &table),
            Some(source_rows(&table)),
            "{engine}"
        );
    }
    drop(connector);
}

/// A table keyed on `code` (besides its primary key `id`) under the
/// default replica identity: a delete's `before` holds `id` only, and
/// Debezium fills a `NOT NULL` column's value with a placeholder (`""`).
fn default_identity_delete(code: &str) -> (Connector, crate::support::Job, String) {
    let table = unique_name("cdc_paykey_default");
    psql(&format!(
        "create table {table} (id int primary key, code {code} unique, name text);\
         insert into {table} select i, 'c' || i, 'n' || i from generate_series(1, 3) i"
    ));
    let connector = Connector::start(&[&table], 1, true);
    let topic = connector.topic(&table);
    let job = change_job(&topic, &table, "dedup_keys = [\"code\"]\n");
    let mut total = 0;
    change(&topic, &mut total, "select 1", 3);
    job.sync();
    change(
        &topic,
        &mut total,
        &format!("delete from {table} where id = 2"),
        2,
    );
    (connector, job, table)
}

#[test]
fn a_payload_keyed_delete_without_its_key_in_before_fails_naming_the_fix() {
    // A nullable key column: `before` has no value for it.
    let (connector, job, table) = default_identity_delete("text");
    for _ in 0..2 {
        let failure = job.sync_failing();
        assert!(failure.contains("REPLICA IDENTITY FULL"), "{failure}");
        assert!(failure.contains(&connector.topic(&table)), "{failure}");
    }
    let rows = copy_rows("duckdb", &job, &table).expect("the first sync's rows");
    assert_eq!(rows.len(), 3, "nothing committed after the failing delete");
    drop(connector);
}

#[test]
fn a_payload_keyed_delete_naming_no_row_is_a_warning_and_deletes_nothing() {
    // A NOT NULL key column: `before` has Debezium's placeholder "".
    let (connector, job, table) = default_identity_delete("text not null");
    let log = job.scratch_file("sync.log");
    job.sync_logged(&log);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("delete events named rows the table does not have")
            && text.contains("deletes=1")
            && text.contains("REPLICA IDENTITY FULL"),
        "{text}"
    );
    let rows = copy_rows("duckdb", &job, &table).expect("rows");
    assert_eq!(rows.len(), 3, "the row of the delete stays: {rows:?}");
    drop(connector);
}

#[test]
fn flattened_deletes_that_come_as_tombstones_only_are_a_warning_with_payload_keys() {
    let table = unique_name("cdc_paykey_flat");
    psql(&format!(
        "create table {table} (id int primary key, code text not null unique, name text);\
         alter table {table} replica identity full;\
         insert into {table} select i, 'c' || i, 'n' || i from generate_series(1, 3) i"
    ));
    // ExtractNewRecordState's default: a delete is a tombstone only.
    let flatten = [
        ("transforms", "unwrap"),
        (
            "transforms.unwrap.type",
            "io.debezium.transforms.ExtractNewRecordState",
        ),
    ];
    let connector = Connector::start_with(&[&table], 1, true, &flatten);
    let topic = connector.topic(&table);
    let job = change_job(&topic, &table, "dedup_keys = [\"code\"]\n");
    let mut total = 0;
    change(&topic, &mut total, "select 1", 3);
    change(
        &topic,
        &mut total,
        &format!("delete from {table} where id = 2"),
        1,
    );
    let log = job.scratch_file("sync.log");
    job.sync_logged(&log);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("tombstones without delete events")
            && text.contains("tombstones=1")
            && text.contains("delete.tombstone.handling.mode=rewrite"),
        "{text}"
    );
    let rows = copy_rows("duckdb", &job, &table).expect("rows");
    assert_eq!(rows.len(), 3, "the tombstone's row stays: {rows:?}");
    drop(connector);
}

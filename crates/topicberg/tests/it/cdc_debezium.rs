//! A PostgreSQL table's Debezium change stream (JSON with the Connect
//! schema) synced with `change_events = "debezium"`: after each round of
//! inserts, updates, deletes and primary-key changes and a sync, the
//! Iceberg table equals `SELECT * FROM` the source table, value for value
//! with exact types, read by DuckDB. Without the schema
//! (`schemas.enable=false`) the columns are inferred from the values.

use std::time::Duration;

use serde_json::Value;

use crate::support::cdc::{
    change_job, copy_rows, psql, query_json, read_changes, topic_partitions, Connector,
};
use crate::support::{try_read, wait_until, Catalog, Job};
use crate::testbed::unique_name;

const PARTITIONS: i32 = 3;

/// The source table's rows in the readers' canonical form (see
/// scripts/readers/common.py), ordered by id; `more`: further columns.
pub(crate) fn source_rows(table: &str, more: &str) -> Vec<Value> {
    query_json(&format!(
        "select id, name, amount::text as amount,
                to_char(at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"') as at,
                to_char(d, 'YYYY-MM-DD') as d, u::text as u, j::text as j,
                replace(encode(b, 'base64'), E'\\n', '') as b, tags {more}
         from {table} order by id"
    ))
}

/// [`copy_rows`] by DuckDB, which must read the table.
fn table_rows(job: &Job, table: &str) -> Vec<Value> {
    copy_rows("duckdb", job, table).expect("DuckDB reads the table")
}

/// Runs `sql` in the source database; `messages` is how many messages its
/// changes add to the topic (an insert or update 1, a delete 2 with its
/// tombstone, a primary-key change 3: delete, tombstone, create).
fn change(total: &mut usize, sql: &str, messages: usize) {
    psql(sql);
    *total += messages;
}

#[test]
fn a_debezium_stream_with_its_schema_keeps_the_table_equal_to_the_source_after_each_round() {
    let table = unique_name("cdc_orders");
    psql(&format!(
        "create table {table} (id int primary key, name text, amount numeric(12,3),
           at timestamptz, d date, u uuid, j jsonb, b bytea, tags text[])"
    ));
    let row = |id: i64, name: &str| {
        format!(
            "({id}, '{name}', {id}.5{id}, '2026-12-07 01:02:03.{id:06}+02', '2026-12-{day:02}',
              'a0eebc99-9c0b-4ef8-bb6d-6bb9bd3800{id:02}', '{{\"id\": {id}, \"tags\": [\"{name}\"]}}',
              '\\x00{id:02}ff', array['{name}', null, 'x'])",
            day = id % 28 + 1
        )
    };
    // Rows before the connector starts come as its snapshot (`op` r).
    psql(&format!(
        "insert into {table} values {}, {}",
        row(1, "one"),
        row(2, "two")
    ));
    let connector = Connector::start(&[&table], PARTITIONS, true);
    let topic = connector.topic(&table);
    let mut total = 2;
    let job = change_job(&topic, &table, "");
    let insert = |ids: std::ops::Range<i64>, name: &str| {
        let rows: Vec<String> = ids.map(|i| row(i, name)).collect();
        format!("insert into {table} values {}", rows.join(", "))
    };
    // discover shows the columns the table will get: `after`'s, typed.
    read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
    let out = job.run("discover", &["--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    let columns: Vec<String> = found[0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {}", c[0].as_str().unwrap(), c[1].as_str().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            "id int",
            "name string",
            "amount decimal(12,3)",
            "at timestamptz",
            "d date",
            "u uuid",
            "j string",
            "b binary",
            "tags list<string>"
        ]
    );
    let block = found[0]["streams_block"].as_str().unwrap();
    assert!(block.contains("change_events = \"debezium\""), "{block}");
    let rounds: [Vec<(String, usize)>; 2] = [
        vec![
            (insert(3..8, "new"), 5),
            (
                format!("update {table} set name = 'renamed', amount = -0.001 where id = 3"),
                1,
            ),
            (format!("delete from {table} where id = 4"), 2),
            (format!("update {table} set id = 40 where id = 5"), 3),
            (
                format!("update {table} set tags = null, j = null, b = null where id = 1"),
                1,
            ),
        ],
        vec![
            (
                format!("update {table} set name = 'again' where id = 40"),
                1,
            ),
            (format!("delete from {table} where id = 2"), 2),
            (insert(8..10, "late"), 2),
            (format!("update {table} set id = 4 where id = 8"), 3),
            (
                format!("update {table} set amount = 999999999.999 where id = 6"),
                1,
            ),
            // New source columns: new columns of their types in the table.
            (
                format!("alter table {table} add column note varchar(20), add column seen bigint"),
                0,
            ),
            (
                format!("update {table} set note = 'noted', seen = 1 << 40 where id in (3, 6)"),
                2,
            ),
            (insert(10..11, "after_alter"), 1),
        ],
    ];
    for (round, statements) in rounds.iter().enumerate() {
        for (sql, messages) in statements {
            change(&mut total, sql, *messages);
        }
        read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
        job.sync();
        let more = if round == 1 { ", note, seen" } else { "" };
        let expected = source_rows(&table, more);
        assert_eq!(
            table_rows(&job, &table),
            expected,
            "round {round}: the table differs from the source"
        );
    }
    // Every other reader agrees at the end.
    let expected = source_rows(&table, ", note, seen");
    for engine in ["pyiceberg", "spark", "trino"] {
        assert_eq!(
            copy_rows(engine, &job, &table),
            Some(expected.clone()),
            "{engine} reads another table than the source"
        );
    }
    drop(connector);
}

#[test]
fn a_debezium_stream_without_its_schema_keeps_the_table_equal_to_the_source() {
    let table = unique_name("cdc_plain");
    psql(&format!(
        "create table {table} (id int primary key, name text, n bigint, ok boolean)"
    ));
    let connector = Connector::start(&[&table], PARTITIONS, false);
    let topic = connector.topic(&table);
    let job = change_job(&topic, &table, "");
    let mut total = 0;
    change(
        &mut total,
        &format!("insert into {table} select i, 'n' || i, i * 1000000000000, i % 2 = 0 from generate_series(1, 20) i"),
        20,
    );
    change(
        &mut total,
        &format!("update {table} set name = null, ok = null where id = 7"),
        1,
    );
    change(
        &mut total,
        &format!("delete from {table} where id in (3, 4)"),
        4,
    );
    change(
        &mut total,
        &format!("update {table} set id = 30 where id = 5"),
        3,
    );
    let changes = read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
    let report = job.sync();
    // The events by operation: 20 inserts and the new key of the key
    // change; one update; two deletes and the key change's old key (the
    // Kafka tombstones after deletes are not events).
    assert_eq!(
        report["tables"][0]["change_operations"],
        serde_json::json!({"created": 21, "read": 0, "updated": 1, "deleted": 3,
            "truncated": 0, "unstated": 0}),
        "{report:#}"
    );
    let expected = query_json(&format!("select id, name, n, ok from {table} order by id"));
    assert_eq!(expected.len(), 18);
    assert_eq!(table_rows(&job, &table), expected);
    // `_cdc_timestamp`, `_cdc_lsn` and `_cdc_op`: the source time
    // (`source.ts_ms`), log position (`source.lsn`) and operation (`op`) of
    // each key's last event.
    let mut source_time = std::collections::BTreeMap::new();
    for c in &changes {
        if let Some(e) = c.event().filter(|e| !e["after"].is_null()) {
            let ms = e["source"]["ts_ms"].as_i64().expect("source.ts_ms");
            let at = chrono::DateTime::from_timestamp_millis(ms).unwrap();
            let text = at.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string();
            let lsn = e["source"]["lsn"].as_i64().expect("source.lsn");
            let op = e["op"].as_str().expect("op").to_owned();
            source_time.insert(e["after"]["id"].as_i64().unwrap(), (text, lsn, op));
        }
    }
    let name = format!("{}_topics.{table}", job.name);
    let raw = String::from_utf8(try_read("duckdb", Catalog::Seaweed, &name).stdout).unwrap();
    for line in raw.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        let id = row["id"].as_i64().unwrap();
        let (time, lsn, op) = &source_time[&id];
        assert_eq!(row["_cdc_timestamp"].as_str(), Some(time.as_str()), "{row}");
        assert_eq!(row["_cdc_lsn"].as_i64(), Some(*lsn), "{row}");
        assert_eq!(row["_cdc_op"].as_str(), Some(op.as_str()), "{row}");
    }
    drop(connector);
}

#[test]
fn sync_follow_keeps_a_debezium_tables_copy_equal_to_the_source_as_it_changes() {
    let table = unique_name("cdc_follow");
    psql(&format!(
        "create table {table} (id int primary key, name text, amount numeric(10,2))"
    ));
    psql(&format!(
        "insert into {table} select i, 'n' || i, i * 1.25 from generate_series(1, 10) i"
    ));
    let connector = Connector::start(&[&table], PARTITIONS, true);
    let topic = connector.topic(&table);
    // The topic exists once the snapshot's first change is written (a
    // follower started before would fail naming it: missing_topics).
    topic_partitions(&topic, Duration::from_secs(60));
    let job = change_job(&topic, &table, "");
    job.append("[sync]\ncommit_interval = \"1s\"\nstop_timeout = \"30s\"\n");
    let (report, log) = (
        job.scratch_file("report.json"),
        job.scratch_file("follow.log"),
    );
    let mut follower = job.spawn_follow(&report, &log, &[]);
    let rounds = [
        format!("update {table} set name = 'u' || id where id % 3 = 0"),
        format!("delete from {table} where id in (2, 5)"),
        format!("update {table} set id = id + 100, amount = -amount where id = 7"),
        format!("insert into {table} select i, null, i from generate_series(11, 15) i"),
    ];
    for (round, sql) in rounds.iter().enumerate() {
        psql(sql);
        let expected = query_json(&format!(
            "select id, name, amount::text as amount from {table} order by id"
        ));
        wait_until(
            &format!("round {round} in the followed table"),
            Duration::from_secs(90),
            || copy_rows("duckdb", &job, &table).as_ref() == Some(&expected),
        );
    }
    assert_eq!(
        unsafe { libc::kill(follower.id() as i32, libc::SIGTERM) },
        0
    );
    let status = follower.wait().unwrap();
    assert!(
        status.success(),
        "the follower failed ({status}):\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    drop(connector);
}

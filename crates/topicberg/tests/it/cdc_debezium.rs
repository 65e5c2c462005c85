//! A PostgreSQL table's Debezium change stream (JSON with the Connect
//! schema) synced with `change_events = "debezium"`: after each round of
//! inserts, updates, deletes and primary-key changes and a sync, the
//! Iceberg table equals `SELECT * FROM` the source table, value for value
//! with exact types, read by DuckDB. Without the schema
//! (`schemas.enable=false`) the columns are inferred from the values.

use std::time::Duration;

use serde_json::Value;

use crate::support::cdc::{psql, query_json, read_changes, Connector};
use crate::support::{read_rows, Catalog, Job};
use crate::testbed::unique_name;

const PARTITIONS: i32 = 3;

/// The source table's rows in the readers' canonical form (see
/// scripts/readers/common.py), ordered by id; `more`: further columns.
fn source_rows(table: &str, more: &str) -> Vec<Value> {
    query_json(&format!(
        "select id, name, amount::text as amount,
                to_char(at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"') as at,
                to_char(d, 'YYYY-MM-DD') as d, u::text as u, j::text as j,
                replace(encode(b, 'base64'), E'\\n', '') as b, tags {more}
         from {table} order by id"
    ))
}

/// The Iceberg table's payload columns (metadata columns start with `_`),
/// ordered by id.
fn table_rows(job: &Job, table: &str) -> Vec<Value> {
    let mut rows: Vec<Value> = read_rows(
        "duckdb",
        Catalog::Seaweed,
        &format!("{}_topics.{table}", job.name),
    )
    .into_iter()
    .map(|mut row| {
        row.as_object_mut()
            .unwrap()
            .retain(|k, _| !k.starts_with('_'));
        row
    })
    .collect();
    rows.sort_by_key(|r| r["id"].as_i64());
    rows
}

/// A job syncing the change stream `topic` into `table`.
fn cdc_job(topic: &str, table: &str) -> Job {
    Job::new(
        Catalog::Seaweed,
        &[topic],
        "",
        &format!(
            "[[streams]]\ntopic = \"{topic}\"\nmode = \"upsert\"\nchange_events = \"debezium\"\ntable = \"{table}\"\n"
        ),
    )
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
    let job = cdc_job(&topic, &table);
    let insert = |ids: std::ops::Range<i64>, name: &str| {
        let rows: Vec<String> = ids.map(|i| row(i, name)).collect();
        format!("insert into {table} values {}", rows.join(", "))
    };
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
    let job = cdc_job(&topic, &table);
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
    read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
    job.sync();
    let expected = query_json(&format!("select id, name, n, ok from {table} order by id"));
    assert_eq!(expected.len(), 18);
    assert_eq!(table_rows(&job, &table), expected);
    drop(connector);
}

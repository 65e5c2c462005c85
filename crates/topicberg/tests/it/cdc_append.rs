//! A change stream in append mode: the table is the log of the events,
//! one row per event (not per key): an insert, update or snapshot read is
//! its `after`, a delete its `before` (`_cdc_op` d), a truncate a row of
//! nulls (`_cdc_op` t); the Kafka tombstones are passed. Against the test
//! bed's PostgreSQL and Debezium, over two syncs; DuckDB, PyIceberg, Spark
//! and Trino read the same log.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::cdc::{psql, read_changes, Connector};
use crate::support::{read_rows, Catalog, Job};
use crate::testbed::unique_name;

/// `(partition, offset) -> {id, name, op, lsn}` of each row.
fn log_rows(engine: &str, job: &Job, table: &str) -> BTreeMap<(i64, i64), Value> {
    let name = format!("{}_topics.{table}", job.name);
    read_rows(engine, Catalog::Seaweed, &name)
        .into_iter()
        .map(|r| {
            let at = (
                r["_kafka_partition"].as_i64().unwrap(),
                r["_kafka_offset"].as_i64().unwrap(),
            );
            let row =
                json!({"id": r["id"], "name": r["name"], "op": r["_cdc_op"], "lsn": r["_cdc_lsn"]});
            (at, row)
        })
        .collect()
}

#[test]
fn an_append_of_change_events_keeps_every_event_as_a_row() {
    let table = unique_name("cdc_log");
    psql(&format!(
        "create table {table} (id int primary key, name text);\
         alter table {table} replica identity full;\
         insert into {table} values (1, 'one'), (2, 'two')"
    ));
    let connector = Connector::start(&[&table], 2, true);
    let topic = connector.topic(&table);
    let job = Job::new(
        Catalog::Seaweed,
        &[&topic],
        "",
        &format!(
            "[[streams]]\ntopic = \"{topic}\"\nmode = \"append\"\nchange_events = \"debezium\"\ntable = \"{table}\"\n"
        ),
    );
    let mut total = 2;
    let rounds: [&[(String, usize)]; 2] = [
        &[
            (format!("update {table} set name = 'uno' where id = 1"), 1),
            (format!("delete from {table} where id = 2"), 2),
        ],
        &[
            (format!("insert into {table} values (3, 'three')"), 1),
            (format!("truncate {table}"), 1),
            (format!("insert into {table} values (1, 'one again')"), 1),
        ],
    ];
    read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
    job.sync();
    for statements in rounds {
        for (sql, messages) in statements {
            psql(sql);
            total += messages;
        }
        read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
        job.sync();
    }
    // Every event but the tombstones is a row, at its own place.
    let mut want = BTreeMap::new();
    let mut offsets: BTreeMap<i32, i64> = BTreeMap::new();
    for change in read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total) {
        let offset = offsets.entry(change.partition).or_insert(0);
        let at = (i64::from(change.partition), *offset);
        *offset += 1;
        let Some(event) = change.event() else {
            continue;
        };
        let op = event["op"].as_str().unwrap();
        let row = match op {
            "d" => &event["before"],
            "t" => &Value::Null,
            _ => &event["after"],
        };
        let lsn = &event["source"]["lsn"];
        want.insert(
            at,
            json!({"id": row["id"], "name": row["name"], "op": op, "lsn": lsn}),
        );
    }
    let ops: Vec<&str> = want.values().filter_map(|r| r["op"].as_str()).collect();
    for op in ["r", "u", "d", "c", "t"] {
        assert!(ops.contains(&op), "the events include {op}: {ops:?}");
    }
    for engine in ["duckdb", "pyiceberg", "spark", "trino"] {
        assert_eq!(log_rows(engine, &job, &table), want, "{engine}");
    }
    drop(connector);
}

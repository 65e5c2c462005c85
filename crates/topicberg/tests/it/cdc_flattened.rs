//! Debezium's `ExtractNewRecordState` transform: each message is the row
//! itself (no envelope), with the markers asked for by `add.fields`
//! (`__op`, `__lsn`, `__source_ts_ms`) and, with
//! `delete.tombstone.handling.mode=rewrite-with-tombstone`, a delete as the
//! old row with `__deleted = "true"` and its tombstone. With and without
//! the Connect schema, `change_events = "debezium"` keeps the table equal to
//! the source after each round, and `_cdc_lsn` / `_cdc_timestamp` / `_cdc_op`
//! come from the markers (the operation as the `__op` field with the
//! schema, as the `__op` header, `add.headers=op`, without it).

use std::time::Duration;

use serde_json::Value;

use crate::support::cdc::{change_job, copy_rows, psql, query_json, read_changes, Connector};
use crate::support::{try_read, Catalog};
use crate::testbed::unique_name;

const FLATTEN: [(&str, &str); 3] = [
    ("transforms", "unwrap"),
    (
        "transforms.unwrap.type",
        "io.debezium.transforms.ExtractNewRecordState",
    ),
    (
        "transforms.unwrap.delete.tombstone.handling.mode",
        "rewrite-with-tombstone",
    ),
];

fn source_rows(table: &str) -> Vec<Value> {
    query_json(&format!(
        "select id, name, amount::text as amount from {table} order by id"
    ))
}

fn flattened_stream_follows_its_source(schemas: bool) {
    let table = unique_name("cdc_flat");
    psql(&format!(
        "create table {table} (id int primary key, name text, amount numeric(10,2))"
    ));
    psql(&format!(
        "insert into {table} select i, 'n' || i, i * 1.25 from generate_series(1, 5) i"
    ));
    // Without the schema a decimal's bytes cannot be read: as text then.
    // The operation as a field with the schema, as a header without it.
    let mut settings = FLATTEN.to_vec();
    if schemas {
        settings.push(("transforms.unwrap.add.fields", "op,lsn,source.ts_ms"));
    } else {
        settings.push(("transforms.unwrap.add.fields", "lsn,source.ts_ms"));
        settings.push(("transforms.unwrap.add.headers", "op"));
        settings.push(("decimal.handling.mode", "string"));
    }
    let connector = Connector::start_with(&[&table], 2, schemas, &settings);
    let topic = connector.topic(&table);
    let job = change_job(&topic, &table, "");
    let mut total = 5;
    let rounds: [&[(String, usize)]; 2] = [
        &[
            (format!("insert into {table} values (6, 'six', 6.5)"), 1),
            (format!("update {table} set name = 'two' where id = 2"), 1),
            (format!("delete from {table} where id = 3"), 2),
        ],
        &[
            (format!("update {table} set id = 40 where id = 4"), 3),
            (format!("delete from {table} where id = 1"), 2),
            (format!("update {table} set amount = null where id = 6"), 1),
        ],
    ];
    read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
    job.sync();
    for round in rounds {
        for (sql, messages) in round {
            psql(sql);
            total += messages;
        }
        read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
        job.sync();
        let copy = copy_rows("duckdb", &job, &table).expect("DuckDB reads the table");
        assert_eq!(copy, source_rows(&table), "schemas {schemas}");
    }
    // `_cdc_lsn` and `_cdc_timestamp` from each row's last message.
    let changes = read_changes(&topic, Duration::from_secs(60), |c| c.len() >= total);
    let name = format!("{}_topics.{table}", job.name);
    let raw = String::from_utf8(try_read("duckdb", Catalog::Seaweed, &name).stdout).unwrap();
    for line in raw.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        let id = row["id"].as_i64().unwrap();
        let (last, op_header) = changes
            .iter()
            .rev()
            .filter_map(|c| Some((c.value.as_ref()?, &c.op_header)))
            .map(|(v, op)| {
                if v["payload"].is_object() {
                    (&v["payload"], op)
                } else {
                    (v, op)
                }
            })
            .find(|(v, _)| v["id"].as_i64() == Some(id))
            .expect("a message of the row");
        assert_eq!(row["_cdc_lsn"], last["__lsn"], "{row}");
        // `_cdc_op`: the `__op` field (with the schema) or header (without).
        let op = match schemas {
            true => last["__op"].clone(),
            false => Value::from(op_header.clone().expect("an __op header")),
        };
        assert!(matches!(op.as_str(), Some("r" | "c" | "u")), "{op}");
        assert_eq!(row["_cdc_op"], op, "{row}");
        assert!(row["_cdc_timestamp"].is_string(), "{row}");
    }
    drop(connector);
}

#[test]
fn a_flattened_stream_with_its_schema_keeps_the_table_equal_to_the_source() {
    flattened_stream_follows_its_source(true);
}

#[test]
fn a_flattened_stream_without_its_schema_keeps_the_table_equal_to_the_source() {
    flattened_stream_follows_its_source(false);
}
